//go:build !linux

package deliver

import "os"

// fileIdentity is unknown off Linux: every whole download is checked.
func fileIdentity(*os.File) (fileID, bool) { return fileID{}, false }
