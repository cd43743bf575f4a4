package ledgertest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
)

// ExerciseAcrossProcesses runs the work every gateway process shares (the
// sweeper, the audit purge, the webhook deliverers) on two ledgers with
// pools of their own on one database, two workers each, deciding by the
// database's clock, and shows that each item is taken once: what hands a
// row out is a conditional UPDATE on every engine, with or without SKIP
// LOCKED. The ledgers open must write webhook events (GATEWAY_WEBHOOK_URL
// set) and implement ledger.Outbox.
func ExerciseAcrossProcesses(t *testing.T, open OpenShared) {
	const workers = 2
	// The records are stamped three hours ago by a clock the database's
	// does not follow: an hour past every retention and age below.
	past := func() time.Time { return time.Now().Add(-3 * time.Hour) }

	t.Run("TwoSweepersOnTwoPoolsEndEachSessionOnce", func(t *testing.T) {
		t.Parallel()
		ls := open(t, time.Now, time.Now)
		ctx := context.Background()
		const sessions = 40
		l := &ledger.Link{ID: uuid.Must(uuid.NewV7()).String(), TokenHash: randomHash(t),
			Object:    ledger.Object{Bucket: "b", Key: "swept", VersionID: "v1", Size: 1},
			Allowance: sessions, Remaining: sessions, ExpiresAt: time.Now().Add(time.Hour), Delivery: ledger.DeliverySession}
		if _, _, err := ls[0].LinkCreate(ctx, l); err != nil {
			t.Fatal(err)
		}
		for i := range sessions {
			_, _, err := ls[i%2].SessionMint(ctx, ledger.MintRequest{
				Claim:     ledger.ClaimRequest{LinkID: l.ID, Client: "test"},
				SessionID: uuid.Must(uuid.NewV7()).String(), TokenHash: randomHash(t),
				ByteBudget: 1000, MaxConcurrency: 2, ExpiresAt: time.Now().Add(-time.Hour),
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		var ended atomic.Int64
		releaseAll(t, workers*len(ls), func(i int) error {
			for {
				res, err := ls[i%len(ls)].SessionSweep(ctx, 3)
				if err != nil || res.SessionsEnded == 0 {
					return err
				}
				ended.Add(int64(res.SessionsEnded))
			}
		})
		if ended.Load() != sessions {
			t.Fatalf("sweepers on two pools ended %d sessions, want each of %d once", ended.Load(), sessions)
		}
		if res, err := ls[0].SessionSweep(ctx, 100); err != nil || res.SessionsEnded != 0 {
			t.Fatalf("a sweep after them = %+v, %v; want nothing left", res, err)
		}
	})

	t.Run("TwoDeliverersOnTwoPoolsTakeEachEventOnce", func(t *testing.T) {
		t.Parallel()
		ls := open(t, time.Now, time.Now)
		ctx := context.Background()
		const links = 40
		for i := range links {
			mustCreate(t, ls[i%2], time.Now().Add(time.Hour))
		}
		var (
			mu    sync.Mutex
			taken = map[string]int{}
		)
		releaseAll(t, workers*len(ls), func(i int) error {
			o := outboxOf(ls[i%len(ls)])
			holder := fmt.Sprintf("deliverer-%d", i)
			for {
				evs, err := o.EventClaim(ctx, holder, 3, time.Minute)
				if err != nil || len(evs) == 0 {
					return err
				}
				for _, x := range evs {
					mu.Lock()
					taken[x.ID]++
					mu.Unlock()
					if err := o.EventMarkDelivered(ctx, x.Seq, holder); err != nil {
						return fmt.Errorf("%s delivering seq %d: %w", holder, x.Seq, err)
					}
				}
			}
		})
		for id, n := range taken {
			if n != 1 {
				t.Errorf("event %s was taken %d times", id, n)
			}
		}
		if len(taken) != links {
			t.Fatalf("%d events taken, want each of %d once", len(taken), links)
		}
	})

	t.Run("TwoExpirersOnTwoPoolsGiveUpEachEventOnce", func(t *testing.T) {
		t.Parallel()
		ls := open(t, past, past)
		ctx := context.Background()
		const links = 40
		for i := range links {
			mustCreate(t, ls[i%2], time.Now().Add(time.Hour))
		}
		var given atomic.Int64
		releaseAll(t, workers*len(ls), func(i int) error {
			for {
				n, err := outboxOf(ls[i%len(ls)]).EventExpire(ctx, time.Hour, 3)
				if err != nil || n == 0 {
					return err
				}
				given.Add(int64(n))
			}
		})
		if given.Load() != links {
			t.Fatalf("expirers on two pools gave up %d events, want each of %d once", given.Load(), links)
		}
	})

	t.Run("TwoPurgersOnTwoPoolsPurgeEachLinkOnce", func(t *testing.T) {
		t.Parallel()
		ls := open(t, past, past)
		ctx := context.Background()
		const links = 40
		for i := range links {
			mustCreate(t, ls[i%2], time.Now().Add(-2*time.Hour))
		}
		var purged atomic.Int64
		releaseAll(t, workers*len(ls), func(i int) error {
			for {
				res, err := ls[i%len(ls)].LinkPurge(ctx, time.Hour, 3)
				if err != nil || res.Links == 0 {
					return err
				}
				purged.Add(int64(res.Links))
			}
		})
		if purged.Load() != links {
			t.Fatalf("purgers on two pools purged %d links, want each of %d once", purged.Load(), links)
		}
	})
}

// mustCreate creates a one-download link on l expiring at expires.
func mustCreate(tb testing.TB, l ledger.Ledger, expires time.Time) *ledger.Link {
	tb.Helper()
	link := &ledger.Link{ID: uuid.Must(uuid.NewV7()).String(), TokenHash: randomHash(tb),
		Object:    ledger.Object{Bucket: "b", Key: "shared", VersionID: "v1", Size: 1},
		Allowance: 1, Remaining: 1, ExpiresAt: expires, Delivery: ledger.DeliveryStream}
	if _, _, err := l.LinkCreate(context.Background(), link); err != nil {
		tb.Fatalf("LinkCreate = %v", err)
	}
	return link
}

func outboxOf(l ledger.Ledger) ledger.Outbox {
	o, ok := l.(ledger.Outbox)
	if !ok {
		panic(fmt.Sprintf("%T does not implement ledger.Outbox", l))
	}
	return o
}
