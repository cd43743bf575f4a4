package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/ledgertest"
	"github.com/dlgate/dlgate/ledger/sqlcore"
	"github.com/dlgate/dlgate/ledger/sqlite"
)

func TestConformance(t *testing.T) {
	ledgertest.Exercise(t, func(t *testing.T, clock ledger.Clock) ledger.Ledger {
		return MustOpen(t, clock)
	})
}

// TestConformanceWithoutGrouping runs the suite again with group claims
// off (ClaimBatch 1, GATEWAY_CLAIM_BATCH=1): every claim a transaction of
// its own.
func TestConformanceWithoutGrouping(t *testing.T) {
	ledgertest.Exercise(t, func(t *testing.T, clock ledger.Clock) ledger.Ledger {
		db := MustOpen(t, clock).(*sqlcore.DB)
		db.ClaimBatch = 1
		return db
	})
}

// TestClaimsConformanceWithWebhooks runs the claims again with webhooks
// on, where every claim transaction writes its outbox rows too.
func TestClaimsConformanceWithWebhooks(t *testing.T) {
	ledgertest.ExerciseClaims(t, func(t *testing.T, clock ledger.Clock) ledger.Ledger {
		db := MustOpen(t, clock).(*sqlcore.DB)
		db.Webhooks = true
		return db
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
	// The suite moves time for the database's decisions and the records alike.
	db.Now, db.DBClock = clock, clock
	return db
}

func TestClaimsAcrossProcesses(t *testing.T) {
	ledgertest.ExerciseClaimsAcrossProcesses(t, processes)
}

func TestClockSkew(t *testing.T) {
	ledgertest.ExerciseClockSkew(t, processes)
}

// processes opens one ledger per clock, each its own pool on one fresh
// file, as separate gateway processes would be. DBClock stays nil:
// SQLite's clock decides; each clock only stamps.
func processes(t *testing.T, clocks ...ledger.Clock) []ledger.Ledger {
	path := filepath.Join(t.TempDir(), "gateway.db")
	var out []ledger.Ledger
	for _, clock := range clocks {
		db, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if err := sqlite.Migrate(context.Background(), db.SQL(), path); err != nil {
			t.Fatal(err)
		}
		db.Now = clock
		out = append(out, db)
	}
	return out
}
