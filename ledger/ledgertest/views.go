package ledgertest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

// The operator console's reads (ledger.Views): a link's live sessions, its
// webhook events (in exerciseEventViews, which needs the outbox on), and
// the stored versions with their links.

func exerciseViews(t *testing.T, newLedger NewLedger) {
	t.Run("ALinksLiveSessionsComeNewestFirstWithTheSlotsTheyHold", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 5, func(l *ledger.Link) { l.Delivery = ledger.DeliverySession })
		other := e.MustLink(t, 1, func(l *ledger.Link) { l.Delivery = ledger.DeliverySession })
		e.MustSession(t, other, 1000, 2)
		old := e.MustSession(t, l, 1000, 3)
		e.clock.Add(time.Second)
		busy := e.MustSession(t, l, 1000, 3)
		e.clock.Add(time.Second)
		revoked := e.MustSession(t, l, 1000, 1)
		if err := e.l.SessionRevoke(e.ctx, revoked.ID); err != nil {
			t.Fatal(err)
		}
		for _, holder := range []string{"a", "b"} {
			if err := e.l.SlotAcquire(e.ctx, busy.ID, holder, time.Minute); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.l.SlotAcquire(e.ctx, old.ID, "c", time.Second); err != nil {
			t.Fatal(err)
		}
		if err := e.l.SlotRelease(e.ctx, busy.ID, "b"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.l.BudgetDraw(e.ctx, busy.ID, 300); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(2 * time.Second) // old's lease lapsed; busy's holds
		got := e.mustSessions(t, l.ID, 0)
		if len(got) != 2 || got[0].ID != busy.ID || got[1].ID != old.ID {
			t.Fatalf("SessionListByLink = %v, want [busy old] (the revoked one and the other link's left out)", sessionIDs(got))
		}
		if got[0].SlotsInUse != 1 || got[0].BytesDrawn != 300 || got[0].MaxConcurrency != 3 || got[0].ByteBudget != 1000 {
			t.Errorf("busy = slots %d, drawn %d of %d, cap %d; want 1 slot, 300 of 1000, cap 3",
				got[0].SlotsInUse, got[0].BytesDrawn, got[0].ByteBudget, got[0].MaxConcurrency)
		}
		if got[1].SlotsInUse != 0 {
			t.Errorf("old holds %d slots after its lease lapsed, want 0", got[1].SlotsInUse)
		}
		if one := e.mustSessions(t, l.ID, 1); len(one) != 1 || one[0].ID != busy.ID {
			t.Errorf("SessionListByLink(limit 1) = %v, want [busy]", sessionIDs(one))
		}
	})
	t.Run("SessionsOfARevokedOrExpiredLinkAreNotLive", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 2, func(l *ledger.Link) { l.Delivery = ledger.DeliverySession })
		x := e.MustSession(t, l, 1000, 1)
		if got := e.mustSessions(t, l.ID, 0); len(got) != 1 || got[0].ID != x.ID {
			t.Fatalf("SessionListByLink = %v, want [%s]", sessionIDs(got), x.ID)
		}
		e.clock.Add(time.Hour) // the session's own expiry
		if got := e.mustSessions(t, l.ID, 0); len(got) != 0 {
			t.Errorf("after the session expired: %v, want none", sessionIDs(got))
		}
		m := e.MustLink(t, 2, func(l *ledger.Link) { l.Delivery = ledger.DeliverySession })
		e.MustSession(t, m, 1000, 1)
		if err := e.l.LinkRevoke(e.ctx, m.ID); err != nil {
			t.Fatal(err)
		}
		if got := e.mustSessions(t, m.ID, 0); len(got) != 0 {
			t.Errorf("after the link was revoked: %v, want none", sessionIDs(got))
		}
		if got := e.mustSessions(t, "01a226c5-36c5-7cc5-9846-1e57c78d008f", 0); len(got) != 0 {
			t.Errorf("an unknown link: %v, want none", sessionIDs(got))
		}
	})
	t.Run("ListingsRefuseALimitOutOfRange", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 1)
		for _, n := range []int{-1, ledger.MaxListLimit + 1} {
			if _, err := e.l.SessionListByLink(e.ctx, l.ID, n); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("SessionListByLink(limit %d) = %v, want ErrInvalid", n, err)
			}
			if _, err := e.l.EventListByLink(e.ctx, l.ID, n); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("EventListByLink(limit %d) = %v, want ErrInvalid", n, err)
			}
			if _, err := e.l.ObjectList(e.ctx, ledger.ObjectQuery{Limit: n}); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("ObjectList(limit %d) = %v, want ErrInvalid", n, err)
			}
		}
	})
	t.Run("StoredVersionsArePagedNewestFirstWithTheLinksThatPinThem", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		var objs []ledger.Object
		for _, key := range []string{"a.txt", "b.txt", "a.txt", "c.txt", "d.txt"} {
			objs = append(objs, e.mustRecord(t, key))
			e.clock.Add(time.Second)
		}
		// The second a.txt is pinned by an active link, a revoked one and
		// an expired one with a live session; the first by none of them
		// (another version of the same key).
		a2 := objs[2]
		active := e.linkTo(t, a2, 2)
		revoked := e.linkTo(t, a2, 1)
		if err := e.l.LinkRevoke(e.ctx, revoked.ID); err != nil {
			t.Fatal(err)
		}
		expiring := e.linkTo(t, a2, 1, func(l *ledger.Link) {
			l.Delivery, l.ExpiresAt = ledger.DeliverySession, e.clock.Now().Add(time.Minute)
		})
		e.MustSession(t, expiring, 1000, 1) // lives an hour, past its link
		e.clock.Add(2 * time.Minute)

		var pages [][]ledger.ObjectListing
		cursor := ""
		for {
			p, err := e.l.ObjectList(e.ctx, ledger.ObjectQuery{Cursor: cursor, Limit: 2})
			if err != nil {
				t.Fatalf("ObjectList(cursor %q) = %v", cursor, err)
			}
			pages = append(pages, p.Objects)
			if p.Next == "" {
				break
			}
			cursor = p.Next
		}
		var order []string
		for _, p := range pages {
			for _, o := range p {
				order = append(order, o.VersionID)
			}
		}
		want := []string{objs[4].VersionID, objs[3].VersionID, objs[2].VersionID, objs[1].VersionID, objs[0].VersionID}
		if len(pages) != 3 || !slices.Equal(order, want) {
			t.Fatalf("pages of 2 = %d pages in order %v, want 3 pages in order %v", len(pages), order, want)
		}
		got := pages[1][0] // a2
		if got.Key != "a.txt" || got.State != ledger.ObjectStored || got.Size != 1000 || !got.StoredAt.Equal(e.clock.Now().Add(-2*time.Minute-3*time.Second)) {
			t.Errorf("a2 = %+v, want a.txt, stored, 1000 bytes, at its record", got.StoredObject)
		}
		if got.LinkCount != 3 || got.LiveLinks != 2 {
			t.Errorf("a2: %d links, %d live; want 3 and 2 (the active one, the expired one with a live session)", got.LinkCount, got.LiveLinks)
		}
		states := map[string]ledger.ObjectLink{}
		for _, ol := range got.Links {
			states[ol.ID] = ol
		}
		if s := states[active.ID]; s.State != ledger.StateActive || !s.Live() {
			t.Errorf("the active link = %+v, want active and live", s)
		}
		if s := states[revoked.ID]; s.State != ledger.StateRevoked || s.Live() {
			t.Errorf("the revoked link = %+v, want revoked, not live", s)
		}
		if s := states[expiring.ID]; s.State != ledger.StateExpired || s.LiveSessions != 1 || !s.Live() {
			t.Errorf("the expired link = %+v, want expired with 1 live session, live", s)
		}
		if got.Links[0].ID != expiring.ID {
			t.Errorf("a2's links start with %s, want the newest, %s", got.Links[0].ID, expiring.ID)
		}
		if a1 := pages[2][0]; a1.VersionID != objs[0].VersionID || a1.LinkCount != 0 || len(a1.Links) != 0 {
			t.Errorf("a1 = %d links %v, want none (the links pin a2)", a1.LinkCount, a1.Links)
		}
		one, err := e.l.ObjectList(e.ctx, ledger.ObjectQuery{Bucket: a2.Bucket, Key: a2.Key, VersionID: a2.VersionID})
		if err != nil || len(one.Objects) != 1 || one.Objects[0].VersionID != a2.VersionID || one.Objects[0].LinkCount != 3 || one.Next != "" {
			t.Errorf("ObjectList(a2's version) = %+v, %v; want a2 alone with its 3 links", one, err)
		}
		none, err := e.l.ObjectList(e.ctx, ledger.ObjectQuery{Bucket: a2.Bucket, Key: a2.Key, VersionID: "v-none"})
		if err != nil || len(none.Objects) != 0 {
			t.Errorf("ObjectList(a version never stored) = %+v, %v; want none", none, err)
		}
	})
	t.Run("AVersionNamesItsNewestLinksAndCountsThemAll", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		o := e.mustRecord(t, "many.bin")
		var ids []string
		for range ledger.MaxObjectLinks + 2 {
			ids = append(ids, e.linkTo(t, o, 1).ID)
			e.clock.Add(time.Millisecond)
		}
		p, err := e.l.ObjectList(e.ctx, ledger.ObjectQuery{})
		if err != nil || len(p.Objects) != 1 {
			t.Fatalf("ObjectList = %+v, %v", p, err)
		}
		got := p.Objects[0]
		if got.LinkCount != len(ids) || got.LiveLinks != len(ids) || len(got.Links) != ledger.MaxObjectLinks {
			t.Fatalf("%d links counted, %d live, %d named; want %d, %d, %d", got.LinkCount, got.LiveLinks, len(got.Links),
				len(ids), len(ids), ledger.MaxObjectLinks)
		}
		slices.Reverse(ids)
		for i, ol := range got.Links {
			if ol.ID != ids[i] {
				t.Fatalf("named link %d = %s, want %s (newest first)", i, ol.ID, ids[i])
			}
		}
	})
	t.Run("TheListingFiltersByStateAndRefusesForeignCursors", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		kept := e.mustRecord(t, "kept.txt")
		e.clock.Add(time.Second)
		gone := e.mustRecord(t, "gone.txt")
		if _, err := e.l.DeletionBegin(e.ctx, gone.Bucket, gone.Key, gone.VersionID, false); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			state ledger.ObjectState
			want  []string
		}{
			{"", []string{gone.VersionID, kept.VersionID}},
			{ledger.ObjectStored, []string{kept.VersionID}},
			{ledger.ObjectDeleting, []string{gone.VersionID}},
			{ledger.ObjectDeleted, nil},
		} {
			p, err := e.l.ObjectList(e.ctx, ledger.ObjectQuery{State: c.state})
			if err != nil {
				t.Fatalf("ObjectList(state %q) = %v", c.state, err)
			}
			var got []string
			for _, o := range p.Objects {
				got = append(got, o.VersionID)
			}
			if !slices.Equal(got, c.want) || p.Next != "" {
				t.Errorf("ObjectList(state %q) = %v next %q, want %v and no next page", c.state, got, p.Next, c.want)
			}
		}
		if _, err := e.l.ObjectList(e.ctx, ledger.ObjectQuery{State: "gone"}); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("ObjectList(state gone) = %v, want ErrInvalid", err)
		}
		links, err := e.l.LinkList(e.ctx, ledger.ListQuery{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []string{"garbage", "MTIz", links.Next + "x", "MTIzL2FiYw"} {
			if _, err := e.l.ObjectList(e.ctx, ledger.ObjectQuery{Cursor: c}); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("ObjectList(cursor %q) = %v, want ErrInvalid", c, err)
			}
		}
	})
}

