package ledgertest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
)

// OpenShared returns one ledger per clock, all on one fresh, migrated
// database, deciding by the database's own clock (no stand-in); the i-th
// ledger's process clock (what it stamps records with) is clocks[i]. It
// registers its own cleanup.
type OpenShared func(t *testing.T, clocks ...ledger.Clock) []ledger.Ledger

// skew is how far the wrong clocks of ExerciseClockSkew are off: more
// than the leases and expiries the tests use, so any decision taken by a
// process clock would come out the other way.
const skew = 30 * time.Second

// ExerciseClockSkew runs processes whose clocks are 30 s ahead and 30 s
// behind next to one whose clock is right, on one database, and shows that
// the database's clock decides: the concurrency cap holds, and links and
// sessions expire when the database says, whoever asks.
func ExerciseClockSkew(t *testing.T, open OpenShared) {
	right := func() time.Time { return time.Now() }
	fast := func() time.Time { return time.Now().Add(skew) }
	slow := func() time.Time { return time.Now().Add(-skew) }
	setup := func(t *testing.T) (ctx context.Context, r, f, s ledger.Ledger) {
		ls := open(t, right, fast, slow)
		return context.Background(), ls[0], ls[1], ls[2]
	}

	t.Run("AFastProcessCannotTakeASlotAnotherHolds", func(t *testing.T) {
		t.Parallel()
		ctx, r, f, _ := setup(t)
		x := mustSkewSession(t, r, time.Now().Add(time.Hour), 1)
		const lease = 20 * time.Second // shorter than the skew
		if err := r.SlotAcquire(ctx, x.ID, "right", lease); err != nil {
			t.Fatal(err)
		}
		// By its own clock the fast process sees the lease lapsed 10 s ago.
		if err := f.SlotAcquire(ctx, x.ID, "fast", lease); !errors.Is(err, ledger.ErrNoSlot) {
			t.Fatalf("fast process acquiring a held slot = %v, want ErrNoSlot", err)
		}
		if res, err := f.SessionSweep(ctx, 10); err != nil || res.LeasesCleared != 0 {
			t.Fatalf("fast sweeper = %+v, %v; want no lease cleared", res, err)
		}
		if err := r.SlotRenew(ctx, x.ID, "right", lease); err != nil {
			t.Fatalf("the holder lost its lease to a fast sweeper: %v", err)
		}
		if err := f.SlotAcquire(ctx, x.ID, "fast", lease); !errors.Is(err, ledger.ErrNoSlot) {
			t.Fatalf("fast process after the sweep = %v, want ErrNoSlot", err)
		}
	})
	t.Run("ASlowProcessTakesALeaseThatLasts", func(t *testing.T) {
		t.Parallel()
		ctx, r, _, s := setup(t)
		x := mustSkewSession(t, r, time.Now().Add(time.Hour), 1)
		// By its own clock the slow process's lease would have lapsed
		// 10 s before it was taken.
		if err := s.SlotAcquire(ctx, x.ID, "slow", 20*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := r.SlotAcquire(ctx, x.ID, "right", 20*time.Second); !errors.Is(err, ledger.ErrNoSlot) {
			t.Fatalf("acquiring the slot a slow process holds = %v, want ErrNoSlot", err)
		}
		if res, err := r.SessionSweep(ctx, 10); err != nil || res.LeasesCleared != 0 {
			t.Fatalf("sweeper = %+v, %v; want the slow process's lease kept", res, err)
		}
	})
	t.Run("LinkExpiryIsTheDatabases", func(t *testing.T) {
		t.Parallel()
		ctx, r, f, s := setup(t)
		live := mustSkewLink(t, r, time.Now().Add(10*time.Second), stream)
		if _, err := grantOf(f.LinkClaim(ctx, live.TokenHash, ledger.ClaimRequest{Kind: ledger.KindStream}, false)); err != nil {
			t.Fatalf("fast process claiming a live link: %v", err)
		}
		if _, _, err := f.SessionMint(ctx, skewMint(live, time.Now().Add(time.Hour))); err != nil {
			t.Fatalf("fast process minting on a live link: %v", err)
		}
		dead := mustSkewLink(t, r, time.Now().Add(-2*time.Second), stream)
		_, err := grantOf(s.LinkClaim(ctx, dead.TokenHash, ledger.ClaimRequest{Kind: ledger.KindStream}, false))
		wantReason(t, err, ledger.ReasonExpired)
		_, _, err = s.SessionMint(ctx, skewMint(dead, time.Now().Add(time.Hour)))
		wantReason(t, err, ledger.ReasonExpired)
		st, err := r.LinkGet(ctx, dead.ID)
		if err != nil || st.Remaining != 2 || st.Grants[ledger.StatusGranted] != 0 {
			t.Fatalf("expired link after a slow process's claims: %+v, %v", st, err)
		}
	})
	t.Run("SessionExpiryIsTheDatabases", func(t *testing.T) {
		t.Parallel()
		ctx, r, f, s := setup(t)
		live := mustSkewSession(t, r, time.Now().Add(10*time.Second), 1)
		if got, err := f.BudgetDraw(ctx, live.ID, 10); err != nil || got != 10 {
			t.Fatalf("fast process drawing from a live session = %d, %v", got, err)
		}
		dead := mustSkewSession(t, r, time.Now().Add(-2*time.Second), 1)
		_, err := s.BudgetDraw(ctx, dead.ID, 10)
		wantReason(t, err, ledger.ReasonExpired)
		res, err := f.SessionSweep(ctx, 10)
		if err != nil || res.SessionsEnded != 1 {
			t.Fatalf("fast sweeper = %+v, %v; want exactly the expired session ended", res, err)
		}
		if got, err := r.BudgetDraw(ctx, live.ID, 10); err != nil || got != 10 {
			t.Fatalf("the live session after a fast sweep = %d, %v", got, err)
		}
	})
}

// stream makes a link of delivery stream.
func stream(l *ledger.Link) { l.Delivery, l.Allowance, l.Remaining = ledger.DeliveryStream, 2, 2 }

func mustSkewLink(tb testing.TB, l ledger.Ledger, expires time.Time, edit ...func(*ledger.Link)) *ledger.Link {
	tb.Helper()
	in := &ledger.Link{
		ID: uuid.Must(uuid.NewV7()).String(), TokenHash: randomHash(tb),
		Object:    ledger.Object{Bucket: "b", Key: "k", VersionID: "v1", Size: 10},
		Allowance: 1, Remaining: 1, ExpiresAt: expires, Delivery: ledger.DeliverySession,
	}
	for _, f := range edit {
		f(in)
	}
	out, _, err := l.LinkCreate(context.Background(), in)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

func skewMint(l *ledger.Link, expires time.Time) ledger.MintRequest {
	return ledger.MintRequest{
		Claim:     ledger.ClaimRequest{LinkID: l.ID, Client: "test"},
		SessionID: uuid.Must(uuid.NewV7()).String(), TokenHash: randomHash(nil),
		ByteBudget: 1000, MaxConcurrency: 1, ExpiresAt: expires,
	}
}

// mustSkewSession mints, on a fresh link, a session expiring at expires
// with the given number of slots.
func mustSkewSession(tb testing.TB, l ledger.Ledger, expires time.Time, slots int) *ledger.Session {
	tb.Helper()
	req := skewMint(mustSkewLink(tb, l, time.Now().Add(time.Hour)), expires)
	req.MaxConcurrency = slots
	x, _, err := l.SessionMint(context.Background(), req)
	if err != nil {
		tb.Fatal(err)
	}
	return x
}
