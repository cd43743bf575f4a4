package mysql_test

import (
	"testing"

	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/ledgertest"
	"github.com/dlgate/dlgate/ledger/sqlcore"
)

func TestOutboxConformance(t *testing.T) {
	server := testenv.SharedMariaDB(t)
	open := func(t *testing.T, clock ledger.Clock, events bool) ledger.Ledger {
		l := MustOpen(t, server.NewDatabase(t), clock)
		l.(*sqlcore.DB).Webhooks = events
		return l
	}
	ledgertest.ExerciseOutbox(t, open)
	ledgertest.ExerciseDigestEvents(t, open)
}
