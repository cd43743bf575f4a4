package sqlcore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

// scriptedDB is a database/sql driver whose statements and commits fail as
// a test scripts them, to exercise the retry and commit rules that a real
// server only shows under rare faults.
type scriptedDB struct {
	mu        sync.Mutex
	execErrs  []error // returned by the next Execs, in order; then success
	commitErr error
	begins    int
	commits   int
}

var errDeadlock = errors.New("scripted deadlock")

func (d *scriptedDB) Connect(context.Context) (driver.Conn, error) { return &scriptedConn{d}, nil }
func (d *scriptedDB) Driver() driver.Driver                        { return nil }

type scriptedConn struct{ d *scriptedDB }

func (c *scriptedConn) Prepare(string) (driver.Stmt, error) {
	return nil, errors.New("scripted: no prepared statements")
}
func (c *scriptedConn) Close() error { return nil }
func (c *scriptedConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *scriptedConn) BeginTx(context.Context, driver.TxOptions) (driver.Tx, error) {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	c.d.begins++
	return scriptedTx{c.d}, nil
}

func (c *scriptedConn) ExecContext(context.Context, string, []driver.NamedValue) (driver.Result, error) {
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if len(c.d.execErrs) > 0 {
		err := c.d.execErrs[0]
		c.d.execErrs = c.d.execErrs[1:]
		return nil, err
	}
	return driver.RowsAffected(1), nil
}

type scriptedTx struct{ d *scriptedDB }

func (t scriptedTx) Commit() error {
	t.d.mu.Lock()
	defer t.d.mu.Unlock()
	t.d.commits++
	return t.d.commitErr
}
func (t scriptedTx) Rollback() error { return nil }

func mustScripted(tb testing.TB, d *scriptedDB) *DB {
	tb.Helper()
	db := sql.OpenDB(d)
	tb.Cleanup(func() { db.Close() })
	return New(db, Dialect{
		Name:          "scripted",
		Time:          func(t time.Time) any { return t },
		IsDuplicate:   func(error) bool { return false },
		IsRetryable:   func(err error) bool { return errors.Is(err, errDeadlock) },
		IsUnavailable: func(error) bool { return false },
	})
}

var claimReq = ledger.ClaimRequest{LinkID: "l", Kind: ledger.KindStream}

func TestClaimRetriesADeadlockedTransaction(t *testing.T) {
	d := &scriptedDB{execErrs: []error{errDeadlock, errDeadlock}}
	g, err := mustScripted(t, d).Claim(context.Background(), claimReq)
	if err != nil || g == nil {
		t.Fatalf("Claim after two deadlocks = %v, %v; want a grant", g, err)
	}
	if d.begins != 3 || d.commits != 1 {
		t.Fatalf("begins=%d commits=%d, want 3 and 1", d.begins, d.commits)
	}
}

func TestClaimGivesUpAfterBoundedRetries(t *testing.T) {
	errs := make([]error, 50)
	for i := range errs {
		errs[i] = errDeadlock
	}
	d := &scriptedDB{execErrs: errs}
	_, err := mustScripted(t, d).Claim(context.Background(), claimReq)
	if !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("Claim under endless deadlocks = %v, want ErrUnavailable", err)
	}
	if d.begins != maxAttempts || d.commits != 0 {
		t.Fatalf("begins=%d commits=%d, want %d and 0", d.begins, d.commits, maxAttempts)
	}
}

func TestFailedCommitIsAmbiguousAndNeverRetried(t *testing.T) {
	d := &scriptedDB{commitErr: errDeadlock} // even a "retryable" error: COMMIT's fate is unknown
	g, err := mustScripted(t, d).Claim(context.Background(), claimReq)
	if !errors.Is(err, ledger.ErrAmbiguous) {
		t.Fatalf("Claim with a failing COMMIT = %v, want ErrAmbiguous", err)
	}
	if g == nil || g.ID == "" {
		t.Fatal("an ambiguous claim must name its grant for the log")
	}
	if d.begins != 1 || d.commits != 1 {
		t.Fatalf("begins=%d commits=%d, want exactly one attempt", d.begins, d.commits)
	}
}

func TestNonRetryableErrorIsNotRetried(t *testing.T) {
	boom := errors.New("syntax error")
	d := &scriptedDB{execErrs: []error{boom}}
	_, err := mustScripted(t, d).Claim(context.Background(), claimReq)
	if !errors.Is(err, boom) || errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("Claim = %v, want the statement's own error", err)
	}
	if d.begins != 1 {
		t.Fatalf("begins=%d, want 1", d.begins)
	}
}
