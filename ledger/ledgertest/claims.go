package ledgertest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

func exerciseClaims(t *testing.T, newLedger NewLedger) {
	for _, k := range []int{1, 5} {
		t.Run(fmt.Sprintf("HundredConcurrentClaimsGrantExactlyRemaining/%d", k), func(t *testing.T) {
			t.Parallel()
			e := setup(t, newLedger)
			l := e.MustLink(t, k)
			var (
				mu      sync.Mutex
				granted []*ledger.Grant
			)
			releaseAll(t, 100, func(int) error {
				g, err := e.claim(l, "")
				switch {
				case err == nil:
					mu.Lock()
					granted = append(granted, g)
					mu.Unlock()
				case ledger.ReasonOf(err) != ledger.ReasonExhausted:
					return fmt.Errorf("claim failed other than exhausted: %w", err)
				}
				return nil
			})
			if len(granted) != k {
				t.Fatalf("%d claims granted, want exactly %d", len(granted), k)
			}
			e.mustBeSpent(t, l.ID, k)
		})
	}
	t.Run("ClaimSucceedsOneMicrosecondBeforeExpiryAndFailsAtIt", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 2)
		e.clock.Set(l.ExpiresAt.Add(-time.Microsecond))
		if _, err := e.claim(l, ""); err != nil {
			t.Fatalf("claim 1µs before expiry: %v", err)
		}
		e.clock.Set(l.ExpiresAt)
		_, err := e.claim(l, "")
		wantReason(t, err, ledger.ReasonExpired)
		if st := e.mustStatus(t, l.ID); st.Remaining != 1 {
			t.Fatalf("remaining = %d after a refused claim, want 1", st.Remaining)
		}
	})
	t.Run("RevokedLinkRefusesClaims", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 3)
		if err := e.l.LinkRevoke(e.ctx, l.ID); err != nil {
			t.Fatal(err)
		}
		_, err := e.claim(l, "")
		wantReason(t, err, ledger.ReasonRevoked)
		if !errors.Is(err, ledger.ErrRefused) {
			t.Fatalf("err = %v, want errors.Is ErrRefused", err)
		}
	})
	t.Run("AccountBoundLinkRefusesOtherAccountsAndAnonymous", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 2, func(l *ledger.Link) { l.AccountID = "alice" })
		_, err := e.claim(l, "mallory")
		wantReason(t, err, ledger.ReasonWrongAccount)
		_, err = e.claim(l, "")
		wantReason(t, err, ledger.ReasonWrongAccount)
		g, err := e.claim(l, "alice")
		if err != nil || g.AccountID != "alice" {
			t.Fatalf("claim by alice = %+v, %v", g, err)
		}
		if st := e.mustStatus(t, l.ID); st.Remaining != 1 || st.Grants[ledger.StatusGranted] != 1 {
			t.Fatalf("remaining=%d grants=%v, want 1 and 1", st.Remaining, st.Grants)
		}
	})
	t.Run("UnboundLinkAcceptsAnyAccount", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 2)
		if _, err := e.claim(l, "bob"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.claim(l, ""); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("ExhaustedLinkRefusesWithReason", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 1)
		if _, err := e.claim(l, ""); err != nil {
			t.Fatal(err)
		}
		_, err := e.claim(l, "")
		wantReason(t, err, ledger.ReasonExhausted)
	})
	t.Run("AMintOfAnUnknownLinkIsRefused", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		_, _, err := e.mint(&ledger.Link{ID: "00000000-0000-0000-0000-000000000000"}, "", "", 100, 1)
		wantReason(t, err, ledger.ReasonUnknown)
	})
	t.Run("RefundRestoresExactlyOneAllowance", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 2)
		g, err := e.claim(l, "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e.claim(l, ""); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ { // refunding again must not add more
			if err := e.l.GrantRefund(e.ctx, g.ID); err != nil {
				t.Fatalf("refund %d: %v", i, err)
			}
		}
		st := e.mustStatus(t, l.ID)
		if st.Remaining != 1 || st.Grants[ledger.StatusRefunded] != 1 || st.Grants[ledger.StatusGranted] != 1 {
			t.Fatalf("after refund remaining=%d grants=%v, want 1, 1 refunded, 1 granted", st.Remaining, st.Grants)
		}
		if err := e.l.GrantRefund(e.ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("refund unknown = %v, want ErrNotFound", err)
		}
	})
	t.Run("EverySuccessfulClaimHasAGrantRowAndNoRefusalHasOne", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 3, func(l *ledger.Link) { l.AccountID = "alice" })
		var ok []string
		for _, acct := range []string{"alice", "bob", "alice", "", "alice", "alice", "alice"} {
			if g, err := e.claim(l, acct); err == nil {
				ok = append(ok, g.ID)
			}
		}
		p, err := e.l.GrantList(e.ctx, ledger.GrantQuery{LinkID: l.ID, Cursor: "", Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(ok) != 3 || len(p.Grants) != 3 {
			t.Fatalf("%d successes, %d grant rows, want 3 and 3", len(ok), len(p.Grants))
		}
		seen := map[string]bool{}
		for _, g := range p.Grants {
			seen[g.ID] = true
			if g.Status != ledger.StatusGranted || g.Kind != ledger.KindStream || g.AccountID != "alice" || g.Client != "test" {
				t.Fatalf("grant %+v", g)
			}
		}
		for _, id := range ok {
			if !seen[id] {
				t.Fatalf("grant %s of a successful claim has no row", id)
			}
		}
	})
}
