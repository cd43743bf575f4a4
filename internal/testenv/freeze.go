package testenv

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Freezing a server (SIGSTOP) is the fault a stopped process cannot
// show: its listening socket and open connections stay up, the kernel
// still completes new TCP handshakes, and nothing answers, as with a hung
// host or a process stuck in the kernel. Clients wait until their own
// deadlines end the wait.

// Freeze stops the private server with SIGSTOP until Thaw; tb.Cleanup
// thaws it in any case. A shared server cannot be frozen: Freeze fails
// the test.
func (s *S3) Freeze(tb testing.TB) {
	tb.Helper()
	mustBePrivate(tb, s.shared, "Freeze", "S3 server", "StartS3")
	s.mu.Lock()
	defer s.mu.Unlock()
	tb.Cleanup(s.Thaw)
	if s.weed != nil {
		// The whole cluster hangs, as a host would; its balancer, in
		// this process, still takes connections, as a load balancer
		// in front of hung gateways does.
		for _, p := range s.weed.procs() {
			freeze(tb, p, "weed")
		}
		return
	}
	freeze(tb, s.proc.Proc, "versitygw")
}

// Thaw resumes a frozen server (SIGCONT); on a running one it does nothing.
func (s *S3) Thaw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.weed != nil {
		for _, p := range s.weed.procs() {
			_ = p.Signal(syscall.SIGCONT)
		}
		return
	}
	_ = s.proc.Signal(syscall.SIGCONT)
}

// Pid is the server's process id (it changes with Restart); of a
// SeaweedFS cluster, its first S3 gateway's.
func (s *S3) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.weed != nil {
		return s.weed.gateways()[0].proc.Pid()
	}
	return s.proc.Pid()
}

// Freeze stops the private MariaDB with SIGSTOP until Thaw; tb.Cleanup
// thaws it in any case. A shared server cannot be frozen: Freeze fails
// the test.
func (m *MariaDB) Freeze(tb testing.TB) {
	tb.Helper()
	mustBePrivate(tb, m.shared, "Freeze", "MariaDB", "StartMariaDB")
	freeze(tb, m.proc.Proc, "mariadbd")
	tb.Cleanup(m.Thaw)
}

// Thaw resumes a frozen MariaDB (SIGCONT); on a running one it does
// nothing.
func (m *MariaDB) Thaw() { _ = m.proc.Signal(syscall.SIGCONT) }

// Pid is the server's process id (it changes with Restart).
func (m *MariaDB) Pid() int { return m.proc.Pid() }

func freeze(tb testing.TB, p *Proc, what string) {
	tb.Helper()
	if p.Exited() {
		tb.Fatalf("testenv: Freeze: %s is not running (%v)", what, p.Err())
	}
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		tb.Fatalf("testenv: SIGSTOP %s (pid %d): %v", what, p.Pid(), err)
	}
	// The signal is delivered asynchronously, thread by thread; a thread
	// busy on another CPU could still answer a request sent right after
	// kill returned. Freeze returns once every thread is stopped.
	deadline := time.Now().Add(5 * time.Second)
	for !stopped(p.Pid()) {
		if time.Now().After(deadline) {
			tb.Fatalf("testenv: %s (pid %d) not stopped 5 s after SIGSTOP", what, p.Pid())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stopped reports whether every thread of pid is in the stopped state
// (T), by /proc. Without /proc it reports true: there is nothing to wait
// on.
func stopped(pid int) bool {
	tasks, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return true
	}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "task", task.Name(), "stat"))
		if err != nil {
			continue // the thread just ended
		}
		// The state follows the parenthesised command name.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			continue
		}
		if st := b[i+2]; st != 'T' && st != 't' {
			return false
		}
	}
	return true
}
