package ledgertest

import (
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
)

// Refusals may be cached, grants never (SPEC §1): a process answers a
// claim of a link it saw unclaimable from what it saw, without a
// statement, for good when the link is revoked, expired or another
// account's, for at most RefusalCache when it is exhausted; a top-up, a
// refund or a revocation through the process is seen at once. A session
// mint is answered from the same cache, after what decides first: the
// client's affinity session, the mint's idempotency key. The tests show
// "without a statement" by closing the ledger's pool: any statement then
// fails.

// closePool closes the database pool under e's ledger.
func (e *env) closePool(tb testing.TB) {
	tb.Helper()
	if err := dbOf(tb, e.l).SQL().Close(); err != nil {
		tb.Fatal(err)
	}
}

// wantRefused fails unless o is the refusal of l with reason r, its row
// read by the database's clock of now.
func wantRefused(tb testing.TB, o ledger.ClaimOutcome, err error, l *ledger.Link, r ledger.Reason, now time.Time) {
	tb.Helper()
	switch {
	case err != nil || o.Grant != nil || o.Refusal != r:
		tb.Fatalf("LinkClaim = %+v, %v; want refused %q", o, err, r)
	case o.Link == nil || o.Link.ID != l.ID || o.Link.Object != l.Object:
		tb.Fatalf("refusal's row %+v; want link %s", o.Link, l.ID)
	case o.Link.ReadAt.Sub(now) < -time.Second || o.Link.ReadAt.Sub(now) > time.Second:
		tb.Fatalf("refusal's row read at %v; the database's clock is %v", o.Link.ReadAt, now)
	}
}

// mintBy mints a session on l for account with the idempotency key (none
// when ""), or, with affinity keys, as a GET of the link does (SPEC §5).
func (e *env) mintBy(l *ledger.Link, account, key string, affinity ...string) (*ledger.Session, bool, error) {
	return e.l.SessionMint(e.ctx, ledger.MintRequest{
		Claim:     ledger.ClaimRequest{LinkID: l.ID, AccountID: account, Client: "test"},
		SessionID: uuid.Must(uuid.NewV7()).String(), TokenHash: randomHash(nil),
		ByteBudget: 1000, MaxConcurrency: 2, ExpiresAt: e.clock.Now().Add(time.Hour),
		IdempotencyKey: key, Affinity: len(affinity) > 0, AffinityKeys: affinity,
	})
}

// wantMintRefused fails unless a mint was refused with reason r, nothing
// minted.
func wantMintRefused(tb testing.TB, x *ledger.Session, created bool, err error, r ledger.Reason) {
	tb.Helper()
	if x != nil || created || ledger.ReasonOf(err) != r {
		tb.Fatalf("SessionMint = %+v, %v, %v; want refused %q", x, created, err, r)
	}
}

// wantNotFromTheCache fails unless a call made with the pool closed
// failed on the database and was neither refused nor granted: the cache
// did not answer it.
func wantNotFromTheCache(tb testing.TB, what string, x *ledger.Session, created bool, err error) {
	tb.Helper()
	if err == nil || x != nil || created || errors.Is(err, ledger.ErrRefused) {
		tb.Fatalf("%s with the pool closed = %+v, %v, %v; want the closed pool's error", what, x, created, err)
	}
}

// refusalCase is a link and a caller the database refuses, and why.
type refusalCase struct {
	l       *ledger.Link
	account string
	reason  ledger.Reason
}

// unclaimable makes the four links every refusal test asks about, with
// opts: one spent (by spend, which makes its one claim), one revoked, one
// expired (the clock moved past it) and alice's, asked by mallory.
func (e *env) unclaimable(t *testing.T, spend func(*ledger.Link), opts ...func(*ledger.Link)) []refusalCase {
	t.Helper()
	with := func(more ...func(*ledger.Link)) []func(*ledger.Link) {
		return append(append([]func(*ledger.Link){}, opts...), more...)
	}
	spent, revoked := e.MustLink(t, 1, opts...), e.MustLink(t, 2, opts...)
	expired := e.MustLink(t, 2, with(func(l *ledger.Link) { l.ExpiresAt = e.clock.Now().Add(time.Minute) })...)
	alices := e.MustLink(t, 2, with(func(l *ledger.Link) { l.AccountID = "alice" })...)
	spend(spent)
	if err := e.l.LinkRevoke(e.ctx, revoked.ID); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(time.Minute)
	return []refusalCase{
		{spent, "", ledger.ReasonExhausted},
		{revoked, "", ledger.ReasonRevoked},
		{expired, "", ledger.ReasonExpired},
		{alices, "mallory", ledger.ReasonWrongAccount},
	}
}

