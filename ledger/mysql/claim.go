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

// claimInOneTrip sends a claim's whole transaction — START TRANSACTION,
// the conditional decrement, the grant insert (which inserts only when
// the decrement matched: ROW_COUNT() = 1) and COMMIT — as one
// multi-statement query: one round trip instead of four. The decision is
// the same single conditional UPDATE, under the same row lock.
//
// The outcome is read from each statement's affected rows. When the
// server answers an error, it ran no statement after the failing one, so
// COMMIT did not run: the transaction is rolled back on the same
// connection and the error returned (a deadlock may be retried). Any
// other failure (the connection broke, the deadline passed) may have come
// after COMMIT ran: sqlcore.ErrInFlight, which the caller reports as
// ambiguous.
func claimInOneTrip(ctx context.Context, db *sql.DB, query string, args []any) (bool, error) {
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
		res, err := ex.ExecContext(ctx, query, named)
		var me *gomysql.MySQLError
		switch {
		case errors.As(err, &me):
			if _, rerr := ex.ExecContext(context.WithoutCancel(ctx), "ROLLBACK", nil); rerr != nil {
				// The connection must not go back to the pool with a
				// transaction open on it.
				return fmt.Errorf("%w (and ROLLBACK failed: %v)", driver.ErrBadConn, err)
			}
			return err
		case err != nil:
			return fmt.Errorf("%w: %v", sqlcore.ErrInFlight, err)
		}
		all := res.(gomysql.Result).AllRowsAffected()
		if len(all) != 4 {
			return fmt.Errorf("%w: %d statement results, want 4", sqlcore.ErrInFlight, len(all))
		}
		granted = all[1] == 1 && all[2] == 1
		return nil
	})
	return granted, err
}
