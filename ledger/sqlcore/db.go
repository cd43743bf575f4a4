package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
)

// maxAttempts bounds how often a transaction that hit a deadlock, a
// lock-wait timeout or a busy database is run again.
const maxAttempts = 5

// txTimeout bounds every write transaction. Transactions run detached from
// the caller's cancellation: a client that hangs up mid-claim must not turn
// a COMMIT into an unknown outcome.
const txTimeout = 15 * time.Second

// DB implements ledger.Ledger on database/sql.
type DB struct {
	db *sql.DB
	d  Dialect
	// Now is the clock every decision uses; tests inject their own.
	Now ledger.Clock
}

var _ ledger.Ledger = (*DB)(nil)

// New returns a ledger over db speaking dialect d.
func New(db *sql.DB, d Dialect) *DB {
	return &DB{db: db, d: d, Now: time.Now}
}

// SQL returns the underlying pool (for migrations and tests).
func (s *DB) SQL() *sql.DB { return s.db }

// Ping checks the database is reachable.
func (s *DB) Ping(ctx context.Context) error {
	if err := s.db.PingContext(ctx); err != nil {
		return fmt.Errorf("%w: %v", ledger.ErrUnavailable, err)
	}
	return nil
}

// Close closes the pool.
func (s *DB) Close() error { return s.db.Close() }

func (s *DB) now() time.Time { return ledger.Micro(s.Now()) }

func (s *DB) t(t time.Time) any { return s.d.Time(ledger.Micro(t)) }

func newID() string { return uuid.Must(uuid.NewV7()).String() }

// commitError marks a failure of COMMIT itself: the outcome is unknown.
type commitError struct{ err error }

func (e *commitError) Error() string { return "commit: " + e.err.Error() }
func (e *commitError) Unwrap() error { return e.err }

// inTx runs fn in a transaction, retrying a bounded number of times when
// the database reports a deadlock, a lock-wait timeout or a busy file. A
// failure of COMMIT is never retried: it becomes ledger.ErrAmbiguous.
func (s *DB) inTx(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), txTimeout)
	defer cancel()
	var err error
	for attempt := 1; ; attempt++ {
		err = s.tryTx(ctx, fn)
		if err == nil {
			return nil
		}
		var ce *commitError
		if errors.As(err, &ce) {
			return fmt.Errorf("%w: %v", ledger.ErrAmbiguous, ce.err)
		}
		if !s.d.IsRetryable(err) || attempt == maxAttempts {
			break
		}
		// Jittered backoff so the transactions that collided do not
		// collide again in lockstep.
		d := time.Duration(attempt*attempt) * time.Millisecond * time.Duration(1+rand.IntN(4))
		select {
		case <-ctx.Done():
			return s.classify(ctx.Err())
		case <-time.After(d):
		}
	}
	return s.classify(err)
}

func (s *DB) tryTx(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return &commitError{err}
	}
	return nil
}

// classify maps driver errors to the ledger's: domain errors pass through,
// connection failures and exhausted retries become ErrUnavailable.
func (s *DB) classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ledger.ErrNotFound), errors.Is(err, ledger.ErrRefused),
		errors.Is(err, ledger.ErrNoSlot), errors.Is(err, ledger.ErrBudgetExhausted),
		errors.Is(err, ledger.ErrConflict), errors.Is(err, ledger.ErrAmbiguous),
		errors.Is(err, ledger.ErrUnavailable), errors.Is(err, ledger.ErrInvalid),
		errors.Is(err, ledger.ErrRevoked), errors.Is(err, errDuplicate):
		return err
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		s.d.IsUnavailable(err), s.d.IsRetryable(err):
		return fmt.Errorf("%w: %v", ledger.ErrUnavailable, err)
	}
	return fmt.Errorf("sqlcore: %w", err)
}

// errDuplicate is how an idempotency-key collision leaves a transaction.
var errDuplicate = errors.New("sqlcore: duplicate key")

// exec runs one autocommitted statement (one round trip), retrying it a
// bounded number of times on deadlock, lock-wait timeout or busy errors.
// Used only for single statements whose effect is self-contained.
func (s *DB) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	var (
		res sql.Result
		err error
	)
	for attempt := 1; ; attempt++ {
		res, err = s.db.ExecContext(ctx, query, args...)
		if err == nil || !s.d.IsRetryable(err) || attempt == maxAttempts {
			break
		}
		time.Sleep(time.Duration(attempt) * time.Millisecond * time.Duration(1+rand.IntN(4)))
	}
	return res, s.classify(err)
}

func affected(res sql.Result) (int64, error) {
	if res == nil {
		return 0, nil
	}
	return res.RowsAffected()
}
