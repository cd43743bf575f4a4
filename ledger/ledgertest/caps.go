package ledgertest

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

func exerciseCaps(t *testing.T, newLedger NewLedger) {
	t.Run("FiftyConcurrentDrawersNeverOversellTheBudget", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 1)
		const budget = 10_000
		s := e.MustSession(t, l, budget, 4)
		var total, exhausted atomic.Int64
		releaseAll(t, 50, func(i int) error {
			want := int64(97 + i*13)
			for { // keep drawing until the budget says no
				got, err := e.l.BudgetDraw(e.ctx, s.ID, want)
				switch {
				case errors.Is(err, ledger.ErrBudgetExhausted):
					exhausted.Add(1)
					return nil
				case err != nil:
					return err
				case got < 1 || got > want:
					return fmt.Errorf("granted %d for a draw of %d", got, want)
				}
				total.Add(got)
			}
		})
		if total.Load() != budget || exhausted.Load() != 50 {
			t.Fatalf("granted %d bytes in all (want exactly %d), %d drawers saw exhaustion (want 50)", total.Load(), budget, exhausted.Load())
		}
		got, _ := e.l.SessionGet(e.ctx, s.ID)
		if got.BytesDrawn != budget {
			t.Fatalf("bytes_drawn = %d, want %d", got.BytesDrawn, budget)
		}
	})
	t.Run("ReturnedBytesCanBeDrawnAgain", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 1)
		s := e.MustSession(t, l, 100, 1)
		if got, err := e.l.BudgetDraw(e.ctx, s.ID, 80); err != nil || got != 80 {
			t.Fatalf("draw 80 = %d, %v", got, err)
		}
		if got, err := e.l.BudgetDraw(e.ctx, s.ID, 80); err != nil || got != 20 {
			t.Fatalf("draw 80 of 20 left = %d, %v; want the rest, 20", got, err)
		}
		if _, err := e.l.BudgetDraw(e.ctx, s.ID, 1); !errors.Is(err, ledger.ErrBudgetExhausted) {
			t.Fatalf("draw from empty budget = %v, want ErrBudgetExhausted", err)
		}
		if err := e.l.BudgetReturn(e.ctx, s.ID, 30); err != nil {
			t.Fatal(err)
		}
		if got, err := e.l.BudgetDraw(e.ctx, s.ID, 100); err != nil || got != 30 {
			t.Fatalf("draw after return = %d, %v; want 30", got, err)
		}
	})
	t.Run("FiftyConcurrentAcquirersNeverExceedTheSlotCap", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 1)
		const slots = 4
		s := e.MustSession(t, l, 1000, slots)
		var held, refused atomic.Int64
		releaseAll(t, 50, func(i int) error {
			err := e.l.SlotAcquire(e.ctx, s.ID, fmt.Sprintf("holder-%02d", i), 30*time.Second)
			switch {
			case err == nil:
				held.Add(1)
			case errors.Is(err, ledger.ErrNoSlot):
				refused.Add(1)
			default:
				return err
			}
			return nil
		})
		if held.Load() != slots || refused.Load() != 50-slots {
			t.Fatalf("%d acquired, %d refused; want %d and %d", held.Load(), refused.Load(), slots, 50-slots)
		}
	})
	t.Run("ReleasedSlotIsFreeAtOnce", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 1)
		s := e.MustSession(t, l, 1000, 1)
		if err := e.l.SlotAcquire(e.ctx, s.ID, "a", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := e.l.SlotAcquire(e.ctx, s.ID, "b", 30*time.Second); !errors.Is(err, ledger.ErrNoSlot) {
			t.Fatalf("second acquire = %v, want ErrNoSlot", err)
		}
		if err := e.l.SlotRenew(e.ctx, s.ID, "a", 30*time.Second); err != nil {
			t.Fatalf("renew own lease: %v", err)
		}
		if err := e.l.SlotRelease(e.ctx, s.ID, "a"); err != nil {
			t.Fatal(err)
		}
		if err := e.l.SlotAcquire(e.ctx, s.ID, "b", 30*time.Second); err != nil {
			t.Fatalf("acquire after release: %v", err)
		}
		if err := e.l.SlotRenew(e.ctx, s.ID, "a", 30*time.Second); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("renew of a released lease = %v, want ErrNotFound", err)
		}
	})
	t.Run("LapsedLeaseIsReclaimableAndSwept", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 1)
		s := e.MustSession(t, l, 1000, 1)
		if err := e.l.SlotAcquire(e.ctx, s.ID, "crashed", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(30*time.Second - time.Microsecond)
		if err := e.l.SlotAcquire(e.ctx, s.ID, "new", 30*time.Second); !errors.Is(err, ledger.ErrNoSlot) {
			t.Fatalf("acquire before the lease lapsed = %v, want ErrNoSlot", err)
		}
		e.clock.Add(time.Microsecond)
		res, err := e.l.SessionSweep(e.ctx, 10)
		if err != nil || res.LeasesCleared != 1 {
			t.Fatalf("Sweep = %+v, %v; want one lease cleared", res, err)
		}
		if err := e.l.SlotAcquire(e.ctx, s.ID, "new", 30*time.Second); err != nil {
			t.Fatalf("acquire after the lease lapsed: %v", err)
		}
		if err := e.l.SlotRenew(e.ctx, s.ID, "crashed", 30*time.Second); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("the crashed holder renewed a slot it lost: %v", err)
		}
	})
	t.Run("ConcurrentSweepersEndEachSessionOnce", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 30)
		for i := 0; i < 25; i++ {
			e.MustSession(t, l, 1000, 1)
		}
		e.clock.Add(2 * time.Hour)
		var ended atomic.Int64
		releaseAll(t, 4, func(int) error {
			for {
				res, err := e.l.SessionSweep(e.ctx, 3)
				if err != nil || res.SessionsEnded == 0 {
					return err
				}
				ended.Add(int64(res.SessionsEnded))
			}
		})
		if ended.Load() != 25 {
			t.Fatalf("sweepers ended %d sessions, want each of 25 once", ended.Load())
		}
	})
}
