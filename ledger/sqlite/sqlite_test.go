package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/ledgertest"
	"github.com/dlgate/dlgate/ledger/sqlite"
)

func TestConformance(t *testing.T) {
	ledgertest.Exercise(t, func(t *testing.T, clock ledger.Clock) ledger.Ledger {
		return MustOpen(t, clock)
	})
}

// MustOpen opens a migrated ledger in a fresh file.
func MustOpen(tb testing.TB, clock ledger.Clock) ledger.Ledger {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "gateway.db")
	db, err := sqlite.Open(context.Background(), path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	if err := sqlite.Migrate(context.Background(), db.SQL(), path); err != nil {
		tb.Fatal(err)
	}
	db.Now = clock
	return db
}
