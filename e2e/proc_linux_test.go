package e2e

import "syscall"

// sysProcAttr makes the kernel kill a child (gateway or download tool) when
// the test binary dies, so that a -timeout panic, which skips every Cleanup,
// leaves nothing running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
