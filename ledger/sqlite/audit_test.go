package sqlite_test

import (
	"testing"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/ledgertest"
	"github.com/dlgate/dlgate/ledger/sqlcore"
)

func TestAuditConformance(t *testing.T) {
	ledgertest.ExerciseAudit(t, func(t *testing.T, clock ledger.Clock, o ledgertest.Options) ledger.Ledger {
		db := MustOpen(t, clock).(*sqlcore.DB)
		db.Webhooks, db.BeforeCommit = o.Webhooks, o.BeforeCommit
		return db
	})
}

func TestConsoleAcrossProcesses(t *testing.T) {
	ledgertest.ExerciseConsoleAcrossProcesses(t, processes)
}
