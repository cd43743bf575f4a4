package mysql

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// TestABatchCommitsOnlyWhatItsPlanApproves: a batch whose write fails
// midway, affects other rows than planned, whose read fails, or whose plan
// asks no commit, commits nothing, and the connection goes back to the
// pool with no transaction open on it.
func TestABatchCommitsOnlyWhatItsPlanApproves(t *testing.T) {
	dsn := testenv.SharedMariaDB(t).NewDatabase(t)
	ctx := context.Background()
	db, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pool := db.SQL()
	pool.SetMaxOpenConns(1) // the next statement runs on the very same connection
	// Another pool sees only what committed.
	other, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for _, q := range []string{
		`CREATE TABLE counter (id INT PRIMARY KEY, n INT NOT NULL)`,
		`INSERT INTO counter VALUES (1, 5)`,
		`CREATE TABLE marks (k INT PRIMARY KEY)`,
	} {
		if _, err := pool.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	// state is the committed n, and whether the batch's connection still
	// has a transaction open: a row it writes then stays invisible to the
	// other pool. (@@in_transaction would say so in one read on MySQL and
	// MariaDB, but TiDB does not know it.)
	mark := 0
	state := func() (n, inTx int) {
		t.Helper()
		mark++
		if _, err := pool.ExecContext(ctx, `INSERT INTO marks VALUES (?)`, mark); err != nil {
			t.Fatal(err)
		}
		var seen int
		if err := other.SQL().QueryRowContext(ctx, `SELECT COUNT(*) FROM marks WHERE k = ?`, mark).Scan(&seen); err != nil {
			t.Fatal(err)
		}
		if err := other.SQL().QueryRowContext(ctx, `SELECT n FROM counter WHERE id = 1`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n, 1 - seen
	}
	// readN reads the counter; plan then writes what it returns.
	var n int
	readN := func(_ int, rows *sql.Rows) error {
		if !rows.Next() {
			return errors.New("no row")
		}
		return rows.Scan(&n)
	}
	lock := []engine.Stmt{{SQL: `SELECT n FROM counter WHERE id = ? FOR UPDATE`, Args: []any{1}}}
	decrement := engine.Stmt{SQL: `UPDATE counter SET n = n - 1 WHERE id = ? AND n > 0`, Args: []any{1}, Rows: 1}
	writes := func(w ...engine.Stmt) func() (engine.Writes, error) {
		return func() (engine.Writes, error) { return engine.Writes{Stmts: w, Commit: true}, nil }
	}

	// The server refuses a write after the decrement ran.
	err = batch(ctx, pool, sql.LevelReadCommitted, lock, readN, writes(decrement, engine.Stmt{SQL: `INSERT INTO no_such_table SELECT ? FROM DUAL`, Args: []any{"x"}, Rows: 1}))
	var me *gomysql.MySQLError
	if !errors.As(err, &me) {
		t.Fatalf("batch = %v; want the server's error", err)
	}
	if n, inTx := state(); n != 5 || inTx != 0 {
		t.Fatalf("after the failed batch: n = %d, in_transaction = %d; want 5 (rolled back) and 0", n, inTx)
	}
	// A write matches other rows than the plan said.
	err = batch(ctx, pool, sql.LevelReadCommitted, lock, readN, writes(decrement, engine.Stmt{SQL: `UPDATE counter SET n = n - 1 WHERE id = ?`, Args: []any{2}, Rows: 1}))
	var re *engine.RowsError
	if !errors.As(err, &re) || re.Stmt != 1 || re.Want != 1 || re.Got != 0 {
		t.Fatalf("batch whose second write matched nothing = %v; want a RowsError of write 1 (0 rows, want 1)", err)
	}
	if n, inTx := state(); n != 5 || inTx != 0 {
		t.Fatalf("after the miscounted batch: n = %d, in_transaction = %d; want 5 and 0", n, inTx)
	}
	// The plan asks for nothing.
	if err := batch(ctx, pool, sql.LevelReadCommitted, lock, readN, func() (engine.Writes, error) { return engine.Writes{}, nil }); err != nil {
		t.Fatal(err)
	}
	if n, inTx := state(); n != 5 || inTx != 0 {
		t.Fatalf("after the refused batch: n = %d, in_transaction = %d; want 5 and 0", n, inTx)
	}
	// The plan writes and asks for no commit.
	if err := batch(ctx, pool, sql.LevelReadCommitted, lock, readN, func() (engine.Writes, error) {
		return engine.Writes{Stmts: []engine.Stmt{decrement}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if n, inTx := state(); n != 5 || inTx != 0 {
		t.Fatalf("after the batch that wrote and rolled back: n = %d, in_transaction = %d; want 5 and 0", n, inTx)
	}
	// The read fails.
	if err := batch(ctx, pool, sql.LevelReadCommitted, []engine.Stmt{{SQL: `SELECT n FROM counter WHERE id = ?`, Args: []any{2}}}, readN, writes(decrement)); err == nil {
		t.Fatal("batch of a read that failed: no error")
	}
	if n, inTx := state(); n != 5 || inTx != 0 {
		t.Fatalf("after the failed read: n = %d, in_transaction = %d; want 5 and 0", n, inTx)
	}
	// Two reads, the plan sees both, and commits.
	var seen []int
	two := append(lock, engine.Stmt{SQL: `SELECT COUNT(*) FROM marks`})
	if err := batch(ctx, pool, sql.LevelReadCommitted, two, func(i int, rows *sql.Rows) error {
		if err := readN(i, rows); err != nil {
			return err
		}
		seen = append(seen, n)
		return nil
	}, writes(decrement)); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[0] != 5 {
		t.Fatalf("the reads saw %v; want n = 5 and the count of marks", seen)
	}
	if n, inTx := state(); n != 4 || inTx != 0 {
		t.Fatalf("after the committed batch: n = %d, in_transaction = %d; want 4 and 0", n, inTx)
	}
}
