//go:build !linux

package e2e

import "syscall"

// sysProcAttr: only Linux can tie a child's life to ours; elsewhere
// Cleanup is the only guard.
func sysProcAttr() *syscall.SysProcAttr { return nil }
