package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore"
)

// Group claims (SPEC §1): claims that arrive while a claim transaction of
// the process is in flight are decided together in the next one. The
// tests hold one claim's transaction in flight (the "blocker", through
// sqlcore.DB.ClaimHook), let other claims arrive one after another, and
// release it. With grouping off (ClaimBatch 1) the same claims run each in
// a transaction of their own, and every sentence holds as well.

// dbOf is the sqlcore ledger behind l, whose knobs and hooks the group
// tests set. Every backend is one.
func dbOf(tb testing.TB, l ledger.Ledger) *sqlcore.DB {
	tb.Helper()
	db, ok := l.(*sqlcore.DB)
	if !ok {
		tb.Fatalf("%T is not a *sqlcore.DB", l)
	}
	return db
}

// errHooked is the failure the hooks inject into a claim whose client
// starts with "fail".
var errHooked = errors.New("ledgertest: injected failure")

// hooks are a ClaimHook for the group tests: the claim of client
// "blocker" stays in its transaction (its row locked) until release is
// closed; a claim of a client starting with "fail" fails, "panic" panics,
// both when their transaction judges them; and each client's claim
// reports when it queues.
type hooks struct {
	mu      sync.Mutex
	queued  map[string]chan struct{}
	blocked chan struct{}
	release chan struct{}
	once    sync.Once
	hold    bool
}

// installHooks sets the hooks on db. With grouping off there is no queue
// for the blocker to gather, and on SQLite its transaction would hold the
// one write lock: the blocker holds only while grouping is on, unless
// always.
func installHooks(db *sqlcore.DB, always ...bool) *hooks {
	h := &hooks{queued: map[string]chan struct{}{}, blocked: make(chan struct{}), release: make(chan struct{}),
		hold: db.ClaimBatch > 1 || len(always) > 0 && always[0]}
	db.ClaimHook = h.hook
	return h
}

func (h *hooks) hook(at sqlcore.ClaimPoint, req ledger.ClaimRequest) error {
	switch {
	case at == sqlcore.ClaimQueued:
		h.mu.Lock()
		defer h.mu.Unlock()
		ch := h.queuedLocked(req.Client)
		select {
		case <-ch: // queued before
		default:
			close(ch)
		}
	case req.Client == "blocker":
		h.once.Do(func() {
			close(h.blocked)
			if !h.hold {
				return
			}
			select {
			case <-h.release:
			case <-time.After(20 * time.Second): // never hang a test run
			}
		})
	case strings.HasPrefix(req.Client, "fail"):
		return fmt.Errorf("claim of %s: %w", req.Client, errHooked)
	case strings.HasPrefix(req.Client, "panic"):
		panic("ledgertest: injected panic in the claim of " + req.Client)
	}
	return nil
}

func (h *hooks) queuedOf(client string) chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.queuedLocked(client)
}

func (h *hooks) queuedLocked(client string) chan struct{} {
	ch, ok := h.queued[client]
	if !ok {
		ch = make(chan struct{})
		h.queued[client] = ch
	}
	return ch
}

// block starts fn, whose claim is the blocker's, and returns once its
// transaction holds its row, with what to wait on for fn to end.
func (h *hooks) block(tb testing.TB, fn func()) (done chan struct{}) {
	tb.Helper()
	done = make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-h.blocked:
	case <-done:
		// Grouping off holds nothing: the claim may have reached its
		// transaction and ended before this select looked, and a select
		// with both ready picks either.
		select {
		case <-h.blocked:
		default:
			tb.Fatal("the blocker's claim ended before its transaction was held")
		}
	}
	return done
}

// arrive starts fn, which makes client's claim, and returns once that
// claim waits in the queue or, when it did not need to wait (grouping
// off), once fn is done: claims made through arrive one after another
// arrive in that order.
func (h *hooks) arrive(client string, fn func()) (done chan struct{}) {
	done = make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-h.queuedOf(client):
	case <-done:
	}
	return done
}

func waitAll(tb testing.TB, chans ...chan struct{}) {
	tb.Helper()
	for _, ch := range chans {
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			tb.Fatal("a claim did not end within 30 s")
		}
	}
}

// claimAs is LinkClaim of l for client, anonymous.
func (e *env) claimAs(ctx context.Context, l *ledger.Link, client string) (ledger.ClaimOutcome, error) {
	return e.l.LinkClaim(ctx, l.TokenHash, ledger.ClaimRequest{Kind: ledger.KindStream, Client: client}, false)
}

