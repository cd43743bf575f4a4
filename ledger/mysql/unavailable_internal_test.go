package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore"
)

// The ways a connection ends under a statement when the server restarts,
// is killed or frozen are the database being unavailable (503), never a
// 500; a wrong statement is not.
func TestIsUnavailable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{&gomysql.MySQLError{Number: erServerShutdown}, true},
		{&gomysql.MySQLError{Number: erConnectionKilled}, true},
		{&gomysql.MySQLError{Number: erQueryInterrupted}, true},
		{&gomysql.MySQLError{Number: erQueryTimeout}, true},
		{&gomysql.MySQLError{Number: erConCount}, true},
		{fmt.Errorf("claim: %w", gomysql.ErrInvalidConn), true},
		{sql.ErrConnDone, true},
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{io.EOF, true},
		{fmt.Errorf("write: %w", syscall.ECONNRESET), true},
		{syscall.EPIPE, true},
		{&gomysql.MySQLError{Number: 1064}, false}, // a syntax error
		{&gomysql.MySQLError{Number: erDupEntry}, false},
		{errors.New("something else"), false},
	} {
		if got := isUnavailable(tc.err); got != tc.want {
			t.Errorf("isUnavailable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// failingConn is a driver connection whose every statement fails with err.
type failingConn struct {
	err   error
	execs *int
}

func (c failingConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("no prepare") }
func (c failingConn) Close() error                        { return nil }
func (c failingConn) Begin() (driver.Tx, error)           { return failingTx{}, nil }
func (c failingConn) ExecContext(context.Context, string, []driver.NamedValue) (driver.Result, error) {
	*c.execs++
	return nil, c.err
}

type failingTx struct{}

func (failingTx) Commit() error   { return nil }
func (failingTx) Rollback() error { return nil }

type failingConnector struct{ conn failingConn }

func (f failingConnector) Connect(context.Context) (driver.Conn, error) { return f.conn, nil }
func (f failingConnector) Driver() driver.Driver                        { return nil }

// TestTiDBsLockWaitsAreUnavailable: the answers TiDB gives a statement
// that waited for a held row (1205 in pessimistic mode, 1105 "lock wait
// timeout" on some paths, as v8.5.3 answered AllowanceAdd and LinkRevoke)
// and its write conflicts (tidbLockWaits) are run again and then
// ErrUnavailable (503), never an unclassified error (500). The claim
// path's: TestTiDBsLockWaitsInAClaimAreUnavailable.
func TestTiDBsLockWaitsAreUnavailable(t *testing.T) {
	for _, e := range tidbLockWaits {
		for name, call := range map[string]func(*sqlcore.DB) error{
			"AllowanceAdd": func(db *sqlcore.DB) error { return db.AllowanceAdd(context.Background(), "l", 1, "more") },
			"LinkRevoke":   func(db *sqlcore.DB) error { return db.LinkRevoke(context.Background(), "l") },
		} {
			execs := 0
			pool := sql.OpenDB(failingConnector{failingConn{err: e, execs: &execs}})
			db := sqlcore.New(pool, DialectFor(Engine{Kind: TiDB, Major: 8, Minor: 5, Patch: 3}))
			err := call(db)
			pool.Close()
			if !errors.Is(err, ledger.ErrUnavailable) {
				t.Errorf("%s answered %d %q = %v; want ErrUnavailable", name, e.Number, e.Message, err)
			}
			if execs < 2 {
				t.Errorf("%s answered %d %q ran %d time(s); want it run again", name, e.Number, e.Message, execs)
			}
		}
	}
}
