package testenv

import (
	"bytes"
	"os"
	"strconv"
	"syscall"
)

// SysProcAttr makes the kernel kill a server when the test binary dies, so a
// test that panics or hits -timeout (no Cleanup, no TestMain epilogue) does
// not leave mariadbd or versitygw running. The signal follows the thread
// that started the server, not the process: a goroutine that calls
// runtime.LockOSThread must unlock before it exits, or Go ends its thread
// and every server started from that thread is killed with it.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// probeXattr checks that dir's filesystem stores user extended attributes,
// which versitygw's posix backend keeps its object metadata in.
func probeXattr(dir string) error {
	return syscall.Setxattr(dir, "user.dlgate.testenv", []byte("1"), 0)
}

// processAlive reports whether pid runs. A zombie counts as dead: its
// directory is no longer in use even if nobody has reaped it yet.
func processAlive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name, which may itself
	// contain spaces and parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// lockFile takes an exclusive lock shared with other processes, waiting for
// it; the returned function releases it.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