func exerciseRefusals(t *testing.T, newLedger NewLedger) {
	exerciseMintRefusals(t, newLedger)
	t.Run("RefusalsOfASpentRevokedExpiredOrOtherAccountsLinkAreAnsweredAgainWithoutAStatement", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		dbOf(t, e.l).RefusalCache = time.Minute // however slow the machine
		cases := e.unclaimable(t, func(spent *ledger.Link) {
			if _, err := e.claim(spent, ""); err != nil {
				t.Fatal(err)
			}
		})
		for _, c := range cases {
			o, err := e.outcome(c.l.TokenHash, c.account, false)
			wantRefused(t, o, err, c.l, c.reason, e.clock.Now())
		}
		e.closePool(t)
		e.clock.Add(time.Second)
		for _, c := range cases {
			o, err := e.outcome(c.l.TokenHash, c.account, false)
			wantRefused(t, o, err, c.l, c.reason, e.clock.Now())
		}
		// Another caller of alice's link is not refused by mallory's
		// refusal: it goes to the database, which is gone.
		alices := cases[3].l
		if o, err := e.outcome(alices.TokenHash, "alice", false); err == nil || o.Grant != nil || o.Refusal != "" {
			t.Fatalf("alice's claim with the pool closed = %+v, %v; want the closed pool's error", o, err)
		}
	})
	t.Run("ASpentLinkWithRetriesIsNotRefusedFromTheCacheBeforeTheRetryIsAsked", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		dbOf(t, e.l).RefusalCache = time.Minute
		l := e.MustLink(t, 1, func(l *ledger.Link) { l.Retries = 1 })
		if _, err := e.claim(l, ""); err != nil {
			t.Fatal(err)
		}
		_, err := e.claim(l, "") // refused, with the retry asked: cached
		wantReason(t, err, ledger.ReasonExhausted)
		e.closePool(t)
		// The retry asked: the cache refuses, without a statement.
		o, err := e.l.LinkClaim(e.ctx, l.TokenHash, ledger.ClaimRequest{Kind: ledger.KindStream, Client: "test", RetriesChecked: true}, false)
		wantRefused(t, o, err, l, ledger.ReasonExhausted, e.clock.Now())
		// Not asked yet: the client may have a retry, so the cache does
		// not answer, and the database (gone) does.
		if o, err := e.outcome(l.TokenHash, "", false); err == nil || o.Refusal != "" {
			t.Fatalf("LinkClaim before the retry was asked, pool closed = %+v, %v; want the closed pool's error, no refusal from the cache", o, err)
		}
	})
	t.Run("ALinkWithRetriesThatCanServeNoRetryIsRefusedFromTheCacheBeforeTheRetryIsAsked", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		dbOf(t, e.l).RefusalCache = time.Minute
		retries := func(l *ledger.Link) { l.Retries = 2 }
		revoked, expired := e.MustLink(t, 2, retries), e.MustLink(t, 2, retries, func(l *ledger.Link) { l.ExpiresAt = e.clock.Now().Add(time.Minute) })
		alices := e.MustLink(t, 2, retries, func(l *ledger.Link) { l.AccountID = "alice" })
		if err := e.l.LinkRevoke(e.ctx, revoked.ID); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(time.Minute)
		cases := []struct {
			l       *ledger.Link
			account string
			reason  ledger.Reason
		}{
			{revoked, "", ledger.ReasonRevoked},
			{expired, "", ledger.ReasonExpired},
			{alices, "mallory", ledger.ReasonWrongAccount},
		}
		for _, c := range cases {
			_, err := e.claim(c.l, c.account) // the retry asked: refused and kept
			wantReason(t, err, c.reason)
		}
		e.closePool(t)
		// GrantRetryBegin serves no retry of a revoked, expired or
		// another account's link: the retry not asked yet changes
		// nothing, and the cache answers.
		for _, c := range cases {
			o, err := e.outcome(c.l.TokenHash, c.account, false)
			wantRefused(t, o, err, c.l, c.reason, e.clock.Now())
		}
		// Nor is a retry of a revoked or expired link asked of the
		// database: it has none to serve.
		for _, c := range cases[:2] {
			g, err := e.l.GrantRetryBegin(e.ctx, ledger.RetryRequest{LinkID: c.l.ID, ClientKeys: []string{"c:someone"}})
			if !errors.Is(err, ledger.ErrNotFound) || g != nil {
				t.Errorf("GrantRetryBegin of a %s link with the pool closed = %v, %v; want ErrNotFound from the cache", c.reason, g, err)
			}
		}
	})
	t.Run("AGrantNeverComesFromTheCache", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 3)
		if _, err := e.claim(l, ""); err != nil {
			t.Fatal(err)
		}
		e.closePool(t)
		if o, err := e.outcome(l.TokenHash, "", false); err == nil || o.Grant != nil {
			t.Fatalf("a claim of a live link with the pool closed = %+v, %v; want the closed pool's error", o, err)
		}
	})
	t.Run("ATopUpThroughThisProcessIsSeenAtOnce", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		dbOf(t, e.l).RefusalCache = time.Minute
		l := e.MustLink(t, 1)
		e.claim(l, "") //nolint:errcheck // spends it
		_, err := e.claim(l, "")
		wantReason(t, err, ledger.ReasonExhausted)
		if err := e.l.AllowanceAdd(e.ctx, l.ID, 1, "one more"); err != nil {
			t.Fatal(err)
		}
		if g, err := e.claim(l, ""); err != nil || g == nil {
			t.Fatalf("claim after a top-up = %v, %v; want a grant", g, err)
		}
	})
	t.Run("ARefundThroughThisProcessIsSeenAtOnce", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		dbOf(t, e.l).RefusalCache = time.Minute
		l := e.MustLink(t, 1)
		g, err := e.claim(l, "")
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.claim(l, "")
		wantReason(t, err, ledger.ReasonExhausted)
		if err := e.l.GrantRefund(e.ctx, g.ID); err != nil {
			t.Fatal(err)
		}
		if g, err := e.claim(l, ""); err != nil || g == nil {
			t.Fatalf("claim after a refund = %v, %v; want a grant", g, err)
		}
	})
	t.Run("ARevocationThroughThisProcessIsSeenAtOnce", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		dbOf(t, e.l).RefusalCache = time.Minute
		l := e.MustLink(t, 1)
		e.claim(l, "") //nolint:errcheck // spends it
		_, err := e.claim(l, "")
		wantReason(t, err, ledger.ReasonExhausted)
		if err := e.l.LinkRevoke(e.ctx, l.ID); err != nil {
			t.Fatal(err)
		}
		_, err = e.claim(l, "")
		wantReason(t, err, ledger.ReasonRevoked)
	})
	t.Run("AnExhaustedLinkIsAskedAgainOnceTheRefusalCacheHasPassed", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		db := dbOf(t, e.l)
		db.RefusalCache = time.Minute
		l := e.MustLink(t, 1)
		e.claim(l, "") //nolint:errcheck // spends it
		_, err := e.claim(l, "")
		wantReason(t, err, ledger.ReasonExhausted)
		// A top-up this process did not make (another process's).
		if _, err := db.SQL().ExecContext(e.ctx, `UPDATE links SET allowance = allowance + 1, remaining = remaining + 1 WHERE id = ?`, l.ID); err != nil {
			t.Fatal(err)
		}
		_, err = e.claim(l, "")
		wantReason(t, err, ledger.ReasonExhausted) // still the cache's answer
		db.RefusalCache = 50 * time.Millisecond
		time.Sleep(db.RefusalCache)
		if g, err := e.claim(l, ""); err != nil || g == nil {
			t.Fatalf("claim once the refusal cache passed = %v, %v; want a grant", g, err)
		}
	})
}

