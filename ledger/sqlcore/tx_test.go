package sqlcore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// scriptedDB is a database/sql driver whose statements and commits fail as
// a test scripts them, to exercise the retry and commit rules that a real
// server only shows under rare faults. A read of links finds one live
// stream link with 5 downloads; a read of grants finds the grants it asks
// for when landed is set, none otherwise (or fails with grantsErr).
type scriptedDB struct {
	mu         sync.Mutex
	execErrs   []error // returned by the next Execs, in order; then success
	commitErrs []error // returned by the next COMMITs, in order; then success
	landed     bool
	grantsErr  error
	begins     int
	commits    int
	execs      []string
	// hangExec makes every statement wait for its context, as on a
	// database that stopped answering; hangCommit makes COMMIT wait until
	// closed (drivers cannot cancel a COMMIT).
	hangExec   bool
	hangCommit chan struct{}
	// deadlines are the deadlines of the contexts the transactions and
	// statements ran with, in order (the zero time: none).
	deadlines []time.Time
}

// saw notes the deadline of a context a call ran with.
func (d *scriptedDB) saw(ctx context.Context) {
	dl, _ := ctx.Deadline()
	d.mu.Lock()
	d.deadlines = append(d.deadlines, dl)
	d.mu.Unlock()
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

func (c *scriptedConn) BeginTx(ctx context.Context, _ driver.TxOptions) (driver.Tx, error) {
	c.d.saw(ctx)
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	c.d.begins++
	return scriptedTx{c.d}, nil
}

func (c *scriptedConn) ExecContext(ctx context.Context, q string, _ []driver.NamedValue) (driver.Result, error) {
	c.d.saw(ctx)
	if c.d.hangExec {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	c.d.execs = append(c.d.execs, q)
	if len(c.d.execErrs) > 0 {
		err := c.d.execErrs[0]
		c.d.execErrs = c.d.execErrs[1:]
		return nil, err
	}
	return driver.RowsAffected(1), nil
}

func (c *scriptedConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	c.d.saw(ctx)
	if c.d.hangExec {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	c.d.mu.Lock()
	defer c.d.mu.Unlock()
	if strings.Contains(q, "FROM grants") {
		if c.d.grantsErr != nil {
			return nil, c.d.grantsErr
		}
		r := &scriptedRows{cols: []string{"id"}}
		for _, a := range args {
			if c.d.landed {
				r.rows = append(r.rows, []driver.Value{a.Value})
			}
		}
		return r, nil
	}
	now := time.Now().UTC()
	// linkColumns, event_seq and the database's clock.
	return &scriptedRows{cols: make([]string, 26), rows: [][]driver.Value{{
		"l", make([]byte, 32), "b", "k", "v", int64(10), `"e"`, "t", nil, "f", nil, int64(5), int64(5),
		now.Add(time.Hour), nil, now, "stream", false, int64(0), int64(0), int64(0), nil, nil, int64(0), int64(0), now,
	}}}, nil
}

type scriptedRows struct {
	cols []string
	rows [][]driver.Value
}

func (r *scriptedRows) Columns() []string { return r.cols }
func (r *scriptedRows) Close() error      { return nil }
func (r *scriptedRows) Next(dest []driver.Value) error {
	if len(r.rows) == 0 {
		return io.EOF
	}
	copy(dest, r.rows[0])
	r.rows = r.rows[1:]
	return nil
}

type scriptedTx struct{ d *scriptedDB }

func (t scriptedTx) Commit() error {
	if t.d.hangCommit != nil {
		<-t.d.hangCommit
	}
	t.d.mu.Lock()
	defer t.d.mu.Unlock()
	t.d.commits++
	if len(t.d.commitErrs) > 0 {
		err := t.d.commitErrs[0]
		t.d.commitErrs = t.d.commitErrs[1:]
		return err
	}
	return nil
}
func (t scriptedTx) Rollback() error { return nil }

func mustScripted(tb testing.TB, d *scriptedDB) *DB {
	tb.Helper()
	db := sql.OpenDB(d)
	tb.Cleanup(func() { db.Close() })
	return New(db, engine.Dialect{
		Name:          "scripted",
		Time:          func(t time.Time) any { return t },
		IsDuplicate:   func(error) bool { return false },
		IsRetryable:   func(err error) bool { return errors.Is(err, errDeadlock) },
		IsUnavailable: func(error) bool { return false },
		NowSQL:        "?",
		Plus:          func(expr string) string { return expr + " + ?" },
	})
}

var claimReq = ledger.ClaimRequest{Kind: ledger.KindStream}

// claimOf is LinkClaim of the scripted link, as a grant.
func claimOf(ctx context.Context, db *DB) (*ledger.Grant, error) {
	o, err := db.LinkClaim(ctx, make([]byte, 32), claimReq, false)
	return o.Grant, err
}

func TestClaimRetriesADeadlockedTransaction(t *testing.T) {
	d := &scriptedDB{execErrs: []error{errDeadlock, errDeadlock}}
	g, err := claimOf(context.Background(), mustScripted(t, d))
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
	_, err := claimOf(context.Background(), mustScripted(t, d))
	if !errors.Is(err, ledger.ErrUnavailable) {
		t.Fatalf("Claim under endless deadlocks = %v, want ErrUnavailable", err)
	}
	if d.begins != engine.MaxAttempts || d.commits != 0 {
		t.Fatalf("begins=%d commits=%d, want %d and 0", d.begins, d.commits, engine.MaxAttempts)
	}
}

// TestAFailedCommitIsSettledByAReadThatWaitsForIt: a COMMIT that fails is
// never run again; a read of the grant after it (which, on a real engine,
// waits for the failed transaction's locks) settles it: the grant is there
// (granted), it is not (nothing spent: ErrUnavailable), or the read fails
// too (ErrAmbiguous, with the grant for the log).
func TestAFailedCommitIsSettledByAReadThatWaitsForIt(t *testing.T) {
	for _, c := range []struct {
		name    string
		landed  bool
		readErr error
		want    error
	}{
		{"Committed", true, nil, nil},
		{"RolledBack", false, nil, ledger.ErrUnavailable},
		{"Unknown", false, errors.New("scripted: the read-back failed too"), ledger.ErrAmbiguous},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Even a "retryable" error: COMMIT's fate is unknown.
			d := &scriptedDB{commitErrs: []error{errDeadlock}, landed: c.landed, grantsErr: c.readErr}
			g, err := claimOf(context.Background(), mustScripted(t, d))
			switch {
			case c.want == nil && (err != nil || g == nil):
				t.Fatalf("LinkClaim whose COMMIT failed and landed = %v, %v; want the grant", g, err)
			case c.want != nil && !errors.Is(err, c.want):
				t.Fatalf("LinkClaim whose COMMIT failed = %v, %v; want %v", g, err, c.want)
			case errors.Is(c.want, ledger.ErrAmbiguous) && (g == nil || g.ID == ""):
				t.Fatal("an ambiguous claim must name its grant for the log")
			case errors.Is(c.want, ledger.ErrUnavailable) && g != nil:
				t.Fatalf("a claim that did not take effect returned the grant %+v", g)
			}
			// One claim transaction (never run again) and one read-back.
			if d.begins != 2 || d.commits != 2 && c.readErr == nil {
				t.Fatalf("begins=%d commits=%d, want the claim once and one read-back", d.begins, d.commits)
			}
		})
	}
}

func TestNonRetryableErrorIsNotRetried(t *testing.T) {
	boom := errors.New("syntax error")
	d := &scriptedDB{execErrs: []error{boom}}
	_, err := claimOf(context.Background(), mustScripted(t, d))
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
		"LinkClaim": func() error { _, err := claimOf(context.Background(), db); return err },
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
	g, err := claimOf(context.Background(), db)
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

// A caller's deadline bounds every statement of the transactions its call
// makes, though they are detached from its cancellation: a claim, the
// read-back of its failed COMMIT, a refund. The gateway's refund before a
// 503 sets a short one after the claim spent the request's wait; each
// had a whole Timeout of its own after it, and a frozen database held
// such a 503 for two timeouts (the chaos test saw 4 s against 2 s).
func TestACallersDeadlineBoundsItsDetachedTransactions(t *testing.T) {
	for name, call := range map[string]func(context.Context, *DB) error{
		"LinkClaim whose COMMIT fails, and its read-back": func(ctx context.Context, db *DB) error {
			_, err := claimOf(ctx, db)
			return err
		},
		"GrantRefund": func(ctx context.Context, db *DB) error { return db.GrantRefund(ctx, "g") },
	} {
		t.Run(name, func(t *testing.T) {
			d := &scriptedDB{commitErrs: []error{errors.New("scripted: connection lost during COMMIT")}, landed: true}
			db := mustScripted(t, d)
			db.Timeout = time.Hour
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			want, _ := ctx.Deadline()
			_ = call(ctx, db) // the outcome is another test's; the deadlines are this one's
			if len(d.deadlines) == 0 {
				t.Fatal("no statement ran")
			}
			for i, dl := range d.deadlines {
				if dl.IsZero() || dl.After(want) {
					t.Errorf("call %d of %d ran with deadline %v, want one by the caller's %v (Timeout is an hour)",
						i+1, len(d.deadlines), dl.Format(time.RFC3339Nano), want.Format(time.RFC3339Nano))
				}
			}
		})
	}
}
