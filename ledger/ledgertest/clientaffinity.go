package ledgertest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
)

// mintForClient asks for the affinity session of the client named by keys
// (in the gateway's order: cookie, then address and User-Agent) on an
// unbound link (SPEC §5).
func (e *env) mintForClient(l *ledger.Link, budget int64, keys ...string) (*ledger.Session, bool, error) {
	return e.l.SessionMint(e.ctx, ledger.MintRequest{
		Claim:          ledger.ClaimRequest{LinkID: l.ID, Client: "test"},
		SessionID:      uuid.Must(uuid.NewV7()).String(),
		TokenHash:      randomHash(nil),
		ByteBudget:     budget,
		MaxConcurrency: 2,
		ExpiresAt:      e.clock.Now().Add(time.Hour),
		Affinity:       true,
		AffinityKeys:   keys,
	})
}

// concurrentSessions runs n simultaneous mints and returns how many
// created a session and how often each session came back.
func concurrentSessions(t *testing.T, n int, mint func(i int) (*ledger.Session, bool, error)) (int, map[string]int) {
	t.Helper()
	var (
		mu      sync.Mutex
		created int
		ids     = map[string]int{}
	)
	releaseAll(t, n, func(i int) error {
		s, c, err := mint(i)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		ids[s.ID]++
		if c {
			created++
		}
		return nil
	})
	return created, ids
}

// concurrentMints is concurrentSessions of the client named by keys.
func (e *env) concurrentMints(t *testing.T, l *ledger.Link, n int, keys ...string) (int, map[string]int) {
	t.Helper()
	return concurrentSessions(t, n, func(int) (*ledger.Session, bool, error) { return e.mintForClient(l, 1000, keys...) })
}

