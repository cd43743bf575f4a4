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

// claimBatched sends a claim's transaction in two round trips: first
// START TRANSACTION, the conditional decrement and the grant insert
// (which inserts only when the decrement matched: ROW_COUNT() = 1) as one
// multi-statement query, then COMMIT — sent only when both statements
// report one row — or ROLLBACK. The decision is the same single
// conditional UPDATE, under the same row lock.
//
// COMMIT is the client's to send, never part of the batch: a batch the
// server runs after the client gave up (a frozen server that reads it on
// waking, once the client's deadline closed the connection) ends in a
// rollback, whatever ROW_COUNT() said. With COMMIT in the batch, a server
// woken from SIGSTOP committed the decrement without its grant (the
// e2e TestFrozenDatabaseAnswers503WithinTheTimeout caught it). So a
// failure of the first trip is a plain failure; only a failure of COMMIT
// itself leaves the outcome unknown: sqlcore.ErrInFlight, which the
// caller reports as ambiguous.
func claimBatched(ctx context.Context, db *sql.DB, query string, args []any) (bool, error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	var granted bool
	err = conn.Raw(func(dc any) error {
		ex, ok := dc.(driver.ExecerContext)
		if !ok {
			return errors.New("mysql: the driver connection cannot execute")
		}
		named := make([]driver.NamedValue, len(args))
		for i, a := range args {
			v, err := driver.DefaultParameterConverter.ConvertValue(a)
			if err != nil {
				return err
			}
			named[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
		}
		end := func(stmt string, cause error) error {
			if _, err := ex.ExecContext(context.WithoutCancel(ctx), stmt, nil); err != nil {
				// The connection must not go back to the pool with a
				// transaction open on it.
				return fmt.Errorf("%w (%s failed: %v)", driver.ErrBadConn, stmt, err)
			}
			return cause
		}
		res, err := ex.ExecContext(ctx, query, named)
		var me *gomysql.MySQLError
		switch {
		case errors.As(err, &me):
			return end("ROLLBACK", err)
		case err != nil:
			// The connection is broken or the deadline passed: the batch
			// may still run on the server, but nothing commits it.
			return fmt.Errorf("%w: %v", driver.ErrBadConn, err)
		}
		all := res.(gomysql.Result).AllRowsAffected()
		if len(all) != 3 || all[1] != 1 || all[2] != 1 {
			return end("ROLLBACK", nil)
		}
		if _, err := ex.ExecContext(ctx, "COMMIT", nil); err != nil {
			if errors.As(err, &me) {
				return end("ROLLBACK", err)
			}
			return fmt.Errorf("%w: %v", sqlcore.ErrInFlight, err)
		}
		granted = true
		return nil
	})
	return granted, err
}
