package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
)

// MaxAttempts bounds how often a transaction that hit a deadlock, a
// lock-wait timeout or a busy database is run again.
const MaxAttempts = 5

// DefaultTimeout is DB.Timeout when none is set (GATEWAY_DB_TIMEOUT).
const DefaultTimeout = 5 * time.Second

// DB is a database the ledger runs on, and how every part of the ledger
// calls it: each call bounded by Timeout and the request's wait (Bound),
// transactions run by InTx with the ledger's one retry loop (Retry), and
// driver errors mapped to the ledger's (Classify). ledger/sqlcore's DB
// embeds it.
type DB struct {
	// Pool is the database.
	Pool *sql.DB
	// D is what the engine beneath speaks.
	D Dialect
	// Now is the process's clock. It stamps records (created_at,
	// revoked_at, refunded_at) and nothing else: no decision reads it, so
	// a gateway whose clock is off cannot take a slot another process
	// holds or claim an expired link (see DBClock).
	Now ledger.Clock
	// DBClock stands in for the database's clock in the statements that
	// decide: the claim's expiry test, the budget draw's, slot leases,
	// the sweeper. nil, as in production, means the database's own clock
	// (UTC_TIMESTAMP(6) on MySQL, unixepoch('subsec') on SQLite); tests
	// set it to move time.
	DBClock ledger.Clock
	// Timeout bounds each call to the database: a lookup, a budget draw,
	// a slot call, a whole claim transaction (GATEWAY_DB_TIMEOUT, default
	// DefaultTimeout). A call past it fails with ErrUnavailable, or
	// ErrAmbiguous when it was COMMIT that ran out of time.
	Timeout time.Duration
	// BeforeCommit, when set, runs inside every transaction of InTx after
	// its statements, just before COMMIT (not in the claim batch of
	// Dialect.Batch); an error rolls the transaction back and is
	// returned. Tests set it to fail a change after its statements and
	// show that nothing of it remains (its audit entry included).
	BeforeCommit func(ctx context.Context, tx *sql.Tx) error

	stmts sync.Map // statement template -> the dialect's text
}

// Bound gives one call to the database its own deadline, so that a hung
// server costs a request at most Timeout instead of the driver's read
// timeout.
//
// Within a request (ledger.WithWait) the Bound is what the request's
// earlier calls left of one Timeout, so however many calls a request
// makes, together they wait at most Timeout (plus a COMMIT already sent,
// whose outcome is unknown anyway).
func (s *DB) Bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return s.window(ctx, ctx)
}

// Detached is Bound for a transaction: detached from the caller's
// cancellation (a client that hangs up mid-claim must not turn a COMMIT
// into an unknown outcome), but neither from its wait nor from a deadline
// the caller set: a refund that must end before its request is answered,
// the read-back of a failed COMMIT within its claim's deadline, a
// transaction made inside another call within that call's. Without it,
// each of those had a Timeout of its own after the caller's deadline had
// passed, and a frozen database held a 503 for two timeouts.
func (s *DB) Detached(ctx context.Context) (context.Context, context.CancelFunc) {
	parent := context.WithoutCancel(ctx)
	dl, ok := ctx.Deadline()
	if !ok {
		return s.window(ctx, parent)
	}
	parent, stop := context.WithDeadline(parent, dl)
	bounded, cancel := s.window(ctx, parent)
	return bounded, func() {
		cancel()
		stop()
	}
}

// inCall marks a context already bound by window: a call made inside
// another (a read after a transaction's work) is within its deadline and
// is not charged twice.
type inCall struct{}

func (s *DB) window(ctx, parent context.Context) (context.Context, context.CancelFunc) {
	if ctx.Value(inCall{}) != nil {
		return context.WithTimeout(parent, s.CallTimeout())
	}
	d, end := ledger.WaitOf(ctx).Begin(s.CallTimeout())
	bounded, cancel := context.WithTimeout(context.WithValue(parent, inCall{}, true), d)
	return bounded, func() {
		cancel()
		end()
	}
}

// CallTimeout is Timeout, or DefaultTimeout when none is set.
func (s *DB) CallTimeout() time.Duration {
	if s.Timeout <= 0 {
		return DefaultTimeout
	}
	return s.Timeout
}

// Q returns the statement template t in the dialect: {now} becomes the
// database's current time and {now+} that time plus a bound number of
// microseconds. Each {now} takes the argument dbNow returns, each {now+}
// that argument and then the microseconds.
func (s *DB) Q(t string) string {
	if v, ok := s.stmts.Load(t); ok {
		return v.(string)
	}
	out := strings.NewReplacer("{now+}", s.D.Plus(s.D.NowSQL), "{now}", s.D.NowSQL).Replace(t)
	s.stmts.Store(t, out)
	return out
}

// DBNow is the argument of a {now}: NULL, which makes the statement read
// the database's clock, or DBClock's time in tests.
func (s *DB) DBNow() any {
	if s.DBClock == nil {
		return nil
	}
	return s.TimeArg(s.DBClock())
}

// SQL returns the underlying pool (for migrations and tests).
func (s *DB) SQL() *sql.DB { return s.Pool }

// Ping checks the database is reachable.
func (s *DB) Ping(ctx context.Context) error {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	if err := s.Pool.PingContext(ctx); err != nil {
		return fmt.Errorf("%w: %v", ledger.ErrUnavailable, err)
	}
	return nil
}

// Close closes the pool.
func (s *DB) Close() error { return s.Pool.Close() }