// exerciseEventViews runs with the outbox on: a link's events newest
// first, each with where its delivery stands.
func exerciseEventViews(t *testing.T, open func(t *testing.T) (*env, ledger.Outbox)) {
	t.Run("ALinksEventsComeNewestFirstWithTheirDelivery", func(t *testing.T) {
		t.Parallel()
		e, o := open(t)
		l := e.MustLink(t, 1)
		other := e.MustLink(t, 1)
		e.clock.Add(time.Second)
		if _, err := e.claim(l, ""); err != nil { // grant.created, link.exhausted
			t.Fatal(err)
		}
		// Deliver link.created, fail grant.created once; the rest wait.
		evs := mustClaimEvents(t, e, o, "d1", 10, time.Minute)
		var created, granted ledger.OutboxEvent
		for _, ev := range evs {
			switch {
			case ev.LinkID == l.ID && ev.Type == ledger.EventLinkCreated:
				created = ev
			case ev.LinkID == other.ID:
			default:
				t.Fatalf("claimed %s of %s; only each link's first event is due", ev.Type, ev.LinkID)
			}
		}
		if err := o.EventMarkDelivered(e.ctx, created.Seq, "d1"); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(time.Second)
		for _, ev := range mustClaimEvents(t, e, o, "d2", 10, time.Minute) {
			if ev.LinkID == l.ID {
				granted = ev
			}
		}
		if granted.Type != ledger.EventGrantCreated {
			t.Fatalf("second claim gave %q for the link, want grant.created", granted.Type)
		}
		if err := o.EventMarkFailed(e.ctx, granted.Seq, "d2", "HTTP 503", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		got, err := e.l.EventListByLink(e.ctx, l.ID, 0)
		if err != nil {
			t.Fatal(err)
		}
		var types []string
		for _, ev := range got {
			types = append(types, ev.Type)
		}
		want := []string{ledger.EventLinkExhausted, ledger.EventGrantCreated, ledger.EventLinkCreated}
		if !slices.Equal(types, want) {
			t.Fatalf("EventListByLink = %v, want %v", types, want)
		}
		exhausted, failed, delivered := got[0], got[1], got[2]
		if exhausted.Status != ledger.EventPending || exhausted.Attempts != 0 || exhausted.FinishedAt != nil {
			t.Errorf("link.exhausted = %+v, want pending, never tried", exhausted)
		}
		if failed.Status != ledger.EventPending || failed.Attempts != 1 || failed.LastError != "HTTP 503" ||
			!failed.NextAttemptAt.Equal(e.clock.Now().Add(30*time.Second)) || failed.ID != granted.ID {
			t.Errorf("grant.created = %+v, want pending after 1 attempt, HTTP 503, next in 30 s, id %s", failed, granted.ID)
		}
		if delivered.Status != ledger.EventDelivered || delivered.Attempts != 1 || delivered.FinishedAt == nil || delivered.LastError != "" {
			t.Errorf("link.created = %+v, want delivered after 1 attempt", delivered)
		}
		if one, err := e.l.EventListByLink(e.ctx, l.ID, 1); err != nil || len(one) != 1 || one[0].Type != ledger.EventLinkExhausted {
			t.Errorf("EventListByLink(limit 1) = %+v, %v; want link.exhausted", one, err)
		}
	})
}

func (e *env) mustSessions(tb testing.TB, linkID string, limit int) []ledger.SessionUse {
	tb.Helper()
	got, err := e.l.SessionListByLink(e.ctx, linkID, limit)
	if err != nil {
		tb.Fatalf("SessionListByLink(%s) = %v", linkID, err)
	}
	return got
}

func sessionIDs(us []ledger.SessionUse) []string {
	out := make([]string, len(us))
	for i, u := range us {
		out[i] = u.ID
	}
	return out
}
