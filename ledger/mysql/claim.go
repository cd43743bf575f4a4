package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// batch runs a claim's transaction in at most three round trips
// (engine.Dialect.Batch): START TRANSACTION and the reads as one
// multi-statement query, whose result sets read gets; the writes plan
// decides from them as a second one, whose every statement's row count
// is checked; then COMMIT, or ROLLBACK.
//
// COMMIT is the client's to send, alone, never part of a query with other
// statements: a query the server runs after the client gave up (a frozen
// server that reads it on waking, once the client's deadline closed the
// connection) ends in a rollback. With COMMIT in the query, a MariaDB
// woken from SIGSTOP committed a claim's decrement without its grant (the
// e2e TestFrozenDatabaseAnswers503WithinTheTimeout caught it). So a
// failure of the first two trips is a plain failure, the connection
// discarded; only a failure of COMMIT itself leaves the outcome unknown:
// engine.ErrInFlight.
//
// When the server answers an error, it ran nothing after the failing
// statement (a multi-statement query stops at its first error): the
// transaction is rolled back on the same connection (a lock-wait timeout
// leaves it open otherwise) and the error returned, so that a deadlock may
// be retried.
func batch(ctx context.Context, db *sql.DB, iso sql.IsolationLevel, reads []engine.Stmt, read func(int, *sql.Rows) error, plan func() (engine.Writes, error)) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// discard closes the connection: the server rolls back whatever it
	// ran of the transaction when it sees it closed.
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
	// failed ends the transaction after err: on the same connection when
	// the server answered it (or it is the ledger's own), else by closing
	// the connection.
	failed := func(err error) error {
		var me *gomysql.MySQLError
		if errors.As(err, &me) || ctx.Err() == nil && !errors.Is(err, driver.ErrBadConn) && !isUnavailable(err) {
			return end("ROLLBACK", err)
		}
		return discard(err)
	}
	begin := []engine.Stmt{{SQL: "START TRANSACTION"}}
	switch iso {
	case sql.LevelDefault:
	case sql.LevelReadCommitted:
		begin = append([]engine.Stmt{{SQL: "SET TRANSACTION ISOLATION LEVEL READ COMMITTED"}}, begin...)
	default:
		return fmt.Errorf("mysql: a claim transaction at isolation %v", iso)
	}
	q, args := joined(append(begin, reads...))
	rows, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		return failed(err)
	}
	// Every result set, in order.
	for i := 0; ; i++ {
		if err = read(i, rows); err != nil {
			break
		}
		if !rows.NextResultSet() {
			err = rows.Err()
			break
		}
	}
	if cerr := rows.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return failed(err)
	}
	w, err := plan()
	if err != nil {
		return end("ROLLBACK", err) // the ledger's own: the connection is fine
	}
	if len(w.Stmts) > 0 {
		counts, err := execAll(ctx, conn, w.Stmts)
		if err == nil {
			err = w.Check(counts)
		}
		if err != nil {
			return failed(err)
		}
	}
	if !w.Commit {
		return end("ROLLBACK", nil)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		var me *gomysql.MySQLError
		if errors.As(err, &me) {
			return end("ROLLBACK", err)
		}
		return discard(fmt.Errorf("%w: %v", engine.ErrInFlight, err))
	}
	return nil
}

// joined is stmts as one multi-statement query and its arguments.
func joined(stmts []engine.Stmt) (string, []any) {
	var (
		b    strings.Builder
		args []any
	)
	for i, st := range stmts {
		if i > 0 {
			b.WriteString(";\n")
		}
		b.WriteString(st.SQL)
		args = append(args, st.Args...)
	}
	return b.String(), args
}

// execAll runs stmts as one multi-statement query on conn and returns the
// rows each affected, which only the driver's own result reports
// (mysql.Result.AllRowsAffected).
func execAll(ctx context.Context, conn *sql.Conn, stmts []engine.Stmt) ([]int64, error) {
	q, args := joined(stmts)
	named := make([]driver.NamedValue, len(args))
	for i, a := range args {
		v, err := driver.DefaultParameterConverter.ConvertValue(a)
		if err != nil {
			return nil, fmt.Errorf("mysql: argument %d of the claim's writes: %w", i, err)
		}
		named[i] = driver.NamedValue{Ordinal: i + 1, Value: v}
	}
	var counts []int64
	err := conn.Raw(func(dc any) error {
		ex, ok := dc.(driver.ExecerContext)
		if !ok {
			return fmt.Errorf("mysql: the driver's connection %T cannot execute", dc)
		}
		res, err := ex.ExecContext(ctx, q, named)
		if err != nil {
			return err
		}
		r, ok := res.(gomysql.Result)
		if !ok {
			return fmt.Errorf("mysql: the driver's result %T has no row counts", res)
		}
		counts = r.AllRowsAffected()
		return nil
	})
	return counts, err
}
