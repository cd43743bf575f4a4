package ledgertest

import (
	"encoding/base64"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
)

func exerciseListing(t *testing.T, newLedger NewLedger) {
	t.Run("PagesVisitEveryLinkOnceNewestFirstDespiteConcurrentInserts", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		var want []*ledger.Link
		for i := 0; i < 11; i++ {
			if i%3 == 0 { // groups of links created in the same microsecond
				e.clock.Add(time.Millisecond)
			}
			want = append(want, e.MustLink(t, 1))
		}
		slices.SortFunc(want, newestFirst)

		first, err := e.l.LinkList(e.ctx, ledger.ListQuery{Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		// From now on links keep arriving, all newer than the first page.
		e.clock.Add(time.Millisecond)
		stop := make(chan struct{})
		errs := make(chan error, 3)
		var wg sync.WaitGroup
		for w := 0; w < 3; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, _, err := e.l.LinkCreate(e.ctx, e.newLink()); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		got := ids(first.Links)
		for cursor, pages := first.Next, 1; cursor != ""; pages++ {
			if pages > 10 {
				t.Fatalf("still paging after %d pages: %v", pages, got)
			}
			p, err := e.l.LinkList(e.ctx, ledger.ListQuery{Limit: 3, Cursor: cursor})
			if err != nil {
				t.Fatal(err)
			}
			if len(p.Links) > 3 {
				t.Fatalf("page of %d links, limit 3", len(p.Links))
			}
			got = append(got, ids(p.Links)...)
			cursor = p.Next
		}
		close(stop)
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			t.Fatalf("concurrent LinkCreate: %v", err)
		}
		if wantIDs := linkIDs(want); !slices.Equal(got, wantIDs) {
			t.Fatalf("pages listed\n%v\nwant each link once, newest first (created_at, then id, descending)\n%v", got, wantIDs)
		}
	})
	t.Run("LastFullPageHasNoNextCursor", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		for i := 0; i < 4; i++ {
			e.MustLink(t, 1)
		}
		p, err := e.l.LinkList(e.ctx, ledger.ListQuery{Limit: 4})
		if err != nil || len(p.Links) != 4 || p.Next != "" {
			t.Fatalf("limit 4 of 4 links = %d links, next %q, %v; want 4 and no cursor", len(p.Links), p.Next, err)
		}
		p, err = e.l.LinkList(e.ctx, ledger.ListQuery{})
		if err != nil || len(p.Links) != 4 || p.Next != "" {
			t.Fatalf("default limit = %d links, next %q, %v", len(p.Links), p.Next, err)
		}
		empty := setup(t, newLedger)
		p, err = empty.l.LinkList(empty.ctx, ledger.ListQuery{State: ledger.StateActive})
		if err != nil || len(p.Links) != 0 || p.Next != "" {
			t.Fatalf("empty ledger = %+v, %v", p, err)
		}
	})
	t.Run("EachStateFilterListsExactlyTheLinksInThatState", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		soon := func(l *ledger.Link) { l.ExpiresAt = e.clock.Now().Add(time.Minute) }
		active := e.MustLink(t, 2)
		partly := e.MustLink(t, 2)
		e.mustClaim(t, partly)
		exhausted := e.MustLink(t, 1)
		e.mustClaim(t, exhausted)
		expired := e.MustLink(t, 3, soon)
		expiredExhausted := e.MustLink(t, 1, soon) // expiry wins over exhaustion
		e.mustClaim(t, expiredExhausted)
		revoked := e.MustLink(t, 1)
		revokedExpired := e.MustLink(t, 1, soon) // revocation wins over expiry
		for _, l := range []*ledger.Link{revoked, revokedExpired} {
			if err := e.l.LinkRevoke(e.ctx, l.ID); err != nil {
				t.Fatal(err)
			}
		}
		// Expiry is exact: at expires_at the link is expired.
		e.clock.Set(expired.ExpiresAt)
		want := map[ledger.LinkState][]*ledger.Link{
			ledger.StateActive:    {active, partly},
			ledger.StateExhausted: {exhausted},
			ledger.StateExpired:   {expired, expiredExhausted},
			ledger.StateRevoked:   {revoked, revokedExpired},
		}
		all := e.mustList(t, ledger.ListQuery{})
		if len(all) != 7 {
			t.Fatalf("unfiltered listing has %d links, want 7", len(all))
		}
		for state, links := range want {
			got := e.mustList(t, ledger.ListQuery{State: state})
			slices.SortFunc(links, newestFirst)
			if !slices.Equal(ids(got), linkIDs(links)) {
				t.Errorf("state %s lists %v, want %v", state, ids(got), linkIDs(links))
			}
			for _, st := range got {
				if s := st.State(e.clock.Now()); s != state {
					t.Errorf("link %s listed as %s, but Link.State says %s", st.ID, state, s)
				}
			}
		}
		if _, err := e.l.LinkList(e.ctx, ledger.ListQuery{State: "dormant"}); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("unknown state = %v, want ErrInvalid", err)
		}
	})
	t.Run("AccountObjectAndCreationFiltersCombine", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		mk := func(account, key string) *ledger.Link {
			e.clock.Add(time.Second)
			return e.MustLink(t, 1, func(l *ledger.Link) { l.AccountID, l.Object.Key = account, key })
		}
		a1 := mk("alice", "a.pdf")
		b1 := mk("bob", "a.pdf")
		a2 := mk("alice", "b.pdf")
		n1 := mk("", "a.pdf")
		a3 := mk("alice", "a.pdf")
		long := mk("alice", strings.Repeat("k", 1000)+"1") // shares a long prefix with…
		longer := mk("", strings.Repeat("k", 1000)+"2")    // …this one
		cases := []struct {
			name string
			q    ledger.ListQuery
			want []*ledger.Link
		}{
			{"Account", ledger.ListQuery{AccountID: "alice"}, []*ledger.Link{long, a3, a2, a1}},
			{"UnknownAccount", ledger.ListQuery{AccountID: "carol"}, nil},
			{"Object", ledger.ListQuery{ObjectKey: "a.pdf"}, []*ledger.Link{a3, n1, b1, a1}},
			{"LongObjectKeysDifferingAfterTheIndexedPrefix", ledger.ListQuery{ObjectKey: longer.Object.Key}, []*ledger.Link{longer}},
			{"AccountAndObject", ledger.ListQuery{AccountID: "alice", ObjectKey: "a.pdf"}, []*ledger.Link{a3, a1}},
			{"CreatedAfterIsExclusive", ledger.ListQuery{CreatedAfter: a2.CreatedAt}, []*ledger.Link{longer, long, a3, n1}},
			{"CreatedBeforeIsExclusive", ledger.ListQuery{CreatedBefore: a2.CreatedAt}, []*ledger.Link{b1, a1}},
			{"CreatedBetween", ledger.ListQuery{CreatedAfter: a1.CreatedAt, CreatedBefore: a3.CreatedAt}, []*ledger.Link{n1, a2, b1}},
			{"CreatedBeforeBetweenMicroseconds", ledger.ListQuery{CreatedBefore: b1.CreatedAt.Add(time.Nanosecond)}, []*ledger.Link{b1, a1}},
			{"CreatedAfterBetweenMicroseconds", ledger.ListQuery{CreatedAfter: long.CreatedAt.Add(-time.Nanosecond)}, []*ledger.Link{longer, long}},
			{"BoundsBeyondWhatTheDatabaseHolds", ledger.ListQuery{CreatedAfter: time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
				CreatedBefore: time.Date(20000, 1, 1, 0, 0, 0, 0, time.UTC), AccountID: "bob"}, []*ledger.Link{b1}},
			{"AccountAndState", ledger.ListQuery{AccountID: "alice", State: ledger.StateActive, Limit: 2}, []*ledger.Link{long, a3, a2, a1}},
		}
		for _, c := range cases {
			got := e.mustList(t, c.q)
			if !slices.Equal(ids(got), linkIDs(c.want)) {
				t.Errorf("%s: LinkList(%+v) = %v, want %v", c.name, c.q, ids(got), linkIDs(c.want))
			}
		}
	})
	t.Run("ForgedCursorsAndBadLimitsAreInvalid", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		e.MustLink(t, 1)
		enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
		for _, c := range []string{
			"%%%", "not base64", enc("x"), enc("123"), enc("abc/0192f000-0000-7000-8000-000000000001"),
			enc("1700000000000000/"), enc("999999999999999999/id"), enc("-99999999999999999/id"),
			enc("1700000000000000/" + strings.Repeat("x", 40)), enc("1700000000000000/a\x00b"),
			enc("1700000000000000/\xff\xfe"), enc("1700000000000000/a b"), strings.Repeat("A", 10000),
		} {
			if _, err := e.l.LinkList(e.ctx, ledger.ListQuery{Cursor: c}); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("cursor %q = %v, want ErrInvalid", c, err)
			}
		}
		for _, n := range []int{-1, ledger.MaxListLimit + 1} {
			if _, err := e.l.LinkList(e.ctx, ledger.ListQuery{Limit: n}); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("limit %d = %v, want ErrInvalid", n, err)
			}
		}
	})
	t.Run("ListedCountsEqualThoseOfLink", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		quiet := e.MustLink(t, 1)
		busy := e.MustLink(t, 6)
		for i := 0; i < 3; i++ {
			e.mustClaim(t, busy)
		}
		g, err := e.claim(busy, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := e.l.GrantRefund(e.ctx, g.ID); err != nil {
			t.Fatal(err)
		}
		e.MustSession(t, busy, 1000, 1)
		ended := e.MustSession(t, busy, 1000, 1)
		if err := e.l.SessionRevoke(e.ctx, ended.ID); err != nil {
			t.Fatal(err)
		}
		sessions := e.MustLink(t, 3)
		e.MustSession(t, sessions, 1000, 1)
		e.MustSession(t, sessions, 1000, 1)

		page := e.mustList(t, ledger.ListQuery{})
		if len(page) != 3 {
			t.Fatalf("%d links listed, want 3", len(page))
		}
		for _, got := range page {
			want := e.mustStatus(t, got.ID)
			if !mapsEqual(got.Grants, want.Grants) || got.ActiveSessions != want.ActiveSessions {
				t.Errorf("listed %s with grants %v and %d active sessions; Link says %v and %d",
					got.ID, got.Grants, got.ActiveSessions, want.Grants, want.ActiveSessions)
			}
			if got.Remaining != want.Remaining || got.Allowance != want.Allowance || got.Object != want.Object ||
				!got.CreatedAt.Equal(want.CreatedAt) || !got.ExpiresAt.Equal(want.ExpiresAt) {
				t.Errorf("listed link %+v differs from Link %+v", got.Link, want.Link)
			}
		}
		byID := map[string]ledger.LinkStatus{}
		for _, st := range page {
			byID[st.ID] = st
		}
		if st := byID[busy.ID]; st.Grants[ledger.StatusGranted] != 5 || st.Grants[ledger.StatusRefunded] != 1 || st.ActiveSessions != 1 {
			t.Errorf("busy link: grants %v, %d active sessions; want 5 granted, 1 refunded, 1 active", st.Grants, st.ActiveSessions)
		}
		if st := byID[quiet.ID]; st.Grants[ledger.StatusGranted] != 0 || st.Grants[ledger.StatusRefunded] != 0 || st.ActiveSessions != 0 {
			t.Errorf("quiet link: grants %v, %d active sessions; want zeros", st.Grants, st.ActiveSessions)
		}
		if st := byID[sessions.ID]; st.ActiveSessions != 2 {
			t.Errorf("link with two sessions lists %d", st.ActiveSessions)
		}
		// Sessions that expire stop counting.
		e.clock.Add(2 * time.Hour)
		for _, st := range e.mustList(t, ledger.ListQuery{}) {
			if st.ActiveSessions != 0 {
				t.Errorf("link %s lists %d active sessions after they expired", st.ID, st.ActiveSessions)
			}
		}
	})
	t.Run("AllowanceChangesAreListedNewestFirst", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 1)
		other := e.MustLink(t, 1)
		if got, err := e.l.AllowanceList(e.ctx, l.ID); err != nil || len(got) != 0 {
			t.Fatalf("changes of a link never topped up = %v, %v; want none", got, err)
		}
		var want []ledger.AllowanceChange
		for i, reason := range []string{"ticket 1", "", "ticket 3"} {
			e.clock.Add(time.Second)
			if err := e.l.AllowanceAdd(e.ctx, l.ID, i+1, reason); err != nil {
				t.Fatal(err)
			}
			want = append([]ledger.AllowanceChange{{Add: i + 1, Reason: reason, CreatedAt: e.clock.Now()}}, want...)
		}
		if err := e.l.AllowanceAdd(e.ctx, other.ID, 9, "not this link"); err != nil {
			t.Fatal(err)
		}
		got, err := e.l.AllowanceList(e.ctx, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("AllowanceList = %+v, want %+v", got, want)
		}
		for i := range want {
			if got[i].Add != want[i].Add || got[i].Reason != want[i].Reason || !got[i].CreatedAt.Equal(want[i].CreatedAt) {
				t.Fatalf("AllowanceList = %+v, want %+v", got, want)
			}
		}
		if _, err := e.l.AllowanceList(e.ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("changes of an unknown link = %v, want ErrNotFound", err)
		}
	})
	t.Run("TopUpOfARevokedLinkIsRefused", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 1)
		if err := e.l.AllowanceAdd(e.ctx, l.ID, 1, "before"); err != nil {
			t.Fatal(err)
		}
		if err := e.l.LinkRevoke(e.ctx, l.ID); err != nil {
			t.Fatal(err)
		}
		if err := e.l.AllowanceAdd(e.ctx, l.ID, 5, "after"); !errors.Is(err, ledger.ErrRevoked) {
			t.Fatalf("top-up of a revoked link = %v, want ErrRevoked", err)
		}
		if st := e.mustStatus(t, l.ID); st.Allowance != 2 || st.Remaining != 2 {
			t.Fatalf("refused top-up changed the link: allowance %d, remaining %d; want 2 and 2", st.Allowance, st.Remaining)
		}
		if got, err := e.l.AllowanceList(e.ctx, l.ID); err != nil || len(got) != 1 || got[0].Reason != "before" {
			t.Fatalf("changes = %+v, %v; want only the one before revocation", got, err)
		}
	})
	t.Run("TopUpsRacingARevocationNeverLandAfterIt", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 1)
		var (
			mu    sync.Mutex
			added int
		)
		releaseAll(t, 20, func(i int) error {
			if i == 10 {
				return e.l.LinkRevoke(e.ctx, l.ID)
			}
			err := e.l.AllowanceAdd(e.ctx, l.ID, 1, "race")
			switch {
			case err == nil:
				mu.Lock()
				added++
				mu.Unlock()
			case !errors.Is(err, ledger.ErrRevoked):
				return err
			}
			return nil
		})
		st := e.mustStatus(t, l.ID)
		changes, err := e.l.AllowanceList(e.ctx, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		if st.Allowance != 1+added || len(changes) != added {
			t.Fatalf("%d top-ups succeeded, allowance %d, %d recorded; want allowance %d and %d recorded",
				added, st.Allowance, len(changes), 1+added, added)
		}
		if err := e.l.AllowanceAdd(e.ctx, l.ID, 1, "late"); !errors.Is(err, ledger.ErrRevoked) {
			t.Fatalf("top-up after the race = %v, want ErrRevoked", err)
		}
	})
}

