package sqlite_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/ledgertest"
	"github.com/dlgate/dlgate/ledger/sqlcore"
	"github.com/dlgate/dlgate/ledger/sqlite"
	"github.com/dlgate/dlgate/migrations"
)

// migrateChildEnv makes the test binary a migrating process: it opens the
// database file the variable names, waits for migrateAtEnv's instant,
// migrates, and exits 0, or 1 with the error on stderr.
const (
	migrateChildEnv = "DLGATE_TEST_MIGRATE_CHILD_PATH"
	migrateAtEnv    = "DLGATE_TEST_MIGRATE_AT"
)

func TestMain(m *testing.M) {
	if path := os.Getenv(migrateChildEnv); path != "" {
		os.Exit(migrateChild(path))
	}
	os.Exit(m.Run())
}

func migrateChild(path string) int {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer db.Close()
	if at, err := strconv.ParseInt(os.Getenv(migrateAtEnv), 10, 64); err == nil {
		time.Sleep(time.Until(time.Unix(0, at)))
	}
	if err := sqlite.Migrate(ctx, db.SQL(), path); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestMigrationByEightProcessesAtOnce starts eight processes that migrate
// one new database file at the same instant: every one succeeds, and each
// migration is applied once.
func TestMigrationByEightProcessesAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gateway.db")
	const n = 8
	at := time.Now().Add(time.Second).UnixNano()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		fail []string
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), migrateChildEnv+"="+path, migrateAtEnv+"="+strconv.FormatInt(at, 10))
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Run(); err != nil {
				mu.Lock()
				fail = append(fail, fmt.Sprintf("process %d: %v: %s", i, err, strings.TrimSpace(stderr.String())))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, f := range fail {
		t.Error(f)
	}
	db, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.SQL().Query(`SELECT version_id, COUNT(*) FROM goose_db_version WHERE version_id > 0 GROUP BY version_id ORDER BY version_id`)
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
	want, err := migrations.Versions(migrations.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(versions, want) {
		t.Fatalf("applied migrations %v, want each of %v once", versions, want)
	}
}

func TestAcrossProcesses(t *testing.T) {
	ledgertest.ExerciseAcrossProcesses(t, func(t *testing.T, clocks ...ledger.Clock) []ledger.Ledger {
		ls := processes(t, clocks...)
		for _, l := range ls {
			l.(*sqlcore.DB).Webhooks = true
		}
		return ls
	})
}
