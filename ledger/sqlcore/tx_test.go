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
	// hangExec makes every Exec wait for its context, as on a database
	// that stopped answering; hangCommit makes COMMIT wait until closed
	// (drivers cannot cancel a COMMIT).
	hangExec   bool
	hangCommit chan struct{}
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

func (c *scriptedConn) ExecContext(ctx context.Context, _ string, _ []driver.NamedValue) (driver.Result, error) {
	if c.d.hangExec {
		<-ctx.Done()
		return nil, ctx.Err()
	}
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
	if t.d.hangCommit != nil {
		<-t.d.hangCommit
	}
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
		NowSQL:        "?",
		Plus:          func(expr string) string { return expr + " + ?" },
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

func TestHungStatementIsUnavailableWithinTheTimeout(t *testing.T) {
	d := &scriptedDB{hangExec: true}
	db := mustScripted(t, d)
	db.Timeout = 50 * time.Millisecond
	for name, call := range map[string]func() error{
		"Claim": func() error { _, err := db.Claim(context.Background(), claimReq); return err },
		// A slot call on the request path, detached from the client as
		// the gateway's release is: the ledger's own deadline still ends it.
		"SlotAcquire": func() error { return db.SlotAcquire(context.Background(), "s", "h", time.Minute) },
		"SlotRelease": func() error { return db.SlotRelease(context.WithoutCancel(context.Background()), "s", "h") },
	} {
		start := time.Now()
		err := call()
		if !errors.Is(err, ledger.ErrUnavailable) {
			t.Errorf("%s on a hung database = %v, want ErrUnavailable", name, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s took %v with a 50ms timeout", name, d)
		}
	}
}

func TestHungCommitIsAmbiguousWithinTheTimeout(t *testing.T) {
	d := &scriptedDB{hangCommit: make(chan struct{})}
	t.Cleanup(func() { close(d.hangCommit) })
	db := mustScripted(t, d)
	db.Timeout = 50 * time.Millisecond
	start := time.Now()
	g, err := db.Claim(context.Background(), claimReq)
	if !errors.Is(err, ledger.ErrAmbiguous) || g == nil {
		t.Fatalf("Claim with a COMMIT that never answers = %v, %v; want ErrAmbiguous with the grant", g, err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("Claim took %v with a 50ms timeout", el)
	}
	if d.begins != 1 {
		t.Fatalf("begins=%d, want one attempt: a COMMIT is never retried", d.begins)
	}
}
