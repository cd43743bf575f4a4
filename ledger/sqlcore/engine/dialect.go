// Package engine is what every part of the SQL ledger (ledger/sqlcore)
// stands on: the Dialect of the engine beneath (what differs between
// ledger/mysql and ledger/sqlite, and what an engine does or does not
// honour, such as SKIP LOCKED, detected once when the ledger opens, never
// a test of the engine's name in a statement); DB, the database and how
// the ledger calls it (each call bounded, transactions with the one retry
// loop, driver errors mapped to the ledger's); and the reading of rows
// both backends return (timestamps, nullable strings, lists of ids, pages
// and their cursors).
package engine

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
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
	// Batch, when set, runs a claim's transaction (ledger/sqlcore's claimtx.go) on one
	// connection in at most three round trips: START TRANSACTION (at
	// isolation level iso: sql.LevelDefault or LevelReadCommitted) and
	// the reads, as one multi-statement query whose result sets read
	// gets in order; then the writes plan returns, as one more
	// multi-statement query, each statement of which must affect as many
	// rows as it says; then COMMIT, or ROLLBACK when plan asks for none,
	// a count differs or a statement fails. COMMIT is never part of a
	// query with other statements, so a query the server runs after the
	// client gave up (a frozen server reading what was in its socket on
	// waking) ends in a rollback, and COMMIT is sent only after the client
	// saw what the transaction did. Only a failed COMMIT wraps
	// ErrInFlight. Nil (SQLite, where a statement is no round trip) runs
	// the same reads and writes in an ordinary transaction.
	Batch func(ctx context.Context, db *sql.DB, iso sql.IsolationLevel, reads []Stmt, read func(i int, rows *sql.Rows) error, plan func() (Writes, error)) error

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
	// at {now}, or revoked): candidates, which Sweep's conditional UPDATE
	// then ends (skipLocked is appended where honoured). Arguments: now,
	// limit.
	ExpiredSessionsSQL string
	// ClearLapsedSQL clears holders of leases lapsed at {now}, at most
	// limit rows. Arguments: now, limit.
	ClearLapsedSQL string

	// LinkSeq reserves the next n numbers of the link's own event
	// sequence (links.event_seq) inside tx and returns the last of them.
	// It is one conditional UPDATE of the link's row, whose result the
	// statement itself returns (LAST_INSERT_ID(expr) on MySQL, RETURNING
	// on SQLite): the row lock it takes orders a link's events by commit
	// whatever the engine does with AUTO_INCREMENT (TiDB hands each
	// server a range of its own). The link must exist.
	LinkSeq func(ctx context.Context, tx *sql.Tx, linkID string, n int) (int64, error)

	// LockRows ends a SELECT in a transaction that decides from the rows
	// it reads, locking them until the transaction ends ("FOR UPDATE"): a
	// current read on every engine, so it also sees what committed after
	// the transaction's snapshot. Empty on SQLite, whose transactions
	// hold the write lock from BEGIN.
	LockRows string
	// SkipLocked reports that the engine honours FOR UPDATE SKIP LOCKED
	// (MySQL 8.0.1+, MariaDB 10.6+; not TiDB, which accepts it and locks
	// nothing). It is a hint only: the candidate reads of sweepers and
	// deliverers add it so that processes mostly pass over each other's
	// rows, and the conditional UPDATE that hands a row out decides, so
	// that each row goes to one taker with or without it (see take in
	// sweep.go). Tests switch it off to show exactly that.
	SkipLocked bool
	// JoinedUpdate reports that the engine updates many rows in one
	// statement joined to a derived table of their values, UPDATE t JOIN
	// (SELECT … UNION ALL SELECT …) v ON … SET … (MySQL, MariaDB, TiDB):
	// a window's delivery records are then one statement (ledger/sqlcore's records.go).
	// SQLite spells it UPDATE … FROM, and there a statement is no round
	// trip; false keeps one UPDATE per record.
	JoinedUpdate bool
	// SweepTx are the options of the transactions of the sweeper, the
	// retention batches and the webhook deliverers. MySQL runs them READ
	// COMMITTED: their locking statements lock the rows they touch and no
	// gaps, so another sweeper moving a row within the index, or an
	// upload or a claim inserting one, never waits for the range a
	// sweeper scanned; and each statement reads what committed before
	// it, so a decision read after taking a row sees every change the
	// row's lock made wait (TiDB's REPEATABLE READ would read the
	// transaction's first snapshot instead). nil (SQLite) is the default.
	SweepTx *sql.TxOptions
}

// SkipLockedSQL is what a candidate read appends where the engine honours
// SKIP LOCKED; nothing elsewhere.
func (d *Dialect) SkipLockedSQL() string {
	if d.SkipLocked {
		return " FOR UPDATE SKIP LOCKED"
	}
	return ""
}

// ErrInFlight marks a failure of a claim transaction's COMMIT
// (Dialect.Batch): its outcome is unknown (ledger.ErrAmbiguous).
var ErrInFlight = errors.New("sqlcore: the claim's outcome is unknown")

// Stmt is one statement of a transaction with its arguments. Rows is how
// many rows a write must affect (matched rows on MySQL, clientFoundRows),
// or AnyRows.
type Stmt struct {
	SQL  string
	Args []any
	Rows int64
}

// AnyRows is the Rows of a write whose count is not checked.
const AnyRows = -1

// Writes are what a transaction's reads decided: the statements to run
// and whether to commit them. No statements and no commit is a rollback
// straight after the reads.
type Writes struct {
	Stmts  []Stmt
	Commit bool
	// Seen, when set, is given what each statement affected, before
	// they are checked: for writes of AnyRows whose counts tell their
	// callers something.
	Seen func(counts []int64)
}

// RowsError says a write affected another number of rows than its
// transaction decided: the decision and the rows disagree, so nothing is
// committed.
type RowsError struct {
	Stmt      int // index in Writes.Stmts
	Want, Got int64
}

func (e *RowsError) Error() string {
	return fmt.Sprintf("sqlcore: write %d affected %d rows, want %d", e.Stmt, e.Got, e.Want)
}

// Check returns a *RowsError when counts, what each of ws affected, do
// not match what ws asked.
func (w Writes) Check(counts []int64) error {
	if len(counts) != len(w.Stmts) {
		return fmt.Errorf("sqlcore: %d results for %d writes", len(counts), len(w.Stmts))
	}
	if w.Seen != nil {
		w.Seen(counts)
	}
	for i, st := range w.Stmts {
		if st.Rows != AnyRows && counts[i] != st.Rows {
			return &RowsError{Stmt: i, Want: st.Rows, Got: counts[i]}
		}
	}
	return nil
}
