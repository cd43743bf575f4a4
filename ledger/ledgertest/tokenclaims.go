package ledgertest

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

// claimByToken is LinkClaim of l's token hash for account.
func (e *env) claimByToken(tb testing.TB, hash []byte, account string, confirmed bool) (*ledger.Link, *ledger.Grant, error) {
	tb.Helper()
	o, err := e.outcome(hash, account, confirmed)
	return o.Link, o.Grant, err
}

func (e *env) outcome(hash []byte, account string, confirmed bool) (ledger.ClaimOutcome, error) {
	return e.l.LinkClaim(e.ctx, hash, ledger.ClaimRequest{AccountID: account, Kind: ledger.KindStream, Client: "test"}, confirmed)
}

func exerciseClaimsByToken(t *testing.T, newLedger NewLedger) {
	for _, k := range []int{1, 5} {
		t.Run(fmt.Sprintf("HundredConcurrentClaimsByTokenAndMintsGrantExactlyRemaining/%d", k), func(t *testing.T) {
			t.Parallel()
			e := setup(t, newLedger)
			l := e.MustLink(t, k)
			var byToken, byID atomic.Int64
			releaseAll(t, 100, func(i int) error {
				if i%2 == 0 {
					got, g, err := e.claimByToken(t, l.TokenHash, "", false)
					switch {
					case err != nil:
						return fmt.Errorf("LinkClaim: %w", err)
					case got == nil || got.ID != l.ID:
						return fmt.Errorf("LinkClaim returned link %+v, want %s", got, l.ID)
					case g != nil:
						if g.LinkID != l.ID {
							return fmt.Errorf("grant of link %q, want %s", g.LinkID, l.ID)
						}
						byToken.Add(1)
					}
					return nil
				}
				// A mint claims the link by its id.
				_, _, err := e.mint(l, "", "", 100, 1)
				switch {
				case err == nil:
					byID.Add(1)
				case ledger.ReasonOf(err) != ledger.ReasonExhausted:
					return fmt.Errorf("mint failed other than exhausted: %w", err)
				}
				return nil
			})
			if n := byToken.Load() + byID.Load(); n != int64(k) {
				t.Fatalf("%d claims granted (%d by token, %d by mints), want exactly %d", n, byToken.Load(), byID.Load(), k)
			}
			e.mustBeSpent(t, l.ID, k)
		})
	}
	t.Run("AGrantedClaimReturnsTheRowAfterIt", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 3, func(l *ledger.Link) { l.AccountID = "alice" })
		got, g, err := e.claimByToken(t, l.TokenHash, "alice", false)
		if err != nil || g == nil {
			t.Fatalf("LinkClaim = %v, %v; want a grant", g, err)
		}
		if got.ID != l.ID || got.Remaining != 2 || got.Filename != l.Filename || got.Object != l.Object || got.AccountID != "alice" {
			t.Fatalf("row %+v; want link %s with remaining 2", got, l.ID)
		}
		if d := got.ReadAt.Sub(e.clock.Now()); d < -time.Second || d > time.Second {
			t.Fatalf("ReadAt %v, the database's clock is %v", got.ReadAt, e.clock.Now())
		}
		if g.LinkID != l.ID || g.AccountID != "alice" || g.Kind != ledger.KindStream || g.Status != ledger.StatusGranted {
			t.Fatalf("grant %+v", g)
		}
		st := e.mustStatus(t, l.ID)
		if st.Remaining != 2 || st.Grants[ledger.StatusGranted] != 1 {
			t.Fatalf("remaining=%d grants=%v, want 2 and 1 granted", st.Remaining, st.Grants)
		}
		// The grant is a grant like any other: it can be refunded.
		if err := e.l.GrantRefund(e.ctx, g.ID); err != nil {
			t.Fatal(err)
		}
		if st := e.mustStatus(t, l.ID); st.Remaining != 3 {
			t.Fatalf("remaining=%d after the refund, want 3", st.Remaining)
		}
	})
	t.Run("UnknownTokenIsNotFound", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		if _, _, err := e.claimByToken(t, randomHash(t), "", false); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})
	// Each of these links is returned unclaimed, with nothing spent: a
	// refusal with its reason, judged in the claim's own transaction, or
	// (a session link, an unconfirmed confirm link) no reason, for the
	// caller to mint or show a page.
	for _, c := range []struct {
		name      string
		edit      func(*ledger.Link)
		account   string
		confirmed bool
		before    func(e *env, l *ledger.Link)
		reason    ledger.Reason
	}{
		{name: "SessionLink", edit: func(l *ledger.Link) { l.Delivery = ledger.DeliverySession }},
		{name: "ConfirmLinkUnconfirmed", edit: func(l *ledger.Link) { l.Confirm = true }},
		// A retry is asked before any download is spent (SPEC §1).
		{name: "StreamLinkWithRetries", edit: func(l *ledger.Link) { l.Retries = 2 }},
		{name: "ExhaustedStreamLinkWithRetries", edit: func(l *ledger.Link) { l.Retries, l.Remaining = 1, 0 }},
		{name: "AccountBoundLinkAnonymous", edit: func(l *ledger.Link) { l.AccountID = "alice" }, reason: ledger.ReasonWrongAccount},
		{name: "AccountBoundLinkOtherAccount", edit: func(l *ledger.Link) { l.AccountID = "alice" }, account: "mallory", reason: ledger.ReasonWrongAccount},
		{name: "Revoked", before: func(e *env, l *ledger.Link) {
			if err := e.l.LinkRevoke(e.ctx, l.ID); err != nil {
				panic(err)
			}
		}, reason: ledger.ReasonRevoked},
		{name: "ExpiredAtItsExpiry", before: func(e *env, l *ledger.Link) { e.clock.Set(l.ExpiresAt) }, reason: ledger.ReasonExpired},
		{name: "Exhausted", edit: func(l *ledger.Link) { l.Remaining = 0 }, reason: ledger.ReasonExhausted},
		{name: "ExhaustedConfirmLinkConfirmed", edit: func(l *ledger.Link) { l.Confirm, l.Remaining = true, 0 }, confirmed: true, reason: ledger.ReasonExhausted},
	} {
		t.Run("NotClaimed/"+c.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, newLedger)
			edits := []func(*ledger.Link){}
			if c.edit != nil {
				edits = append(edits, c.edit)
			}
			l := e.MustLink(t, 2, edits...)
			if c.before != nil {
				c.before(e, l)
			}
			before := e.mustStatus(t, l.ID)
			o, err := e.outcome(l.TokenHash, c.account, c.confirmed)
			got := o.Link
			if err != nil || o.Grant != nil || got == nil || got.ID != l.ID || o.Refusal != c.reason {
				t.Fatalf("LinkClaim = %+v, %v; want the row, no grant, refusal %q, no error", o, err, c.reason)
			}
			if got.Remaining != before.Remaining {
				t.Fatalf("row remaining %d, want %d", got.Remaining, before.Remaining)
			}
			if st := e.mustStatus(t, l.ID); st.Remaining != before.Remaining || st.Grants[ledger.StatusGranted] != 0 {
				t.Fatalf("remaining=%d grants=%v; want %d and none", st.Remaining, st.Grants, before.Remaining)
			}
		})
	}
	t.Run("AStreamLinkWithRetriesClaimsOnceTheRetryWasChecked", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 1, func(l *ledger.Link) { l.Retries = 1 })
		checked := ledger.ClaimRequest{Kind: ledger.KindStream, Client: "test", RetriesChecked: true}
		o, err := e.l.LinkClaim(e.ctx, l.TokenHash, checked, false)
		if err != nil || o.Grant == nil || o.Link.Remaining != 0 || o.Link.Retries != 1 {
			t.Fatalf("LinkClaim with the retry checked = %+v, %v; want a grant, remaining 0, the row's retries", o, err)
		}
		o, err = e.l.LinkClaim(e.ctx, l.TokenHash, checked, false)
		if err != nil || o.Grant != nil || o.Refusal != ledger.ReasonExhausted {
			t.Fatalf("second LinkClaim with the retry checked = %+v, %v; want refused, exhausted", o, err)
		}
		e.mustBeSpent(t, l.ID, 1)
	})
	t.Run("ALinkWithoutRetriesClaimsAtOnceWhetherOrNotARetryWasChecked", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 2)
		for _, checked := range []bool{false, true} {
			o, err := e.l.LinkClaim(e.ctx, l.TokenHash, ledger.ClaimRequest{Kind: ledger.KindStream, Client: "test", RetriesChecked: checked}, false)
			if err != nil || o.Grant == nil {
				t.Fatalf("LinkClaim (retries checked %v) of a link without retries = %+v, %v; want a grant", checked, o, err)
			}
		}
		e.mustBeSpent(t, l.ID, 2)
	})
	t.Run("AnInterruptedDownloadIsServedAgainWithoutSpendingAnother", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 1, func(l *ledger.Link) { l.Retries = 1 })
		keys := []string{"u:the-client"}
		req := ledger.ClaimRequest{Kind: ledger.KindStream, Client: "test"}
		// The first GET: nothing claimed before the retry is asked, no
		// retry to serve, then the claim.
		if o, err := e.l.LinkClaim(e.ctx, l.TokenHash, req, false); err != nil || o.Grant != nil || o.Refusal != "" {
			t.Fatalf("LinkClaim before the retry was asked = %+v, %v; want the row unclaimed", o, err)
		}
		if _, err := e.l.GrantRetryBegin(e.ctx, ledger.RetryRequest{LinkID: l.ID, ClientKeys: keys}); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("GrantRetryBegin with no grant = %v, want ErrNotFound", err)
		}
		req.RetriesChecked = true
		o, err := e.l.LinkClaim(e.ctx, l.TokenHash, req, false)
		if err != nil || o.Grant == nil {
			t.Fatalf("LinkClaim with the retry checked = %+v, %v; want a grant", o, err)
		}
		// It ends short.
		if err := e.l.GrantDeliveryRecord(e.ctx, ledger.StreamDelivery{GrantID: o.Grant.ID, Attempt: 1, BytesAcked: 400, Measured: true, ClientKeys: keys}); err != nil {
			t.Fatal(err)
		}
		// The second GET: unclaimed again, and the retry is served under
		// the same grant; nothing more is spent.
		req.RetriesChecked = false
		if o, err := e.l.LinkClaim(e.ctx, l.TokenHash, req, false); err != nil || o.Grant != nil || o.Refusal != "" || o.Link.Remaining != 0 {
			t.Fatalf("LinkClaim of the second GET = %+v, %v; want the spent row unclaimed", o, err)
		}
		g, err := e.l.GrantRetryBegin(e.ctx, ledger.RetryRequest{LinkID: l.ID, ClientKeys: keys})
		if err != nil || g.ID != o.Grant.ID || g.Delivery.Attempts != 2 {
			t.Fatalf("GrantRetryBegin = %+v, %v; want grant %s at attempt 2", g, err, o.Grant.ID)
		}
		e.mustBeSpent(t, l.ID, 1)
	})
	t.Run("ConfirmLinkConfirmedIsClaimed", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 1, func(l *ledger.Link) { l.Confirm = true })
		if _, g, err := e.claimByToken(t, l.TokenHash, "", true); err != nil || g == nil {
			t.Fatalf("LinkClaim(confirmed) = %v, %v; want a grant", g, err)
		}
		if _, g, err := e.claimByToken(t, l.TokenHash, "", true); err != nil || g != nil {
			t.Fatalf("second LinkClaim of a 1-download link = %v, %v; want no grant", g, err)
		}
	})
	t.Run("ClaimedOneMicrosecondBeforeExpiry", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 2)
		e.clock.Set(l.ExpiresAt.Add(-time.Microsecond))
		if _, g, err := e.claimByToken(t, l.TokenHash, "", false); err != nil || g == nil {
			t.Fatalf("LinkClaim 1µs before expiry = %v, %v; want a grant", g, err)
		}
	})
}