// exerciseMintRefusals: the refusal cache answers session mints (SPEC §1,
// §5), keeping every rule that decides before a refusal.
func exerciseMintRefusals(t *testing.T, newLedger NewLedger) {
	session := func(l *ledger.Link) { l.Delivery = ledger.DeliverySession }
	t.Run("RefusedMintsOfASpentRevokedExpiredOrOtherAccountsLinkAreAnsweredAgainWithoutAStatement", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		dbOf(t, e.l).RefusalCache = time.Minute
		cases := e.unclaimable(t, func(spent *ledger.Link) {
			if _, created, err := e.mintBy(spent, "", ""); err != nil || !created {
				t.Fatalf("the one mint = %v, %v", created, err)
			}
		}, session)
		for _, c := range cases {
			x, created, err := e.mintBy(c.l, c.account, "")
			wantMintRefused(t, x, created, err, c.reason)
		}
		e.closePool(t)
		e.clock.Add(time.Second)
		for _, c := range cases {
			x, created, err := e.mintBy(c.l, c.account, "")
			wantMintRefused(t, x, created, err, c.reason)
		}
		// Alice herself is not refused by mallory's refusal: her mint
		// goes to the database, which is gone.
		x, created, err := e.mintBy(cases[3].l /* alice's */, "alice", "")
		wantNotFromTheCache(t, "alice's mint", x, created, err)
	})
	t.Run("TheRowAGETOfASessionLinkReadAnswersItsMintWithoutAStatement", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		dbOf(t, e.l).RefusalCache = time.Minute
		l := e.MustLink(t, 1, session)
		if _, created, err := e.mintBy(l, "", ""); err != nil || !created {
			t.Fatalf("the one mint = %v, %v", created, err)
		}
		// The GET's claim by token does not claim a session link: it
		// returns the row, which says the link is spent.
		o, err := e.outcome(l.TokenHash, "", false)
		if err != nil || o.Grant != nil || o.Refusal != "" || o.Link == nil || o.Link.Remaining != 0 {
			t.Fatalf("LinkClaim of a spent session link = %+v, %v; want its row, unclaimed", o, err)
		}
		e.closePool(t)
		x, created, err := e.mintBy(l, "", "")
		wantMintRefused(t, x, created, err, ledger.ReasonExhausted)
		// And the GET's own claim by token is still not the cache's to
		// answer: a session link mints.
		if o, err := e.outcome(l.TokenHash, "", false); err == nil || o.Refusal != "" {
			t.Fatalf("LinkClaim of a session link with the pool closed = %+v, %v; want the closed pool's error", o, err)
		}
	})
	t.Run("AKeyedMintOfALinkSpentSinceStillGetsItsSession", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		dbOf(t, e.l).RefusalCache = time.Minute
		l := e.MustLink(t, 1, session)
		first, created, err := e.mintBy(l, "", "key-1")
		if err != nil || !created {
			t.Fatalf("the one mint = %v, %v", created, err)
		}
		x, created, err := e.mintBy(l, "", "key-2")
		wantMintRefused(t, x, created, err, ledger.ReasonExhausted) // kept
		// The key decides first: its session, claiming nothing.
		if x, created, err := e.mintBy(l, "", "key-1"); err != nil || created || x == nil || x.ID != first.ID {
			t.Fatalf("a retry with the key of the link's session = %+v, %v, %v; want session %s", x, created, err, first.ID)
		}
		x, created, err = e.mintBy(l, "", "key-3")
		wantMintRefused(t, x, created, err, ledger.ReasonExhausted)
		// The key is read before the cache may answer: with the pool
		// closed the keyed mint fails, refused by nobody.
		e.closePool(t)
		x, created, err = e.mintBy(l, "", "key-1")
		wantNotFromTheCache(t, "a keyed mint", x, created, err)
		x, created, err = e.mintBy(l, "", "")
		wantMintRefused(t, x, created, err, ledger.ReasonExhausted)
	})
	t.Run("AnAffinityMintOfASpentLinkStillGoesToTheClientsSession", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		dbOf(t, e.l).RefusalCache = time.Minute
		l := e.MustLink(t, 1, session)
		mine, created, err := e.mintBy(l, "", "", "c:one", "u:one")
		if err != nil || !created {
			t.Fatalf("the client's mint = %v, %v", created, err)
		}
		x, created, err := e.mintBy(l, "", "", "c:two", "u:two")
		wantMintRefused(t, x, created, err, ledger.ReasonExhausted) // kept
		// Affinity first: the client's usable session, not the refusal.
		for _, keys := range [][]string{{"c:one", "u:one"}, {"u:one"}} {
			if x, created, err := e.mintBy(l, "", "", keys...); err != nil || created || x == nil || x.ID != mine.ID {
				t.Fatalf("an affinity mint by %v of a spent link = %+v, %v, %v; want the client's session %s", keys, x, created, err, mine.ID)
			}
		}
		// Once the client's session is dead, the refusal again.
		if err := e.l.SessionRevoke(e.ctx, mine.ID); err != nil {
			t.Fatal(err)
		}
		x, created, err = e.mintBy(l, "", "", "c:one", "u:one")
		wantMintRefused(t, x, created, err, ledger.ReasonExhausted)
		// The affinity lookup stays: with the pool closed the mint of
		// an exhausted link fails, where a client's session might be.
		e.closePool(t)
		x, created, err = e.mintBy(l, "", "", "c:two", "u:two")
		wantNotFromTheCache(t, "an affinity mint of an exhausted link", x, created, err)
	})
	t.Run("AnAffinityMintOfARevokedLinkIsRefusedWithoutAStatement", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		dbOf(t, e.l).RefusalCache = time.Minute
		l := e.MustLink(t, 2, session)
		if _, created, err := e.mintBy(l, "", "", "c:one"); err != nil || !created {
			t.Fatalf("the client's mint = %v, %v", created, err)
		}
		if err := e.l.LinkRevoke(e.ctx, l.ID); err != nil {
			t.Fatal(err)
		}
		// The client's session died with the link: refused, and kept.
		x, created, err := e.mintBy(l, "", "", "c:one")
		wantMintRefused(t, x, created, err, ledger.ReasonRevoked)
		e.closePool(t)
		// No session of a revoked link serves: no lookup either.
		for _, keys := range [][]string{{"c:one"}, {"c:two"}} {
			x, created, err := e.mintBy(l, "", "", keys...)
			wantMintRefused(t, x, created, err, ledger.ReasonRevoked)
		}
	})
	t.Run("AMintIsNeverGrantedFromTheCache", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		dbOf(t, e.l).RefusalCache = time.Minute
		l := e.MustLink(t, 3, session)
		if _, created, err := e.mintBy(l, "", ""); err != nil || !created {
			t.Fatalf("mint = %v, %v", created, err)
		}
		e.closePool(t)
		x, created, err := e.mintBy(l, "", "")
		wantNotFromTheCache(t, "a mint of a live link", x, created, err)
	})
	t.Run("ATopUpARefundOrARevocationThroughThisProcessIsSeenAtOnceByMints", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		dbOf(t, e.l).RefusalCache = time.Minute
		l := e.MustLink(t, 1, session)
		if _, created, err := e.mintBy(l, "", ""); err != nil || !created {
			t.Fatalf("the one mint = %v, %v", created, err)
		}
		refused := func() {
			t.Helper()
			x, created, err := e.mintBy(l, "", "")
			wantMintRefused(t, x, created, err, ledger.ReasonExhausted)
		}
		refused()
		if err := e.l.AllowanceAdd(e.ctx, l.ID, 1, "one more"); err != nil {
			t.Fatal(err)
		}
		topped, created, err := e.mintBy(l, "", "")
		if err != nil || !created {
			t.Fatalf("a mint after a top-up = %v, %v; want a session", created, err)
		}
		refused()
		if err := e.l.GrantRefund(e.ctx, topped.GrantID); err != nil {
			t.Fatal(err)
		}
		if _, created, err := e.mintBy(l, "", ""); err != nil || !created {
			t.Fatalf("a mint after a refund = %v, %v; want a session", created, err)
		}
		refused()
		if err := e.l.LinkRevoke(e.ctx, l.ID); err != nil {
			t.Fatal(err)
		}
		x, created, err := e.mintBy(l, "", "")
		wantMintRefused(t, x, created, err, ledger.ReasonRevoked)
	})
}
