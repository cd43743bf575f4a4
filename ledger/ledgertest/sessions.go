package ledgertest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
)

// MustSession mints a session on l for account with the given key.
func (e *env) mint(l *ledger.Link, account, key string, budget int64, slots int) (*ledger.Session, bool, error) {
	return e.l.SessionMint(e.ctx, ledger.MintRequest{
		Claim:          ledger.ClaimRequest{LinkID: l.ID, AccountID: account, Client: "test"},
		SessionID:      uuid.Must(uuid.NewV7()).String(),
		TokenHash:      randomHash(nil),
		ByteBudget:     budget,
		MaxConcurrency: slots,
		ExpiresAt:      e.clock.Now().Add(time.Hour),
		IdempotencyKey: key,
	})
}

func (e *env) MustSession(tb testing.TB, l *ledger.Link, budget int64, slots int) *ledger.Session {
	tb.Helper()
	s, created, err := e.mint(l, "", "", budget, slots)
	if err != nil || !created {
		tb.Fatalf("SessionMint = %v, %v", created, err)
	}
	return s
}

func exerciseSessions(t *testing.T, newLedger NewLedger) {
	t.Run("MintClaimsOneAllowanceAndPinsTheObject", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 2, func(l *ledger.Link) { l.Delivery = ledger.DeliverySession })
		s := e.MustSession(t, l, 4000, 3)
		if s.LinkID != l.ID || s.Object != l.Object || s.Filename != l.Filename || s.ByteBudget != 4000 ||
			s.MaxConcurrency != 3 || s.BytesDrawn != 0 || s.GrantID == "" {
			t.Fatalf("session %+v does not pin link %+v", s, l)
		}
		byHash, err := e.l.SessionGetByTokenHash(e.ctx, s.TokenHash)
		if err != nil || byHash.ID != s.ID {
			t.Fatalf("SessionGetByTokenHash = %+v, %v", byHash, err)
		}
		st := e.mustStatus(t, l.ID)
		if st.Remaining != 1 || st.ActiveSessions != 1 || st.Grants[ledger.StatusGranted] != 1 {
			t.Fatalf("after mint: %+v", st)
		}
		p, _ := e.l.GrantList(e.ctx, ledger.GrantQuery{LinkID: l.ID, Cursor: "", Limit: 10})
		if len(p.Grants) != 1 || p.Grants[0].Kind != ledger.KindSession || p.Grants[0].SessionID != s.ID {
			t.Fatalf("grants %+v", p.Grants)
		}
	})
	t.Run("RefundingASessionGrantRevokesItsSession", func(t *testing.T) {
		// The refund of a mint whose commit outcome was unknown (its
		// answer was a 503): nobody knows the session's URL, and a mint
		// replayed for its Idempotency-Key must not hand out a session
		// that cost nothing.
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 1, func(l *ledger.Link) { l.Delivery = ledger.DeliverySession })
		s, created, err := e.mint(l, "", "key", 1000, 1)
		if err != nil || !created {
			t.Fatalf("SessionMint = %v, %v", created, err)
		}
		if err := e.l.GrantRefund(e.ctx, s.GrantID); err != nil {
			t.Fatal(err)
		}
		got, err := e.l.SessionGet(e.ctx, s.ID)
		if err != nil || got.RevokedAt == nil {
			t.Fatalf("the session of a refunded grant: %+v, %v; want it revoked", got, err)
		}
		if st := e.mustStatus(t, l.ID); st.Remaining != 1 || st.ActiveSessions != 0 || st.Grants[ledger.StatusRefunded] != 1 {
			t.Fatalf("after the refund: %+v; want the allowance back, no live session", st)
		}
		if again, created, err := e.mint(l, "", "key", 1000, 1); err != nil || created || again.ID != s.ID || again.Usable(e.clock.Now(), 1) {
			t.Fatalf("the mint replayed for its key = %+v, %v, %v; want the revoked session, unusable", again, created, err)
		}
		if err := e.l.GrantRefund(e.ctx, s.GrantID); err != nil {
			t.Fatalf("a second refund: %v", err)
		}
		if st := e.mustStatus(t, l.ID); st.Remaining != 1 {
			t.Fatalf("a second refund gave back more: remaining %d", st.Remaining)
		}
	})
	t.Run("MintOnExhaustedLinkIsRefusedAndCreatesNothing", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 1)
		e.MustSession(t, l, 100, 1)
		_, _, err := e.mint(l, "", "key", 100, 1)
		wantReason(t, err, ledger.ReasonExhausted)
		if st := e.mustStatus(t, l.ID); st.ActiveSessions != 1 || st.Grants[ledger.StatusGranted] != 1 {
			t.Fatalf("after refused mint: %+v", st)
		}
	})
	t.Run("TwentyConcurrentMintsWithOneKeyClaimOnce", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 5)
		var (
			mu      sync.Mutex
			created int
			ids     = map[string]int{}
		)
		releaseAll(t, 20, func(int) error {
			s, c, err := e.mint(l, "alice", "same-key", 1000, 2)
			if err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			if c {
				created++
			}
			ids[s.ID]++
			return nil
		})
		if created != 1 || len(ids) != 1 {
			t.Fatalf("created=%d distinct sessions=%d, want 1 and 1", created, len(ids))
		}
		if st := e.mustStatus(t, l.ID); st.Remaining != 4 || st.Grants[ledger.StatusGranted] != 1 {
			t.Fatalf("remaining=%d grants=%v, want 4 and one grant", st.Remaining, st.Grants)
		}
		// The key is scoped to (link, account): another account's key of
		// the same text is a different mint.
		_, c, err := e.mint(l, "bob", "same-key", 1000, 2)
		if err != nil || !c {
			t.Fatalf("same key, other account = %v, %v; want a new session", c, err)
		}
	})
	t.Run("RevokingTheLinkEndsItsSessions", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 2)
		s := e.MustSession(t, l, 1000, 1)
		if err := e.l.LinkRevoke(e.ctx, l.ID); err != nil {
			t.Fatal(err)
		}
		_, err := e.l.BudgetDraw(e.ctx, s.ID, 10)
		wantReason(t, err, ledger.ReasonRevoked)
		got, err := e.l.SessionGet(e.ctx, s.ID)
		if err != nil || got.RevokedAt == nil || got.LinkRevokedAt == nil {
			t.Fatalf("session after link revoke: %+v, %v", got, err)
		}
		if st := e.mustStatus(t, l.ID); st.ActiveSessions != 0 {
			t.Fatalf("active sessions = %d after revoke", st.ActiveSessions)
		}
	})
	t.Run("RevokedSessionDrawsNothing", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 2)
		s := e.MustSession(t, l, 1000, 1)
		for i := 0; i < 2; i++ {
			if err := e.l.SessionRevoke(e.ctx, s.ID); err != nil {
				t.Fatal(err)
			}
		}
		_, err := e.l.BudgetDraw(e.ctx, s.ID, 10)
		wantReason(t, err, ledger.ReasonRevoked)
		if err := e.l.SessionRevoke(e.ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("revoke unknown session = %v", err)
		}
	})
	t.Run("ExpiredSessionDrawsNothingAndIsSwept", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 2)
		s := e.MustSession(t, l, 1000, 2)
		if err := e.l.SlotAcquire(e.ctx, s.ID, "h1", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		e.clock.Set(s.ExpiresAt)
		_, err := e.l.BudgetDraw(e.ctx, s.ID, 10)
		wantReason(t, err, ledger.ReasonExpired)
		res, err := e.l.SessionSweep(e.ctx, 10)
		if err != nil || res.SessionsEnded != 1 {
			t.Fatalf("Sweep = %+v, %v; want one session ended", res, err)
		}
		res, err = e.l.SessionSweep(e.ctx, 10)
		if err != nil || res.SessionsEnded != 0 {
			t.Fatalf("second Sweep = %+v, %v; want nothing left", res, err)
		}
		got, _ := e.l.SessionGet(e.ctx, s.ID)
		if got.EndedAt == nil {
			t.Fatalf("swept session not ended: %+v", got)
		}
	})
}
