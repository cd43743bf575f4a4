package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/dlgate/dlgate/ledger/sqlcore"
)

// batch runs a transaction in two round trips: first query — START
// TRANSACTION and the transaction's statements, the last a SELECT — as one
// multi-statement query, whose SELECT scan reads; then COMMIT when scan
// says so, else ROLLBACK (sqlcore.Dialect.Batch).
//
// COMMIT is the client's to send, never part of the batch: a batch the
// server runs after the client gave up (a frozen server that reads it on
// waking, once the client's deadline closed the connection) ends in a
// rollback. With COMMIT in the batch, a MariaDB woken from SIGSTOP
// committed a claim's decrement without its grant (the e2e
// TestFrozenDatabaseAnswers503WithinTheTimeout caught it). So a failure of
// the first trip is a plain failure, the connection discarded; only a
// failure of COMMIT itself leaves the outcome unknown: sqlcore.ErrInFlight.
//
// When the server answers an error, it ran nothing after the failing
// statement: the transaction is rolled back on the same connection (a
// lock-wait timeout leaves it open otherwise) and the error returned, so
// that a deadlock may be retried.
func batch(ctx context.Context, db *sql.DB, query string, args []any, scan func(*sql.Rows) (bool, error)) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// discard closes the connection: the server rolls back whatever it
	// ran of the batch when it sees it closed.
	discard := func(cause error) error {
		conn.Raw(func(any) error { return driver.ErrBadConn }) //nolint:errcheck // it reports the ErrBadConn it was given
		return cause
	}
	end := func(stmt string, cause error) error {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), stmt); err != nil {
			// The connection must not go back to the pool with a
			// transaction open on it.
			return discard(fmt.Errorf("%w (%s failed: %v)", cause, stmt, err))
		}
		return cause
	}
	var me *gomysql.MySQLError
	rows, err := conn.QueryContext(ctx, query, args...)
	switch {
	case errors.As(err, &me):
		return end("ROLLBACK", err)
	case err != nil:
		return discard(err)
	}
	commit, err := scan(rows)
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	switch {
	case errors.As(err, &me):
		return end("ROLLBACK", err)
	case err != nil && ctx.Err() == nil && !errors.Is(err, driver.ErrBadConn):
		return end("ROLLBACK", err) // scan's own error: the connection is fine
	case err != nil:
		return discard(err)
	case !commit:
		return end("ROLLBACK", nil)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		if errors.As(err, &me) {
			return end("ROLLBACK", err)
		}
		return discard(fmt.Errorf("%w: %v", sqlcore.ErrInFlight, err))
	}
	return nil
}