// Stamp is the process's time, to the microsecond, for a record's
// stamp (created_at, revoked_at); never for a decision (DBNow).
func (s *DB) Stamp() time.Time { return ledger.Micro(s.Now()) }

// TimeArg is t, to the microsecond, as the value bound to a timestamp
// column.
func (s *DB) TimeArg(t time.Time) any { return s.D.Time(ledger.Micro(t)) }

// NewID is a new row id: a UUIDv7, so ids sort by creation.
func NewID() string { return uuid.Must(uuid.NewV7()).String() }

// CommitError marks a failure of COMMIT itself: the outcome is unknown.
type CommitError struct{ Err error }

func (e *CommitError) Error() string { return "commit: " + e.Err.Error() }
func (e *CommitError) Unwrap() error { return e.Err }

// InTx runs fn in a transaction, retrying a bounded number of times when
// the database reports a deadlock, a lock-wait timeout or a busy file. A
// failure of COMMIT is never retried: it becomes ledger.ErrAmbiguous.
//
// The transaction runs detached from the caller's cancellation (a client
// that hangs up mid-claim must not turn a COMMIT into an unknown outcome)
// but within Timeout, attempts included: a deadline before COMMIT rolls
// back (ErrUnavailable), one during COMMIT is ErrAmbiguous like any
// failed COMMIT.
func (s *DB) InTx(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	return s.InTxWith(ctx, nil, fn)
}

// InTxWith is inTx with the transaction's options (its isolation level).
func (s *DB) InTxWith(ctx context.Context, opts *sql.TxOptions, fn func(ctx context.Context, tx *sql.Tx) error) error {
	ctx, cancel := s.Detached(ctx)
	defer cancel()
	err := s.Retry(ctx, func() error { return s.TryTx(ctx, opts, fn) })
	var ce *CommitError
	if errors.As(err, &ce) {
		return fmt.Errorf("%w: %v", ledger.ErrAmbiguous, ce.Err)
	}
	return s.Classify(err)
}

// Retry runs op again, at most MaxAttempts times in all, while it fails
// with what the dialect calls retryable (deadlock, lock-wait timeout, busy
// file), pausing a jittered, growing time in between so that the
// statements that collided do not collide again in lockstep. A failed
// COMMIT is never retried (its outcome is unknown), and the pauses end
// with ctx. It is the one Retry loop of the ledger.
func (s *DB) Retry(ctx context.Context, op func() error) error {
	for attempt := 1; ; attempt++ {
		err := op()
		var ce *CommitError
		if err == nil || errors.As(err, &ce) || !s.D.IsRetryable(err) || attempt == MaxAttempts {
			return err
		}
		pause := time.Duration(attempt*attempt) * time.Millisecond * time.Duration(1+rand.IntN(4))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
	}
}

// TryTx runs fn in one transaction, once: BeforeCommit, then COMMIT,
// whose failure is a *CommitError (the outcome unknown).
func (s *DB) TryTx(ctx context.Context, opts *sql.TxOptions, fn func(ctx context.Context, tx *sql.Tx) error) error {
	tx, err := s.Pool.BeginTx(ctx, opts)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if s.BeforeCommit != nil {
		if err := s.BeforeCommit(ctx, tx); err != nil {
			return err
		}
	}
	if err := Commit(ctx, tx); err != nil {
		return &CommitError{Err: err}
	}
	return nil
}

// Commit commits tx but stops waiting when ctx ends. Drivers do not
// cancel a COMMIT (go-sql-driver waits for it up to its readTimeout),
// and its outcome is unknown either way, so the caller learns that within
// its deadline while the COMMIT finishes or fails on its own.
func Commit(ctx context.Context, tx *sql.Tx) error {
	done := make(chan error, 1)
	go func() { done <- tx.Commit() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Classify maps driver errors to the ledger's: domain errors pass through,
// connection failures and exhausted retries become ErrUnavailable.
func (s *DB) Classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ledger.ErrNotFound), errors.Is(err, ledger.ErrRefused),
		errors.Is(err, ledger.ErrNoSlot), errors.Is(err, ledger.ErrBudgetExhausted),
		errors.Is(err, ledger.ErrConflict), errors.Is(err, ledger.ErrAmbiguous),
		errors.Is(err, ledger.ErrUnavailable), errors.Is(err, ledger.ErrInvalid),
		errors.Is(err, ledger.ErrRevoked), errors.Is(err, ErrDuplicate),
		errors.Is(err, ledger.ErrPinned), errors.Is(err, ledger.ErrObjectDeleted),
		errors.Is(err, ledger.ErrForbidden):
		return err
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		s.D.IsUnavailable(err), s.D.IsRetryable(err):
		return fmt.Errorf("%w: %v", ledger.ErrUnavailable, err)
	}
	return fmt.Errorf("sqlcore: %w", err)
}

// ErrDuplicate is how an idempotency-key collision leaves a transaction.
var ErrDuplicate = errors.New("sqlcore: duplicate key")

// Exec runs one autocommitted statement (one round trip), retrying it a
// bounded number of times on deadlock, lock-wait timeout or busy errors.
// Used only for single statements whose effect is self-contained.
func (s *DB) Exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	var res sql.Result
	err := s.Retry(ctx, func() (err error) {
		res, err = s.Pool.ExecContext(ctx, query, args...)
		return err
	})
	return res, s.Classify(err)
}

// Affected is how many rows res affected; 0 for no result.
func Affected(res sql.Result) (int64, error) {
	if res == nil {
		return 0, nil
	}
	return res.RowsAffected()
}