func exerciseClientAffinity(t *testing.T, newLedger NewLedger) {
	open := func(l *ledger.Link) { l.Delivery = ledger.DeliverySession }
	t.Run("TwentyConcurrentFirstRequestsOfOneClientMakeOneClaimAndOneSession", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 3, open)
		// Each request carries a fresh cookie id of its own, as the
		// gateway gives one to a client that has none; the address key
		// they share decides.
		created, ids := concurrentSessions(t, 20, func(int) (*ledger.Session, bool, error) {
			return e.mintForClient(l, 1000, "c:fresh-"+uuid.NewString()[:8], "u:client-a")
		})
		if created != 1 || len(ids) != 1 {
			t.Fatalf("20 concurrent first requests of one client: %d created, sessions %v; want one", created, ids)
		}
		if st := e.mustStatus(t, l.ID); st.Remaining != 2 || st.Grants[ledger.StatusGranted] != 1 {
			t.Fatalf("after 20 first requests of one client: %+v, want one claim", st)
		}
		for id := range ids {
			got, err := e.l.SessionGetByAffinity(e.ctx, l.ID, "", []string{"u:client-a"}, 1)
			if err != nil || got.ID != id {
				t.Fatalf("SessionGetByAffinity = %+v, %v; want %s", got, err, id)
			}
		}
	})
	t.Run("AnotherClientGetsItsOwnClaim", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 3, open)
		_, a := e.concurrentMints(t, l, 5, "u:client-a")
		_, b := e.concurrentMints(t, l, 5, "u:client-b")
		if len(a) != 1 || len(b) != 1 {
			t.Fatalf("sessions of a %v, of b %v; want one each", a, b)
		}
		for id := range a {
			if b[id] != 0 {
				t.Fatalf("two clients share session %s", id)
			}
		}
		if st := e.mustStatus(t, l.ID); st.Remaining != 1 || st.Grants[ledger.StatusGranted] != 2 {
			t.Fatalf("two clients: %+v, want two claims", st)
		}
		if _, err := e.l.SessionGetByAffinity(e.ctx, l.ID, "", []string{"u:client-c"}, 1); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("SessionGetByAffinity of a client that minted nothing: %v, want ErrNotFound", err)
		}
	})
	t.Run("EveryKeyOfTheMintingRequestFindsTheSession", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 3, open)
		// The first request had no cookie: the address key decided, and
		// the cookie id the gateway sets on its 303 is registered too.
		first, created, err := e.mintForClient(l, 1000, "c:cookie-1", "u:client-a")
		if err != nil || !created {
			t.Fatalf("first mint = %v, %v", created, err)
		}
		for _, keys := range [][]string{{"c:cookie-1"}, {"u:client-a"}, {"c:cookie-1", "u:client-a"}, {"c:unknown", "u:client-a"}} {
			got, err := e.l.SessionGetByAffinity(e.ctx, l.ID, "", keys, 1)
			if err != nil || got.ID != first.ID {
				t.Fatalf("SessionGetByAffinity(%q) = %+v, %v; want %s", keys, got, err, first.ID)
			}
			again, created, err := e.mintForClient(l, 1000, keys...)
			if err != nil || created || again.ID != first.ID {
				t.Fatalf("mint for %q = %+v, %v, %v; want the first session back", keys, again, created, err)
			}
		}
		// Keys are compared exactly: _ in a key is no wildcard.
		if _, err := e.l.SessionGetByAffinity(e.ctx, l.ID, "", []string{"c:cookie_1"}, 1); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("SessionGetByAffinity(c:cookie_1) = %v, want ErrNotFound", err)
		}
		if _, err := e.l.SessionGetByAffinity(e.ctx, l.ID, "", []string{"c:cookie-"}, 1); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("SessionGetByAffinity of a prefix of the key = %v, want ErrNotFound", err)
		}
		if st := e.mustStatus(t, l.ID); st.Grants[ledger.StatusGranted] != 1 {
			t.Fatalf("one client by several keys: %+v, want one claim", st)
		}
	})
	t.Run("AKnownCookieWinsOverTheAddress", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 3, open)
		// Two browsers behind one address with one User-Agent: the
		// second has its own cookie from a session of its own.
		a, _, err := e.mintForClient(l, 1000, "c:cookie-a", "u:shared")
		if err != nil {
			t.Fatal(err)
		}
		b, created, err := e.mintForClient(l, 1000, "c:cookie-b", "u:other")
		if err != nil || !created {
			t.Fatal(created, err)
		}
		got, err := e.l.SessionGetByAffinity(e.ctx, l.ID, "", []string{"c:cookie-b", "u:shared"}, 1)
		if err != nil || got.ID != b.ID || got.ID == a.ID {
			t.Fatalf("SessionGetByAffinity(cookie b, shared address) = %+v, %v; want b's session %s", got, err, b.ID)
		}
	})
	t.Run("ADeadOrSpentSessionMakesANewClaim", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 4, open, func(l *ledger.Link) { l.ExpiresAt = e.clock.Now().Add(24 * time.Hour) })
		first, _, err := e.mintForClient(l, 100, "c:cookie-1", "u:client-a")
		if err != nil {
			t.Fatal(err)
		}
		// Budget spent: not reused.
		if got, err := e.l.BudgetDraw(e.ctx, first.ID, 100); err != nil || got != 100 {
			t.Fatalf("BudgetDraw = %d, %v", got, err)
		}
		if _, err := e.l.SessionGetByAffinity(e.ctx, l.ID, "", []string{"c:cookie-1", "u:client-a"}, 1); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("SessionGetByAffinity of a spent session: %v, want ErrNotFound", err)
		}
		created, ids := e.concurrentMints(t, l, 10, "c:cookie-1", "u:client-a")
		if created != 1 || len(ids) != 1 || ids[first.ID] != 0 {
			t.Fatalf("after the budget was spent: %d created, sessions %v; want one new one", created, ids)
		}
		var second string
		for id := range ids {
			second = id
		}
		// Revoked: not reused.
		if err := e.l.SessionRevoke(e.ctx, second); err != nil {
			t.Fatal(err)
		}
		third, made, err := e.mintForClient(l, 100, "u:client-a")
		if err != nil || !made || third.ID == second {
			t.Fatalf("after the revocation: %+v, %v, %v; want a third session", third, made, err)
		}
		// Expired: not reused.
		e.clock.Add(2 * time.Hour)
		fourth, made, err := e.mintForClient(l, 100, "c:cookie-1")
		if err != nil || !made || fourth.ID == third.ID {
			t.Fatalf("after expiry: %+v, %v, %v; want a fourth session", fourth, made, err)
		}
		if st := e.mustStatus(t, l.ID); st.Remaining != 0 || st.Grants[ledger.StatusGranted] != 4 {
			t.Fatalf("four sessions: %+v, want four claims", st)
		}
	})
	t.Run("ABudgetDrawnWhileARequestStreamsIsNotSpentYet", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 3, open)
		x, _, err := e.mintForClient(l, 100, "u:client-a")
		if err != nil {
			t.Fatal(err)
		}
		if err := e.l.SlotAcquire(e.ctx, x.ID, "streaming", time.Minute); err != nil {
			t.Fatal(err)
		}
		if got, err := e.l.BudgetDraw(e.ctx, x.ID, 100); err != nil || got != 100 {
			t.Fatalf("BudgetDraw = %d, %v", got, err)
		}
		// The streaming request may give back what it did not send.
		if got, err := e.l.SessionGetByAffinity(e.ctx, l.ID, "", []string{"u:client-a"}, 1); err != nil || got.ID != x.ID {
			t.Fatalf("SessionGetByAffinity while a request holds a slot = %+v, %v; want the session", got, err)
		}
		if err := e.l.SlotRelease(e.ctx, x.ID, "streaming"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.l.SessionGetByAffinity(e.ctx, l.ID, "", []string{"u:client-a"}, 1); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("SessionGetByAffinity of a spent session no request holds: %v, want ErrNotFound", err)
		}
		// A lapsed lease is no request.
		if err := e.l.SlotAcquire(e.ctx, x.ID, "crashed", time.Second); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(2 * time.Second)
		if _, err := e.l.SessionGetByAffinity(e.ctx, l.ID, "", []string{"u:client-a"}, 1); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("SessionGetByAffinity of a spent session with a lapsed lease: %v, want ErrNotFound", err)
		}
	})
	t.Run("ARevokedLinkEndsTheAffinity", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 3, open)
		if _, _, err := e.mintForClient(l, 1000, "u:client-a"); err != nil {
			t.Fatal(err)
		}
		if err := e.l.LinkRevoke(e.ctx, l.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.l.SessionGetByAffinity(e.ctx, l.ID, "", []string{"u:client-a"}, 1); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("SessionGetByAffinity after the link's revocation: %v, want ErrNotFound", err)
		}
		_, _, err := e.mintForClient(l, 1000, "u:client-a")
		wantReason(t, err, ledger.ReasonRevoked)
	})
	t.Run("TheGrantCountsTheRequestsSentToItsSession", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 3, open)
		x, _, err := e.mintForClient(l, 1000, "u:client-a")
		if err != nil {
			t.Fatal(err)
		}
		releaseAll(t, 3, func(int) error { return e.l.SessionNoteAffinityReuse(e.ctx, x.ID) })
		p, err := e.l.GrantList(e.ctx, ledger.GrantQuery{LinkID: l.ID, Cursor: "", Limit: 10})
		if err != nil || len(p.Grants) != 1 || p.Grants[0].SessionID != x.ID || p.Grants[0].AffinityReuses != 3 {
			t.Fatalf("Grants = %+v, %v; want the session's grant with 3 reuses", p, err)
		}
	})
	t.Run("ABadClientKeyIsInvalid", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 3, open)
		long := make([]byte, ledger.MaxAffinityKey+1)
		for i := range long {
			long[i] = 'a'
		}
		for _, k := range []string{"", "has space", string(long), "tab\t"} {
			if _, _, err := e.mintForClient(l, 1000, k); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("mint with key %q: %v, want ErrInvalid", k, err)
			}
			if _, err := e.l.SessionGetByAffinity(e.ctx, l.ID, "", []string{k}, 1); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("SessionGetByAffinity with key %q: %v, want ErrInvalid", k, err)
			}
		}
		if st := e.mustStatus(t, l.ID); st.Remaining != 3 {
			t.Fatalf("bad keys spent allowance: %+v", st)
		}
	})
}