// mintAs mints a session on l for client with the idempotency key (none
// when ""); with affinity, keyed by the affinity keys instead.
func (e *env) mintAs(l *ledger.Link, client, key string, affinity ...string) (*ledger.Session, bool, error) {
	return e.l.SessionMint(e.ctx, ledger.MintRequest{
		Claim:     ledger.ClaimRequest{LinkID: l.ID, Client: client},
		SessionID: uuid.Must(uuid.NewV7()).String(), TokenHash: randomHash(nil),
		ByteBudget: 1000, MaxConcurrency: 2, ExpiresAt: e.clock.Now().Add(time.Hour),
		IdempotencyKey: key, Affinity: len(affinity) > 0, AffinityKeys: affinity,
	})
}

// grantsOf returns the clients of l's grants.
func (e *env) grantClients(tb testing.TB, l *ledger.Link) map[string]int {
	tb.Helper()
	p, err := e.l.GrantList(e.ctx, ledger.GrantQuery{LinkID: l.ID, Limit: 100})
	if err != nil {
		tb.Fatal(err)
	}
	out := map[string]int{}
	for _, g := range p.Grants {
		out[g.Client]++
	}
	return out
}

func exerciseGroupClaims(t *testing.T, newLedger NewLedger) {
	t.Run("ClaimsOfOneLinkAreGrantedInArrivalOrderAcrossBatches", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		db := dbOf(t, e.l)
		if db.ClaimBatch > 1 {
			db.ClaimBatch = 3 // eight claims: batches of 3, 3 and 2
		}
		h := installHooks(db)
		other, l := e.MustLink(t, 1), e.MustLink(t, 3)
		blocker := h.block(t, func() { e.claimAs(e.ctx, other, "blocker") }) //nolint:errcheck // checked below
		outs := make([]ledger.ClaimOutcome, 8)
		errs := make([]error, 8)
		var dones []chan struct{}
		for i := range outs {
			client := fmt.Sprintf("arrival-%d", i)
			dones = append(dones, h.arrive(client, func() { outs[i], errs[i] = e.claimAs(e.ctx, l, client) }))
		}
		close(h.release)
		waitAll(t, append(dones, blocker)...)
		for i, o := range outs {
			switch {
			case errs[i] != nil:
				t.Errorf("claim %d: %v", i, errs[i])
			case i < 3 && (o.Grant == nil || o.Grant.Client != fmt.Sprintf("arrival-%d", i) || o.Grant.LinkID != l.ID):
				t.Errorf("claim %d of 8 on 3 downloads = %+v; want its own grant: the first three to arrive are granted", i, o)
			case i >= 3 && (o.Grant != nil || o.Refusal != ledger.ReasonExhausted || o.Link == nil || o.Link.Remaining != 0):
				t.Errorf("claim %d of 8 on 3 downloads = %+v; want refused exhausted, the row spent", i, o)
			}
		}
		e.mustBeSpent(t, l.ID, 3)
		if got := e.grantClients(t, l); got["arrival-0"] != 1 || got["arrival-1"] != 1 || got["arrival-2"] != 1 {
			t.Fatalf("grants by client %v; want arrival-0, -1 and -2", got)
		}
	})

	t.Run("KClaimsOfOneLinkInOneBatchAreOneTransaction", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		db := dbOf(t, e.l)
		grouped := db.ClaimBatch > 1
		var (
			mu    sync.Mutex
			sizes []int
			waits [][]time.Duration
		)
		db.OnClaimBatch = func(b sqlcore.ClaimBatchStats) {
			mu.Lock()
			sizes = append(sizes, b.Size)
			waits = append(waits, b.QueueWaits)
			mu.Unlock()
		}
		h := installHooks(db)
		other, l := e.MustLink(t, 1), e.MustLink(t, 10)
		blocker := h.block(t, func() { e.claimAs(e.ctx, other, "blocker") }) //nolint:errcheck // its own row
		const k = 5
		ctxs := make([]context.Context, k)
		grants := make([]*ledger.Grant, k)
		var dones []chan struct{}
		for i := range k {
			ctxs[i] = ledger.WithWait(e.ctx)
			client := fmt.Sprintf("k-%d", i)
			dones = append(dones, h.arrive(client, func() {
				o, err := e.claimAs(ctxs[i], l, client)
				if err == nil {
					grants[i] = o.Grant
				}
			}))
		}
		close(h.release)
		waitAll(t, append(dones, blocker)...)
		want := 1
		if grouped {
			want = k
		}
		for i, g := range grants {
			if g == nil || g.Client != fmt.Sprintf("k-%d", i) {
				t.Errorf("claim %d: grant %+v; want its own", i, g)
			}
			if n := ledger.WaitOf(ctxs[i]).ClaimBatch(); n != want {
				t.Errorf("claim %d shared its transaction with %d claims (Wait.ClaimBatch), want %d", i, n, want)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if grouped && (len(sizes) != 2 || sizes[1] != k) {
			t.Errorf("claim transactions of sizes %v; want the blocker's, then one of all %d", sizes, k)
		}
		// Each claim's own queue wait, once (gateway_claim_queue_wait_
		// seconds): the blocker found none in flight; each of the k
		// waited behind it.
		for i, w := range waits {
			switch {
			case len(w) != sizes[i]:
				t.Errorf("claim transaction %d of %d claims reported %d queue waits %v; want one per claim", i, sizes[i], len(w), w)
			case grouped && i == 0 && w[0] != 0:
				t.Errorf("the blocker, alone with none in flight, waited %v in the queue; want 0", w[0])
			case grouped && i == 1:
				for j, d := range w {
					if d <= 0 {
						t.Errorf("claim %d of the batch waited %v in the queue; it arrived while the blocker's transaction was in flight", j, d)
					}
				}
			}
		}
		if st := e.mustStatus(t, l.ID); st.Remaining != 10-k || st.Grants[ledger.StatusGranted] != k {
			t.Fatalf("remaining=%d grants=%v, want %d and %d", st.Remaining, st.Grants, 10-k, k)
		}
	})

	t.Run("AClaimsInjectedFailureOrPanicIsItsOwn", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		h := installHooks(dbOf(t, e.l))
		other, a, b, c, d := e.MustLink(t, 1), e.MustLink(t, 3), e.MustLink(t, 2), e.MustLink(t, 2), e.MustLink(t, 1)
		blocker := h.block(t, func() { e.claimAs(e.ctx, other, "blocker") }) //nolint:errcheck // its own row
		order := []struct {
			client string
			link   *ledger.Link
		}{{"ok-1", a}, {"fail-1", b}, {"ok-2", a}, {"panic-1", c}, {"ok-3", d}, {"fail-2", a}}
		outs := make([]ledger.ClaimOutcome, len(order))
		errs := make([]error, len(order))
		var dones []chan struct{}
		for i, x := range order {
			dones = append(dones, h.arrive(x.client, func() { outs[i], errs[i] = e.claimAs(e.ctx, x.link, x.client) }))
		}
		close(h.release)
		waitAll(t, append(dones, blocker)...)
		for i, x := range order {
			o, err := outs[i], errs[i]
			switch {
			case strings.HasPrefix(x.client, "ok"):
				if err != nil || o.Grant == nil || o.Grant.Client != x.client || o.Grant.LinkID != x.link.ID {
					t.Errorf("%s = %+v, %v; want its own grant of link %s", x.client, o, err, x.link.ID)
				}
			case strings.HasPrefix(x.client, "fail"):
				if !errors.Is(err, errHooked) || o.Grant != nil {
					t.Errorf("%s = %+v, %v; want its injected failure and no grant", x.client, o, err)
				}
			default:
				if err == nil || o.Grant != nil {
					t.Errorf("%s = %+v, %v; want an error and no grant", x.client, o, err)
				}
			}
		}
		for _, x := range []struct {
			l       *ledger.Link
			clients []string
		}{{a, []string{"ok-1", "ok-2"}}, {b, nil}, {c, nil}, {d, []string{"ok-3"}}} {
			got := e.grantClients(t, x.l)
			st := e.mustStatus(t, x.l.ID)
			if len(got) != len(x.clients) || st.Remaining != x.l.Allowance-len(x.clients) {
				t.Errorf("link %s: grants by client %v, remaining %d; want exactly %v", x.l.ID, got, st.Remaining, x.clients)
			}
			for _, cl := range x.clients {
				if got[cl] != 1 {
					t.Errorf("link %s: grants by client %v; want one of %s", x.l.ID, got, cl)
				}
			}
		}
	})

	t.Run("AQueuedClaimWhoseDeadlinePassesIsNotClaimed", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		db := dbOf(t, e.l)
		db.Timeout = 2 * time.Second
		h := installHooks(db, true)
		l := e.MustLink(t, 2)
		// The late request spent 1.5 s of its 2 s on earlier calls.
		late := ledger.WithWait(e.ctx)
		_, end := ledger.WaitOf(late).Begin(db.Timeout)
		time.Sleep(1500 * time.Millisecond)
		end()
		var blocked ledger.ClaimOutcome
		var blockedErr error
		blocker := h.block(t, func() { blocked, blockedErr = e.claimAs(e.ctx, l, "blocker") })
		// It waits behind the blocker's transaction (in the queue, or with
		// grouping off for the link's row) past its deadline.
		o, err := e.claimAs(late, l, "late")
		close(h.release)
		waitAll(t, blocker)
		if !errors.Is(err, ledger.ErrUnavailable) || o.Grant != nil {
			t.Fatalf("a claim whose deadline passed while it waited = %+v, %v; want ErrUnavailable and no grant", o, err)
		}
		if blockedErr != nil || blocked.Grant == nil {
			t.Fatalf("the blocker's claim = %+v, %v; want a grant", blocked, blockedErr)
		}
		if got := e.grantClients(t, l); len(got) != 1 || got["blocker"] != 1 {
			t.Fatalf("grants by client %v; want the blocker's alone", got)
		}
		if st := e.mustStatus(t, l.ID); st.Remaining != 1 {
			t.Fatalf("remaining %d; want 1: the late claim took nothing", st.Remaining)
		}
	})

	t.Run("MintsWithKeysInABatchBehaveAsAlone", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		h := installHooks(dbOf(t, e.l))
		session := func(l *ledger.Link) { l.Delivery = ledger.DeliverySession }
		other, l, spent := e.MustLink(t, 1), e.MustLink(t, 3, session), e.MustLink(t, 1, session)
		first, created, err := e.mintAs(spent, "before", "spent-key")
		if err != nil || !created {
			t.Fatalf("mint on a 1-download link = %v, %v", created, err)
		}
		blocker := h.block(t, func() { e.claimAs(e.ctx, other, "blocker") }) //nolint:errcheck // its own row
		type result struct {
			s       *ledger.Session
			created bool
			err     error
		}
		calls := []struct {
			client string
			mint   func(client string) (*ledger.Session, bool, error)
		}{
			{"key-a-1", func(c string) (*ledger.Session, bool, error) { return e.mintAs(l, c, "key-a") }},
			{"key-a-2", func(c string) (*ledger.Session, bool, error) { return e.mintAs(l, c, "key-a") }},
			{"key-b", func(c string) (*ledger.Session, bool, error) { return e.mintAs(l, c, "key-b") }},
			{"spent-key", func(c string) (*ledger.Session, bool, error) { return e.mintAs(spent, c, "spent-key") }},
			{"affinity-1", func(c string) (*ledger.Session, bool, error) { return e.mintAs(l, c, "", "c:one", "u:one") }},
			{"spent-new", func(c string) (*ledger.Session, bool, error) { return e.mintAs(spent, c, "other-key") }},
		}
		res := make([]result, len(calls))
		var dones []chan struct{}
		for i, c := range calls {
			dones = append(dones, h.arrive(c.client, func() {
				s, created, err := c.mint(c.client)
				res[i] = result{s, created, err}
			}))
		}
		close(h.release)
		waitAll(t, append(dones, blocker)...)
		for i, r := range res {
			if calls[i].client != "spent-new" && r.err != nil {
				t.Fatalf("%s: %v", calls[i].client, r.err)
			}
		}
		switch {
		case !res[0].created || res[1].created || res[1].s.ID != res[0].s.ID:
			t.Errorf("two mints with one key: %+v and %+v; want one session, created once", res[0], res[1])
		case !res[2].created || res[2].s.ID == res[0].s.ID:
			t.Errorf("a mint with another key: %+v; want a session of its own", res[2])
		case res[3].created || res[3].s.ID != first.ID:
			t.Errorf("a mint with the key of a spent link's session: %+v; want that session %s, claiming nothing", res[3], first.ID)
		case !res[4].created:
			t.Errorf("an affinity mint: %+v; want a new session", res[4])
		}
		wantReason(t, res[5].err, ledger.ReasonExhausted)
		if got, err := e.l.SessionGetByAffinity(e.ctx, l.ID, "", []string{"u:one"}, 1); err != nil || got.ID != res[4].s.ID {
			t.Errorf("the affinity session by its other key = %+v, %v; want %s", got, err, res[4].s.ID)
		}
		e.mustBeSpent(t, l.ID, 3)
		e.mustBeSpent(t, spent.ID, 1)
	})
}
