package testenv

import (
	"syscall"
	"testing"
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
	if s.shared {
		tb.Fatalf("testenv: Freeze on the shared S3 server; use StartS3 for a server a test may freeze")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	freeze(tb, s.proc.Proc, "versitygw")
	tb.Cleanup(s.Thaw)
}

// Thaw resumes a frozen server (SIGCONT); on a running one it does nothing.
func (s *S3) Thaw() {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = s.proc.Signal(syscall.SIGCONT)
}

// Pid is the server's process id (it changes with Restart).
func (s *S3) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc.Pid()
}

// Freeze stops the private MariaDB with SIGSTOP until Thaw; tb.Cleanup
// thaws it in any case. A shared server cannot be frozen: Freeze fails
// the test.
func (m *MariaDB) Freeze(tb testing.TB) {
	tb.Helper()
	if m.shared {
		tb.Fatalf("testenv: Freeze on the shared MariaDB; use StartMariaDB for a server a test may freeze")
	}
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
}
