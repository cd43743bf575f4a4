//go:build !linux

package testenv

import "syscall"

// SysProcAttr has no parent-death signal outside Linux; Cleanup and Main
// still stop the servers, a crashed test binary may leave them behind.
func SysProcAttr() *syscall.SysProcAttr { return nil }

// probeXattr cannot check portably; versitygw reports the problem itself.
func probeXattr(string) error { return nil }

// processAlive cannot tell without /proc; assuming life keeps the sweep from
// removing a directory that is in use.
func processAlive(int) bool { return true }

// lockFile does not lock outside Linux; concurrent bootstraps then race, and
// the atomic rename still keeps every template whole.
func lockFile(string) (func(), error) { return func() {}, nil }
