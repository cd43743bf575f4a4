package testenv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql" // the admin connection and NewDatabase
)

const whatMariaDB = "MariaDB (mariadbd and mariadb-install-db, Debian package mariadb-server)"

// MariaDB is a private mariadbd with its own data directory, reachable over
// TCP on Addr as user root with an empty password. Grant tables are on, so
// tests may create users with passwords and check authentication failures.
// The shared one may instead be an operator's own server (EnvMySQLDSN):
// MySQL, MariaDB or TiDB, reached as the DSN says.
type MariaDB struct {
	// Addr is "127.0.0.1:PORT", or the external server's address.
	Addr string

	dir      string
	proc     *process
	admin    *sql.DB
	shared   bool
	external *gomysql.Config // the operator's DSN without a database; nil for ours
	once     sync.Once
}

// StartMariaDB starts a private MariaDB for tb and stops it, removing its
// data, in tb.Cleanup. It takes about a second. A missing or broken MariaDB
// installation stops the test through Require.
func StartMariaDB(tb testing.TB) *MariaDB {
	tb.Helper()
	m, err := startMariaDB()
	Require(tb, whatMariaDB, err)
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("testenv: MariaDB log tail (%s):\n%s", m.Addr, logTail(m.proc.logPath, 15))
		}
		m.shutdown()
	})
	return m
}

// SharedMariaDB returns the MariaDB shared by all tests of this test binary,
// starting it on first use. Tests isolate themselves with NewDatabase. The
// package's TestMain must call Main, which stops the server. When
// EnvMySQLDSN is set, it is the server that names instead, which testenv
// neither starts nor stops; a server it cannot reach fails the test.
func SharedMariaDB(tb testing.TB) *MariaDB {
	tb.Helper()
	requireMain(tb, "SharedMariaDB")
	m, err := sharedDB.get(func() (*MariaDB, error) {
		if m, ok, err := externalMySQL(); ok {
			return m, err
		}
		return startShared(startMariaDB)()
	})
	if os.Getenv(EnvMySQLDSN) != "" && err != nil {
		tb.Fatalf("testenv: %v", err) // asked for, so never a skip
	}
	Require(tb, whatMariaDB, err)
	return m
}

func (m *MariaDB) markShared() { m.shared = true }

// DSN returns the go-sql-driver DSN for database db as root, without
// parameters, the way an operator would write GATEWAY_DB_DSN; on an
// external server, the operator's DSN with db as its database.
func (m *MariaDB) DSN(db string) string {
	if m.external != nil {
		c := m.external.Clone()
		c.DBName = db
		return c.FormatDSN()
	}
	return fmt.Sprintf("root@tcp(%s)/%s", m.Addr, db)
}

// NewDatabase creates a database with a fresh name, derived from the test's
// name, and returns its DSN (see DSN). On our own servers the database is
// not dropped: it dies with the server, and dropping it could block on
// connections the test has not closed yet. On an external server it is
// dropped when the test ends (dropLater).
func (m *MariaDB) NewDatabase(tb testing.TB) string {
	tb.Helper()
	name := uniqueName(tb, '_', 64)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := m.admin.ExecContext(ctx, "CREATE DATABASE `"+name+"`"); err != nil {
		tb.Fatalf("testenv: create database %s on %s: %v", name, m.Addr, err)
	}
	if m.external != nil {
		m.dropLater(tb, name)
	}
	return m.DSN(name)
}

// Stop shuts a private server down early, for example to test how the
// gateway behaves when its database disappears. It is idempotent, and the
// Cleanup registered by StartMariaDB still removes the data afterwards. A
// shared server cannot be stopped by a test; Stop panics on one.
func (m *MariaDB) Stop() {
	if m.shared {
		panic("testenv: Stop on the shared MariaDB; use StartMariaDB for a server a test may stop")
	}
	_ = m.admin.Close()
	m.proc.Stop(30 * time.Second)
}

// shutdown stops the server and removes its directory, once; of an
// external server it only closes the connection.
func (m *MariaDB) shutdown() {
	m.once.Do(func() {
		_ = m.admin.Close()
		if m.external != nil {
			return
		}
		m.proc.Stop(30 * time.Second)
		_ = os.RemoveAll(m.dir)
	})
}

// mariadbdArgs are the server options shared by bootstrap and run. InnoDB is
// kept small because several test binaries run servers side by side; native
// AIO is off because parallel servers can exhaust fs.aio-max-nr and
// containers often forbid io_uring. utf8mb4 mirrors Debian's packaged
// configuration, which --no-defaults skips.
var mariadbdArgs = []string{
	"--innodb-buffer-pool-size=64M",
	"--innodb-log-file-size=16M",
	"--innodb-use-native-aio=0",
	"--skip-log-bin",
	"--character-set-server=utf8mb4",
	"--collation-server=utf8mb4_general_ci",
	"--skip-name-resolve",
}

func startMariaDB() (*MariaDB, error) {
	mariadbd, err := FindBinary("mariadbd")
	if err != nil {
		return nil, err
	}
	installDB, err := FindBinary("mariadb-install-db")
	if err != nil {
		return nil, err
	}
	dir, err := mkServerDir(tempParent(), "dlgate-mariadb-")
	if err != nil {
		return nil, err
	}
	m, err := bootMariaDB(dir, mariadbd, installDB)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return m, nil
}

func bootMariaDB(dir, mariadbd, installDB string) (*MariaDB, error) {
	template, err := mariadbTemplate(mariadbd, installDB)
	if err != nil {
		return nil, err
	}
	datadir := filepath.Join(dir, "data")
	if err := copyTree(template, datadir); err != nil {
		return nil, fmt.Errorf("copy MariaDB template datadir: %w", err)
	}

	logPath := filepath.Join(dir, "mariadbd.log")
	var m *MariaDB
	err = retryBind(3, 0, func() error {
		port, err := freePort()
		if err != nil {
			return err
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		args := append([]string{
			"--no-defaults",
			"--datadir=" + datadir,
			"--socket=" + filepath.Join(dir, "mysqld.sock"),
			"--pid-file=" + filepath.Join(dir, "mysqld.pid"),
			"--tmpdir=" + dir,
			"--port=" + strconv.Itoa(port),
			"--bind-address=127.0.0.1",
			"--max-connections=500",
			"--innodb-lock-wait-timeout=10",
			"--innodb-flush-log-at-trx-commit=2",
		}, asUser()...)
		args = append(args, mariadbdArgs...)
		p, admin, err := launchMariaDB(logPath, addr, mariadbd, args)
		if err == nil {
			m = &MariaDB{Addr: addr, dir: dir, proc: p, admin: admin}
		}
		return err
	}, func(err error) bool { return errors.Is(err, errExited) && bindConflict(logPath) })
	return m, err
}

// launchMariaDB starts bin with args, logging to logPath, and returns it
// with its admin connection once it answers on addr as root; what failed
// it stopped.
func launchMariaDB(logPath, addr, bin string, args []string) (*process, *sql.DB, error) {
	p, err := startProcess(logPath, bin, args...)
	if err != nil {
		return nil, nil, err
	}
	admin, err := sql.Open("mysql", "root@tcp("+addr+")/?timeout=2s")
	if err != nil {
		p.Stop(10 * time.Second)
		return nil, nil, err
	}
	admin.SetMaxOpenConns(4)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := p.waitReady(ctx, admin.PingContext); err != nil {
		_ = admin.Close()
		p.Stop(10 * time.Second)
		return nil, nil, withLog(fmt.Errorf("mariadbd on %s: %w", addr, err), logPath)
	}
	return p, admin, nil
}
