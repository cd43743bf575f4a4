//go:build !unix

package storagetest

import "time"

// processCPU is not measured here.
func processCPU() time.Duration { return 0 }
