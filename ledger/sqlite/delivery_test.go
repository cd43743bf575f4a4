package sqlite_test

import (
	"testing"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/ledgertest"
	"github.com/dlgate/dlgate/ledger/sqlcore"
)

func TestDeliveryConformance(t *testing.T) {
	ledgertest.ExerciseDelivery(t, func(t *testing.T, clock ledger.Clock, events bool) ledger.Ledger {
		l := MustOpen(t, clock)
		l.(*sqlcore.DB).Webhooks = events
		return l
	}, func(t *testing.T, clocks ...ledger.Clock) []ledger.Ledger {
		ls := processes(t, clocks...)
		for _, l := range ls {
			l.(*sqlcore.DB).Webhooks = true
		}
		return ls
	})
}
