package sqlite_test

import (
	"testing"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/ledgertest"
	"github.com/dlgate/dlgate/ledger/sqlcore"
)

func TestOutboxConformance(t *testing.T) {
	open := func(t *testing.T, clock ledger.Clock, events bool) ledger.Ledger {
		l := MustOpen(t, clock)
		l.(*sqlcore.DB).Webhooks = events
		return l
	}
	ledgertest.ExerciseOutbox(t, open)
	ledgertest.ExerciseDigestEvents(t, open)
}
