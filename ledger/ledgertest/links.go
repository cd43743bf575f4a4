package ledgertest

import (
	"errors"
	"testing"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

func exerciseLinks(t *testing.T, newLedger NewLedger) {
	t.Run("CreatedLinkReadsBackByTokenHashAndID", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 3, func(l *ledger.Link) {
			l.AccountID = "alice"
			l.Delivery = ledger.DeliverySession
			l.Session = ledger.SessionSettings{TTL: 90 * time.Second, ByteBudget: 5 << 20, MaxConcurrency: 2}
		})
		got, err := e.l.LinkGetByTokenHash(e.ctx, l.TokenHash)
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != l.ID || got.Remaining != 3 || got.Allowance != 3 || got.AccountID != "alice" ||
			got.Object != l.Object || !got.ExpiresAt.Equal(l.ExpiresAt) || got.Session != l.Session ||
			got.Delivery != ledger.DeliverySession || got.Filename != "report.pdf" || got.RevokedAt != nil {
			t.Fatalf("LinkGetByTokenHash = %+v, want %+v", got, l)
		}
		st := e.mustStatus(t, l.ID)
		if st.Grants[ledger.StatusGranted] != 0 || st.ActiveSessions != 0 {
			t.Fatalf("fresh link status = %+v", st)
		}
	})
	t.Run("UnknownTokenHashIsNotFound", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		if _, err := e.l.LinkGetByTokenHash(e.ctx, randomHash(t)); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
		if _, err := e.l.LinkGet(e.ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("err = %v, want ErrNotFound", err)
		}
	})
	t.Run("CreateLinkWithSameIdempotencyKeyReturnsTheFirstLink", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		first := e.MustLink(t, 2, func(l *ledger.Link) { l.IdempotencyKey = "k1" })
		again := *first
		again.ID, again.TokenHash = "0192f000-0000-7000-8000-0000000000ff", randomHash(t)
		got, created, err := e.l.LinkCreate(e.ctx, &again)
		if err != nil || created || got.ID != first.ID {
			t.Fatalf("retry = %v, %v, %v; want the first link, not created", got, created, err)
		}
		other := again
		other.Allowance, other.Remaining = 9, 9
		if _, _, err := e.l.LinkCreate(e.ctx, &other); !errors.Is(err, ledger.ErrConflict) {
			t.Fatalf("reuse for another link = %v, want ErrConflict", err)
		}
	})
	t.Run("InvalidLinksAreRefused", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		for _, edit := range []func(*ledger.Link){
			func(l *ledger.Link) { l.Allowance, l.Remaining = 0, 0 },
			func(l *ledger.Link) { l.Delivery = "carrier-pigeon" },
			func(l *ledger.Link) { l.Object.VersionID = "" },
			func(l *ledger.Link) { l.TokenHash = l.TokenHash[:5] },
		} {
			l := &ledger.Link{ID: "0192f000-0000-7000-8000-000000000001", TokenHash: randomHash(t),
				Object:    ledger.Object{Key: "k", VersionID: "v", Size: 1},
				Allowance: 1, Remaining: 1, ExpiresAt: e.clock.Now().Add(time.Hour), Delivery: ledger.DeliveryStream}
			edit(l)
			if _, _, err := e.l.LinkCreate(e.ctx, l); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("LinkCreate(%+v) = %v, want ErrInvalid", l, err)
			}
		}
	})
	t.Run("RevokeIsIdempotentAndKeepsTheFirstTime", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 1)
		if err := e.l.LinkRevoke(e.ctx, l.ID); err != nil {
			t.Fatal(err)
		}
		first := e.mustStatus(t, l.ID).RevokedAt
		e.clock.Add(time.Minute)
		if err := e.l.LinkRevoke(e.ctx, l.ID); err != nil {
			t.Fatal(err)
		}
		second := e.mustStatus(t, l.ID).RevokedAt
		if first == nil || second == nil || !first.Equal(*second) {
			t.Fatalf("revoked_at %v then %v", first, second)
		}
		if err := e.l.LinkRevoke(e.ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("revoke unknown = %v, want ErrNotFound", err)
		}
	})
	t.Run("AddAllowanceRaisesAllowanceAndRemaining", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 1)
		if _, err := e.claim(l, ""); err != nil {
			t.Fatal(err)
		}
		if err := e.l.AllowanceAdd(e.ctx, l.ID, 2, "customer asked"); err != nil {
			t.Fatal(err)
		}
		st := e.mustStatus(t, l.ID)
		if st.Allowance != 3 || st.Remaining != 2 {
			t.Fatalf("after top-up allowance=%d remaining=%d, want 3 and 2", st.Allowance, st.Remaining)
		}
		if err := e.l.AllowanceAdd(e.ctx, l.ID, 0, ""); !errors.Is(err, ledger.ErrInvalid) {
			t.Fatalf("add 0 = %v, want ErrInvalid", err)
		}
		if err := e.l.AllowanceAdd(e.ctx, "00000000-0000-0000-0000-000000000000", 1, ""); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("add to unknown = %v, want ErrNotFound", err)
		}
	})
	t.Run("GrantsPageNewestFirst", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 5)
		var ids []string
		for i := 0; i < 5; i++ {
			e.clock.Add(time.Millisecond)
			g, err := e.claim(l, "")
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, g.ID)
		}
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			p, err := e.l.GrantList(e.ctx, ledger.GrantQuery{LinkID: l.ID, Cursor: cursor, Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, g := range p.Grants {
				got = append(got, g.ID)
			}
			if p.Next == "" {
				if pages != 2 {
					t.Fatalf("%d pages of 2 for 5 grants, want 3", pages+1)
				}
				break
			}
			cursor = p.Next
		}
		for i := range ids {
			if got[i] != ids[len(ids)-1-i] {
				t.Fatalf("grants %v, want newest first %v", got, ids)
			}
		}
		if _, err := e.l.GrantList(e.ctx, ledger.GrantQuery{LinkID: l.ID, Cursor: "%%%", Limit: 2}); !errors.Is(err, ledger.ErrInvalid) {
			t.Fatalf("bad cursor = %v, want ErrInvalid", err)
		}
	})
}
