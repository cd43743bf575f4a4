package mysql_test

import (
	"context"
	"testing"

	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/ledgertest"
	"github.com/dlgate/dlgate/ledger/mysql"
)

func TestObjectsAcrossProcesses(t *testing.T) {
	server := testenv.SharedMariaDB(t)
	ledgertest.ExerciseObjectsAcrossProcesses(t, func(t *testing.T, clocks ...ledger.Clock) []ledger.Ledger {
		dsn := server.NewDatabase(t)
		var out []ledger.Ledger
		for _, clock := range clocks {
			// Each its own pool on the one database, as separate processes.
			db, err := mysql.Open(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			if err := mysql.Migrate(context.Background(), db.SQL()); err != nil {
				t.Fatal(err)
			}
			db.Now = clock // DBClock stays nil: MariaDB's clock decides
			out = append(out, db)
		}
		return out
	})
}
