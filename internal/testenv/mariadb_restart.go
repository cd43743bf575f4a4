package testenv

import (
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
	mustBePrivate(tb, m.shared, "Restart", "MariaDB", "StartMariaDB")
	m.Thaw()
	_ = m.admin.Close()
	old := m.proc
	old.Stop(30 * time.Second)
	// The port was ours a moment ago; a brief conflict is worth waiting out.
	err := retryBind(20, 250*time.Millisecond, func() error {
		p, admin, err := launchMariaDB(old.logPath, m.Addr, old.Cmd.Path, old.Cmd.Args[1:])
		if err == nil {
			m.proc, m.admin = p, admin
		}
		return err
	}, func(error) bool { return bindConflict(old.logPath) })
	if err != nil {
		tb.Fatalf("testenv: restart MariaDB on %s: %v", m.Addr, err)
	}
}
