// Package sqlcore is the SQL implementation of ledger.Ledger shared by
// ledger/mysql and ledger/sqlite. The statements are portable; the few that
// are not (returning a value from an UPDATE, UPDATE … LIMIT, SKIP LOCKED)
// and the error classification come from a Dialect.
package sqlcore

import (
	"context"
	"database/sql"
	"time"
)

// Dialect is what differs between the backends.
type Dialect struct {
	// Name is "mysql" or "sqlite", for logs and metrics.
	Name string
	// Time converts a UTC, microsecond-truncated time into the value bound
	// to a timestamp column.
	Time func(time.Time) any
	// IsDuplicate reports a unique or primary key violation.
	IsDuplicate func(error) bool
	// IsRetryable reports a deadlock, lock-wait timeout or busy database:
	// the transaction was rolled back and may be run again.
	IsRetryable func(error) bool
	// IsUnavailable reports a connection-level failure.
	IsUnavailable func(error) bool
	// Batch, when set, runs query — START TRANSACTION, then statements
	// whose last is a SELECT of at most one row — in one round trip, hands
	// that SELECT's rows to scan, and then sends COMMIT when scan reports
	// true, else ROLLBACK: two round trips in all. COMMIT is never part of
	// the batch, so a batch the server runs after the client gave up ends
	// in a rollback. Only a failed COMMIT wraps ErrInFlight. Nil (SQLite,
	// where a statement is no round trip) uses ordinary transactions.
	Batch func(ctx context.Context, db *sql.DB, query string, args []any, scan func(*sql.Rows) (commit bool, err error)) error

	// NowSQL is the database's current time in the timestamp columns'
	// representation, in UTC, as an expression with one placeholder: a
	// stand-in time that replaces the clock when bound (tests), NULL
	// otherwise. Statements that decide (expiry, leases) compare with it,
	// never with a gateway's clock, so processes whose clocks disagree
	// still agree on every decision.
	NowSQL string
	// Plus returns the expression expr plus a bound number of
	// microseconds (one more placeholder, after expr's).
	Plus func(expr string) string

	// DrawBytes runs the conditional budget draw and returns how many bytes
	// it granted, or 0 when no row matched. Arguments: want, session id,
	// and the argument of NowSQL.
	DrawBytes func(ctx context.Context, db *sql.DB, want int64, sessionID string, now any) (int64, error)
	// AcquireSQL leases one free or lapsed slot row until {now+} (the
	// lease), when its lease_until is at or before {now}. Arguments:
	// holder, now, lease in microseconds, session id, now; each now is
	// the argument of NowSQL.
	AcquireSQL string
	// ExpiredSessionsSQL selects a batch of ids of sessions to end (expired
	// at {now}, or revoked), locking them without waiting on rows another
	// sweeper holds. Arguments: now, limit.
	ExpiredSessionsSQL string
	// ClearLapsedSQL clears holders of leases lapsed at {now}, at most
	// limit rows. Arguments: now, limit.
	ClearLapsedSQL string

	// LockRows ends a SELECT in a transaction that decides from the rows
	// it reads, locking them until the transaction ends ("FOR UPDATE");
	// SkipLocked also passes over rows another transaction holds, so that
	// sweepers in several processes take disjoint batches. Both are empty
	// on SQLite, whose transactions hold the write lock from BEGIN.
	LockRows, SkipLocked string
	// SweepTx are the options of a retention batch's transaction. MySQL
	// runs them READ COMMITTED, so that their locking reads lock the rows
	// they return and no gaps: another sweeper moving a row within the
	// index, or an upload inserting one, never waits for the range a
	// sweeper scanned. nil (SQLite) is the default.
	SweepTx *sql.TxOptions
}
