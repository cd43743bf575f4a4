package ledgertest

import (
	"testing"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

// Refusals may be cached, grants never (SPEC §1): a process answers a
// claim of a link it saw unclaimable from what it saw, without a
// statement, for good when the link is revoked, expired or another
// account's, for at most RefusalCache when it is exhausted; a top-up, a
// refund or a revocation through the process is seen at once. The tests
// show "without a statement" by closing the ledger's pool: any statement
// then fails.

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

func exerciseRefusals(t *testing.T, newLedger NewLedger) {
	t.Run("RefusalsOfASpentRevokedExpiredOrOtherAccountsLinkAreAnsweredAgainWithoutAStatement", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		dbOf(t, e.l).RefusalCache = time.Minute // however slow the machine
		spent, revoked := e.MustLink(t, 1), e.MustLink(t, 2)
		expired := e.MustLink(t, 2, func(l *ledger.Link) { l.ExpiresAt = e.clock.Now().Add(time.Minute) })
		alices := e.MustLink(t, 2, func(l *ledger.Link) { l.AccountID = "alice" })
		if _, err := e.claim(spent, ""); err != nil {
			t.Fatal(err)
		}
		if err := e.l.LinkRevoke(e.ctx, revoked.ID); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(time.Minute)
		cases := []struct {
			l       *ledger.Link
			account string
			reason  ledger.Reason
		}{
			{spent, "", ledger.ReasonExhausted},
			{revoked, "", ledger.ReasonRevoked},
			{expired, "", ledger.ReasonExpired},
			{alices, "mallory", ledger.ReasonWrongAccount},
		}
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
