package mysql

import (
	"context"
	"errors"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/dlgate/dlgate/internal/testenv"
)

// TestABatchedClaimThatFailsMidwayLeavesNoTransactionOpen: when the server
// refuses a statement after the decrement ran, nothing commits and the
// connection goes back to the pool with no transaction open on it.
func TestABatchedClaimThatFailsMidwayLeavesNoTransactionOpen(t *testing.T) {
	dsn := testenv.SharedMariaDB(t).NewDatabase(t)
	ctx := context.Background()
	db, err := Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	pool := db.SQL()
	pool.SetMaxOpenConns(1) // the next statement runs on the very same connection
	if _, err := pool.ExecContext(ctx, `CREATE TABLE counter (id INT PRIMARY KEY, n INT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.ExecContext(ctx, `INSERT INTO counter VALUES (1, 5)`); err != nil {
		t.Fatal(err)
	}
	query := `START TRANSACTION; UPDATE counter SET n = n - 1 WHERE id = ? AND n > 0;
INSERT INTO no_such_table SELECT ? FROM DUAL WHERE ROW_COUNT() = 1`
	granted, err := claimBatched(ctx, pool, query, []any{1, "x"})
	var me *gomysql.MySQLError
	if granted || !errors.As(err, &me) {
		t.Fatalf("claimBatched = %v, %v; want false and the server's error", granted, err)
	}
	var n, inTx int
	if err := pool.QueryRowContext(ctx, `SELECT n, @@in_transaction FROM counter WHERE id = 1`).Scan(&n, &inTx); err != nil {
		t.Fatal(err)
	}
	if n != 5 || inTx != 0 {
		t.Fatalf("after the failed claim: n = %d, in_transaction = %d; want 5 (rolled back) and 0", n, inTx)
	}
	// And one that succeeds reports each statement's outcome.
	ok, err := claimBatched(ctx, pool, `START TRANSACTION; UPDATE counter SET n = n - 1 WHERE id = ? AND n > 0;
UPDATE counter SET n = n + 0 * ? WHERE id = 1 AND ROW_COUNT() = 1`, []any{1, 1})
	if err != nil || !ok {
		t.Fatalf("claimBatched = %v, %v; want granted", ok, err)
	}
	// A batch whose second statement matched nothing commits nothing.
	ok, err = claimBatched(ctx, pool, `START TRANSACTION; UPDATE counter SET n = n - 1 WHERE id = ? AND n > 0;
UPDATE counter SET n = n WHERE id = ? AND ROW_COUNT() = 1`, []any{1, 2})
	if err != nil || ok {
		t.Fatalf("claimBatched = %v, %v; want not granted", ok, err)
	}
	if err := pool.QueryRowContext(ctx, `SELECT n, @@in_transaction FROM counter WHERE id = 1`).Scan(&n, &inTx); err != nil {
		t.Fatal(err)
	}
	if n != 4 || inTx != 0 {
		t.Fatalf("after the granted and the refused batch: n = %d, in_transaction = %d; want 4 and 0", n, inTx)
	}
}
