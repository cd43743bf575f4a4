package testenv

import (
	"context"
	"database/sql"
	"testing"
	"time"
)

// Restart stops the private MariaDB (SIGTERM, after thawing it if it was
// frozen) and starts it again with the same command line: same port, same
// data directory, so clients find their databases again once it is back.
// Restart returns when the server answers. It fails the test when the
// server does not come back; a shared server cannot be restarted.
func (m *MariaDB) Restart(tb testing.TB) {
	tb.Helper()
	if m.shared {
		tb.Fatalf("testenv: Restart on the shared MariaDB; use StartMariaDB for a server a test may restart")
	}
	m.Thaw()
	_ = m.admin.Close()
	old := m.proc
	old.Stop(30 * time.Second)
	// The port was ours a moment ago; a brief conflict is worth waiting out.
	var err error
	for range 20 {
		if err = m.relaunch(old); err == nil {
			return
		}
		if !bindConflict(old.logPath) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	tb.Fatalf("testenv: restart MariaDB on %s: %v", m.Addr, err)
}

func (m *MariaDB) relaunch(old *process) error {
	p, err := startProcess(old.logPath, old.Cmd.Path, old.Cmd.Args[1:]...)
	if err != nil {
		return err
	}
	admin, err := sql.Open("mysql", "root@tcp("+m.Addr+")/?timeout=2s")
	if err != nil {
		p.Stop(10 * time.Second)
		return err
	}
	admin.SetMaxOpenConns(4)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.waitReady(ctx, admin.PingContext); err != nil {
		_ = admin.Close()
		p.Stop(10 * time.Second)
		return withLog(err, old.logPath)
	}
	m.proc, m.admin = p, admin
	return nil
}
