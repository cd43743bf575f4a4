package ledgertest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
)

// mintAffinity asks for account's affinity session of l (SPEC §5).
func (e *env) mintAffinity(l *ledger.Link, account string) (*ledger.Session, bool, error) {
	return e.l.SessionMint(e.ctx, ledger.MintRequest{
		Claim:          ledger.ClaimRequest{LinkID: l.ID, AccountID: account, Client: "test"},
		SessionID:      uuid.Must(uuid.NewV7()).String(),
		TokenHash:      randomHash(nil),
		ByteBudget:     1000,
		MaxConcurrency: 2,
		ExpiresAt:      e.clock.Now().Add(time.Hour),
		Affinity:       true,
	})
}

func exerciseAffinity(t *testing.T, newLedger NewLedger) {
	bound := func(l *ledger.Link) { l.Delivery, l.AccountID = ledger.DeliverySession, "alice" }
	t.Run("TwentyConcurrentFirstRequestsOfOneAccountMakeOneSession", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 3, bound)
		created, ids := concurrentSessions(t, 20, func(int) (*ledger.Session, bool, error) { return e.mintAffinity(l, "alice") })
		if created != 1 || len(ids) != 1 {
			t.Fatalf("20 concurrent affinity mints: %d created, sessions %v; want one session", created, ids)
		}
		if st := e.mustStatus(t, l.ID); st.Remaining != 2 || st.Grants[ledger.StatusGranted] != 1 {
			t.Fatalf("after affinity mints: %+v, want one claim", st)
		}
		for id := range ids {
			got, err := e.l.SessionGetByAffinity(e.ctx, l.ID, "alice", nil)
			if err != nil || got.ID != id {
				t.Fatalf("SessionGetByAffinity = %+v, %v; want %s", got, err, id)
			}
		}
	})
	t.Run("ADeadAffinitySessionIsNotReused", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 3, bound, func(l *ledger.Link) { l.ExpiresAt = e.clock.Now().Add(24 * time.Hour) })
		first, created, err := e.mintAffinity(l, "alice")
		if err != nil || !created {
			t.Fatalf("first affinity mint = %v, %v", created, err)
		}
		if err := e.l.SessionRevoke(e.ctx, first.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.l.SessionGetByAffinity(e.ctx, l.ID, "alice", nil); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("SessionGetByAffinity of a revoked session: %v, want ErrNotFound", err)
		}
		_, ids := concurrentSessions(t, 10, func(int) (*ledger.Session, bool, error) { return e.mintAffinity(l, "alice") })
		if len(ids) != 1 || ids[first.ID] != 0 {
			t.Fatalf("after the revocation: sessions %v, want one new one", ids)
		}
		// Expiry kills it too.
		e.clock.Add(2 * time.Hour)
		third, created, err := e.mintAffinity(l, "alice")
		if err != nil || !created || ids[third.ID] != 0 {
			t.Fatalf("after expiry: %+v, %v, %v; want a third session", third, created, err)
		}
		if st := e.mustStatus(t, l.ID); st.Remaining != 0 || st.Grants[ledger.StatusGranted] != 3 {
			t.Fatalf("three affinity sessions: %+v, want three claims", st)
		}
	})
	t.Run("AffinityIsPerAccount", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 3, bound)
		if _, _, err := e.mintAffinity(l, "alice"); err != nil {
			t.Fatal(err)
		}
		_, _, err := e.mintAffinity(l, "mallory")
		wantReason(t, err, ledger.ReasonWrongAccount)
		if _, err := e.l.SessionGetByAffinity(e.ctx, l.ID, "mallory", nil); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("SessionGetByAffinity for another account: %v, want ErrNotFound", err)
		}
	})
	t.Run("ASessionIsBoundOnlyWhenItsLinkIs", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		open := e.MustLink(t, 2, func(l *ledger.Link) { l.Delivery = ledger.DeliverySession })
		s, _, err := e.mint(open, "alice", "", 100, 1)
		if err != nil {
			t.Fatal(err)
		}
		if s.AccountID != "" {
			t.Fatalf("session of an unbound link minted by alice is bound to %q, want anonymous", s.AccountID)
		}
		b := e.MustLink(t, 2, bound)
		s, _, err = e.mint(b, "alice", "", 100, 1)
		if err != nil || s.AccountID != "alice" {
			t.Fatalf("session of alice's link: %+v, %v; want bound to alice", s, err)
		}
	})
}