// newLink is a fresh one-download link for LinkCreate, which a goroutine
// other than the test's may call (MustLink may not: it fails the test).
func (e *env) newLink() *ledger.Link {
	id := uuid.Must(uuid.NewV7()).String()
	return &ledger.Link{ID: id, TokenHash: randomHash(nil),
		Object:    ledger.Object{Bucket: "b", Key: "docs/later.pdf", VersionID: "v1", Size: 1},
		Allowance: 1, Remaining: 1, ExpiresAt: e.clock.Now().Add(time.Hour), Delivery: ledger.DeliveryStream}
}

// mustList returns every link q selects, following the cursor.
func (e *env) mustList(tb testing.TB, q ledger.ListQuery) []ledger.LinkStatus {
	tb.Helper()
	var all []ledger.LinkStatus
	for pages := 0; ; pages++ {
		p, err := e.l.LinkList(e.ctx, q)
		if err != nil {
			tb.Fatalf("LinkList(%+v): %v", q, err)
		}
		if pages > 100 {
			tb.Fatalf("LinkList(%+v): still paging after %d pages", q, pages)
		}
		all = append(all, p.Links...)
		if p.Next == "" {
			return all
		}
		q.Cursor = p.Next
	}
}

func (e *env) mustClaim(tb testing.TB, l *ledger.Link) {
	tb.Helper()
	if _, err := e.claim(l, ""); err != nil {
		tb.Fatalf("claim %s: %v", l.ID, err)
	}
}

// newestFirst is the listing's order: created_at, then id, descending.
func newestFirst(a, b *ledger.Link) int {
	if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
		return c
	}
	return strings.Compare(b.ID, a.ID)
}

func ids(links []ledger.LinkStatus) []string {
	out := []string{}
	for _, l := range links {
		out = append(out, l.ID)
	}
	return out
}

func linkIDs(links []*ledger.Link) []string {
	out := []string{}
	for _, l := range links {
		out = append(out, l.ID)
	}
	return out
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
