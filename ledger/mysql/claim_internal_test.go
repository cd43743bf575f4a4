package mysql

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/dlgate/dlgate/internal/testenv"
)

// TestABatchCommitsOnlyWhatItsScanApproves: a batch whose statement fails
// midway, or whose scan says no, commits nothing, and the connection goes
// back to the pool with no transaction open on it.
func TestABatchCommitsOnlyWhatItsScanApproves(t *testing.T) {
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
	readN := func(commit bool) func(*sql.Rows) (bool, error) {
		return func(rows *sql.Rows) (bool, error) {
			var n int
			if !rows.Next() {
				return false, errors.New("no row")
			}
			return commit, rows.Scan(&n)
		}
	}
	const decrement = `START TRANSACTION; UPDATE counter SET n = n - 1 WHERE id = ? AND n > 0;`

	// The server refuses a statement after the decrement ran.
	err = batch(ctx, pool, decrement+` INSERT INTO no_such_table SELECT ? FROM DUAL; SELECT 1`, []any{1, "x"}, readN(true))
	var me *gomysql.MySQLError
	if !errors.As(err, &me) {
		t.Fatalf("batch = %v; want the server's error", err)
	}
	if n, inTx := state(); n != 5 || inTx != 0 {
		t.Fatalf("after the failed batch: n = %d, in_transaction = %d; want 5 (rolled back) and 0", n, inTx)
	}
	// The scan says no.
	if err := batch(ctx, pool, decrement+` SELECT n FROM counter WHERE id = 1`, []any{1}, readN(false)); err != nil {
		t.Fatal(err)
	}
	if n, inTx := state(); n != 5 || inTx != 0 {
		t.Fatalf("after the refused batch: n = %d, in_transaction = %d; want 5 and 0", n, inTx)
	}
	// The scan fails.
	if err := batch(ctx, pool, decrement+` SELECT n FROM counter WHERE id = 2`, []any{1}, readN(true)); err == nil {
		t.Fatal("batch of a scan that failed: no error")
	}
	if n, inTx := state(); n != 5 || inTx != 0 {
		t.Fatalf("after the failed scan: n = %d, in_transaction = %d; want 5 and 0", n, inTx)
	}
	// The scan says yes.
	if err := batch(ctx, pool, decrement+` SELECT n FROM counter WHERE id = 1`, []any{1}, readN(true)); err != nil {
		t.Fatal(err)
	}
	if n, inTx := state(); n != 4 || inTx != 0 {
		t.Fatalf("after the committed batch: n = %d, in_transaction = %d; want 4 and 0", n, inTx)
	}
}
