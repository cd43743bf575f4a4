package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/ledgertest"
	"github.com/dlgate/dlgate/ledger/sqlite"
)

func TestObjectsAcrossProcesses(t *testing.T) {
	ledgertest.ExerciseObjectsAcrossProcesses(t, func(t *testing.T, clocks ...ledger.Clock) []ledger.Ledger {
		path := filepath.Join(t.TempDir(), "gateway.db")
		var out []ledger.Ledger
		for _, clock := range clocks {
			// Each its own pool on the one file, as separate processes.
			db, err := sqlite.Open(context.Background(), path)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			if err := sqlite.Migrate(context.Background(), db.SQL(), path); err != nil {
				t.Fatal(err)
			}
			db.Now = clock // DBClock stays nil: SQLite's clock decides
			out = append(out, db)
		}
		return out
	})
}
