package mysql_test

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/ledger/mysql"
	"github.com/dlgate/dlgate/migrations"
)

// migrateChildEnv makes the test binary a migrating process (TestMain):
// it opens the DSN the variable holds, waits for migrateAtEnv's instant,
// migrates, and exits 0, or 1 with the error on stderr.
const (
	migrateChildEnv = "DLGATE_TEST_MIGRATE_CHILD_DSN"
	migrateAtEnv    = "DLGATE_TEST_MIGRATE_AT"
)

func migrateChild(dsn string) int {
	ctx := context.Background()
	db, err := mysql.Open(ctx, dsn)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer db.Close()
	if at, err := strconv.ParseInt(os.Getenv(migrateAtEnv), 10, 64); err == nil {
		time.Sleep(time.Until(time.Unix(0, at)))
	}
	start := time.Now()
	if err := mysql.Migrate(ctx, db.SQL()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("migrated in %v\n", time.Since(start).Round(time.Millisecond))
	return 0
}

// TestMigrationByEightProcessesAtOnce starts eight processes that migrate
// one fresh database at the same instant, as gateways started together
// would: every one succeeds, and each migration is applied once.
func TestMigrationByEightProcessesAtOnce(t *testing.T) {
	dsn := testenv.SharedMariaDB(t).NewDatabase(t)
	const n = 8
	at := time.Now().Add(time.Second).UnixNano()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		fail []string
		took []string
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), migrateChildEnv+"="+dsn, migrateAtEnv+"="+strconv.FormatInt(at, 10))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fail = append(fail, fmt.Sprintf("process %d: %v: %s", i, err, strings.TrimSpace(stderr.String())))
				return
			}
			took = append(took, strings.TrimSpace(stdout.String()))
		}()
	}
	wg.Wait()
	t.Logf("%d processes: %s", n, strings.Join(took, "; "))
	for _, f := range fail {
		t.Error(f)
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT version_id, COUNT(*) FROM goose_db_version WHERE version_id > 0 GROUP BY version_id ORDER BY version_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var versions []int64
	for rows.Next() {
		var v, count int64
		if err := rows.Scan(&v, &count); err != nil {
			t.Fatal(err)
		}
		if count != 1 {
			t.Errorf("migration %d applied %d times", v, count)
		}
		versions = append(versions, v)
	}
	want, err := migrations.Versions(migrations.MySQL)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(versions, want) {
		t.Fatalf("applied migrations %v, want each of %v once", versions, want)
	}
}

// holdMigrationLock takes the migration lock as another process would and
// returns its release.
func holdMigrationLock(tb testing.TB, dsn string) func() {
	tb.Helper()
	ctx := context.Background()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		tb.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS dlgate_migration_lock (name VARCHAR(64) NOT NULL, PRIMARY KEY (name))`,
		`INSERT IGNORE INTO dlgate_migration_lock (name) VALUES ('migrate')`,
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			tb.Fatal(err)
		}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		tb.Fatal(err)
	}
	var name string
	if err := tx.QueryRowContext(ctx, `SELECT name FROM dlgate_migration_lock WHERE name = 'migrate' FOR UPDATE`).Scan(&name); err != nil {
		tb.Fatal(err)
	}
	var once sync.Once
	release := func() {
		once.Do(func() {
			tx.Rollback() //nolint:errcheck // closing rolls back too
			db.Close()
		})
	}
	tb.Cleanup(release)
	return release
}

// TestMigrateWaitsForTheLockHolder: a migration waits while another
// process holds the lock, goes ahead once it is released, and gives up
// when its context ends first, whatever innodb_lock_wait_timeout says.
func TestMigrateWaitsForTheLockHolder(t *testing.T) {
	dsn := testenv.SharedMariaDB(t).NewDatabase(t)
	db, err := mysql.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()

	release := holdMigrationLock(t, dsn)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	start := time.Now()
	err = mysql.Migrate(ctx, db.SQL())
	cancel()
	if waited := time.Since(start); err == nil || waited < 900*time.Millisecond || waited > 3*time.Second {
		t.Fatalf("Migrate while another holds the lock, 1 s deadline = %v after %v; want an error at the deadline", err, waited)
	}

	done := make(chan error, 1)
	go func() { done <- mysql.Migrate(context.Background(), db.SQL()) }()
	select {
	case err := <-done:
		t.Fatalf("Migrate returned %v while another process held the lock", err)
	case <-time.After(500 * time.Millisecond):
	}
	release()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Migrate after the lock was released = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Migrate did not finish within 30 s of the lock's release")
	}
}
