package ledgertest

import (
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
)

// NewOutboxLedger returns a fresh, migrated, empty ledger that writes
// webhook events to its outbox when events is true (GATEWAY_WEBHOOK_URL
// set), and whose decisions and records read the time from clock. The
// ledger implements ledger.Outbox. It registers its own cleanup.
type NewOutboxLedger func(t *testing.T, clock ledger.Clock, events bool) ledger.Ledger

// ExerciseOutbox runs the webhook outbox's sentences (SPEC §6): each
// change writes exactly its event in its own transaction, and deliverers
// take each event once, a link's in order, retried after their backoff,
// given up after the maximum age.
func ExerciseOutbox(t *testing.T, newLedger NewOutboxLedger) {
	open := func(t *testing.T) (*env, ledger.Outbox) {
		c := NewClock()
		l := newLedger(t, c.Now, true)
		o, ok := l.(ledger.Outbox)
		if !ok {
			t.Fatalf("%T does not implement ledger.Outbox", l)
		}
		return &env{l: l, clock: c, ctx: t.Context()}, o
	}
	t.Run("Views", func(t *testing.T) { exerciseEventViews(t, open) })

	t.Run("EachChangeWritesExactlyItsEventsInOrder", func(t *testing.T) {
		t.Parallel()
		e, o := open(t)
		l := e.MustLink(t, 2, func(l *ledger.Link) { l.AccountID = "alice" })
		g1, err := e.claim(l, "alice")
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second refund changes nothing, so says nothing
			if err := e.l.GrantRefund(e.ctx, g1.ID); err != nil {
				t.Fatal(err)
			}
		}
		x := e.MustSessionFor(t, l, "alice")
		g3, err := e.claim(l, "alice")
		if err != nil {
			t.Fatal(err)
		}
		_, err = e.claim(l, "alice")
		wantReason(t, err, ledger.ReasonExhausted)
		_, err = e.claim(l, "mallory")
		wantReason(t, err, ledger.ReasonWrongAccount)
		for range 2 { // revoking again changes nothing
			if err := e.l.LinkRevoke(e.ctx, l.ID); err != nil {
				t.Fatal(err)
			}
		}

		got := drain(t, e, o)
		// The revocation ends the live session, which delivered nothing.
		want := []string{ledger.EventLinkCreated, ledger.EventGrantCreated, ledger.EventGrantRefunded,
			ledger.EventGrantCreated, ledger.EventSessionCreated, ledger.EventGrantCreated,
			ledger.EventLinkExhausted, ledger.EventLinkRevoked, ledger.EventGrantInterrupted}
		if types := eventTypes(got); !slices.Equal(types, want) {
			t.Fatalf("events = %v, want %v", types, want)
		}
		ev := decodeEvents(t, got)
		check := func(i int, what string, ok bool) {
			t.Helper()
			if !ok {
				t.Errorf("event %d (%s): %s; body %s", i, got[i].Type, what, got[i].Body)
			}
		}
		for i, x := range ev {
			check(i, "link_id", x.Data.LinkID == l.ID && got[i].LinkID == l.ID)
			check(i, "timestamp in UTC", x.Timestamp.Location() == time.UTC && !x.Timestamp.IsZero())
			check(i, "account", x.Data.AccountID == "alice")
			check(i, "no token", !strings.Contains(strings.ToLower(string(got[i].Body)), "token"))
		}
		remaining := func(x ledger.Event) int {
			if x.Data.Remaining == nil {
				return -1
			}
			return *x.Data.Remaining
		}
		check(0, "object and counts", ev[0].Data.Object != nil && ev[0].Data.Object.VersionID == "v1" &&
			*ev[0].Data.Downloads == 2 && remaining(ev[0]) == 2)
		check(1, "grant and count", ev[1].Data.GrantID == g1.ID && ev[1].Data.Client == "test" &&
			ev[1].Data.Kind == ledger.KindStream && remaining(ev[1]) == 1)
		check(2, "refunded grant and count", ev[2].Data.GrantID == g1.ID && remaining(ev[2]) == 2)
		check(3, "session grant", ev[3].Data.GrantID == x.GrantID && ev[3].Data.SessionID == x.ID &&
			ev[3].Data.Kind == ledger.KindSession && remaining(ev[3]) == 1)
		check(4, "session", ev[4].Data.SessionID == x.ID && ev[4].Data.ByteBudget == 1000 &&
			ev[4].Data.MaxConcurrency == 2 && ev[4].Data.ExpiresAt.Equal(x.ExpiresAt))
		check(5, "last grant", ev[5].Data.GrantID == g3.ID && remaining(ev[5]) == 0)
		check(6, "exhausted", remaining(ev[6]) == 0 && *ev[6].Data.Downloads == 2)
		check(7, "revoked", ev[7].Timestamp.After(ev[0].Timestamp) || ev[7].Timestamp.Equal(ev[0].Timestamp))
		check(8, "the session's grant interrupted by the revocation", ev[8].Data.GrantID == x.GrantID &&
			ev[8].Data.SessionID == x.ID && ev[8].Data.Reason == ledger.InterruptedRevoked &&
			ev[8].Data.Coverage != nil && *ev[8].Data.Coverage == 0)
		ids := map[string]bool{}
		for _, x := range got {
			ids[x.ID] = true
		}
		if len(ids) != len(got) {
			t.Errorf("%d events carry %d distinct webhook-ids", len(got), len(ids))
		}
	})
	t.Run("AMintRolledBackAfterItsClaimWritesNoEvent", func(t *testing.T) {
		t.Parallel()
		e, o := open(t)
		l := e.MustLink(t, 2)
		x := e.MustSession(t, l, 1000, 1)
		drain(t, e, o)
		// Same token hash: the session INSERT fails after the claim's
		// UPDATE and grant INSERT, and the whole transaction rolls back.
		_, _, err := e.l.SessionMint(e.ctx, ledger.MintRequest{
			Claim:     ledger.ClaimRequest{LinkID: l.ID, Client: "test"},
			SessionID: uuid.Must(uuid.NewV7()).String(), TokenHash: x.TokenHash,
			ByteBudget: 1000, MaxConcurrency: 1, ExpiresAt: e.clock.Now().Add(time.Hour),
		})
		if err == nil {
			t.Fatal("a mint with another session's token hash succeeded")
		}
		if got := drain(t, e, o); len(got) != 0 {
			t.Fatalf("a rolled-back mint wrote %v", eventTypes(got))
		}
		if st := e.mustStatus(t, l.ID); st.Remaining != 1 {
			t.Fatalf("remaining = %d after the rolled-back mint, want 1", st.Remaining)
		}
	})
	t.Run("NothingIsWrittenWhenWebhooksAreOff", func(t *testing.T) {
		t.Parallel()
		c := NewClock()
		l := newLedger(t, c.Now, false)
		e := &env{l: l, clock: c, ctx: t.Context()}
		link := e.MustLink(t, 1)
		if _, err := e.claim(link, ""); err != nil {
			t.Fatal(err)
		}
		if err := e.l.LinkRevoke(e.ctx, link.ID); err != nil {
			t.Fatal(err)
		}
		if got := drain(t, e, l.(ledger.Outbox)); len(got) != 0 {
			t.Fatalf("with webhooks off the outbox holds %v", eventTypes(got))
		}
	})
	t.Run("ConcurrentDeliverersTakeEachEventOnce", func(t *testing.T) {
		t.Parallel()
		e, o := open(t)
		const links = 40
		for range links {
			e.MustLink(t, 1)
		}
		var (
			mu    sync.Mutex
			taken = map[int64]int{}
		)
		releaseAll(t, 4, func(i int) error {
			holder := fmt.Sprintf("deliverer-%d", i)
			for {
				evs, err := o.EventClaim(e.ctx, holder, 3, time.Minute)
				if err != nil || len(evs) == 0 {
					return err
				}
				for _, x := range evs {
					mu.Lock()
					taken[x.Seq]++
					mu.Unlock()
					if err := o.EventMarkDelivered(e.ctx, x.Seq, holder); err != nil {
						return fmt.Errorf("%s delivering seq %d: %w", holder, x.Seq, err)
					}
				}
			}
		})
		for seq, n := range taken {
			if n != 1 {
				t.Errorf("event %d was taken %d times", seq, n)
			}
		}
		if len(taken) != links {
			t.Fatalf("%d events taken, want each of %d once", len(taken), links)
		}
		if left := drain(t, e, o); len(left) != 0 {
			t.Fatalf("%d events left undelivered", len(left))
		}
	})
	t.Run("ALinksEventsAreHandedOutOneAtATimeInOrder", func(t *testing.T) {
		t.Parallel()
		e, o := open(t)
		l := e.MustLink(t, 3)
		other := e.MustLink(t, 1)
		for range 2 {
			if _, err := e.claim(l, ""); err != nil {
				t.Fatal(err)
			}
		}
		first := mustClaimEvents(t, e, o, "a", 10, time.Minute)
		if len(first) != 2 || first[0].LinkID != l.ID || first[0].Type != ledger.EventLinkCreated || first[1].LinkID != other.ID {
			t.Fatalf("first claim = %v, want the head event of each link", describe(first))
		}
		if got := mustClaimEvents(t, e, o, "b", 10, time.Minute); len(got) != 0 {
			t.Fatalf("while the head is leased another deliverer got %v", describe(got))
		}
		if err := o.EventMarkFailed(e.ctx, first[0].Seq, "a", "HTTP 500", 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if err := o.EventMarkDelivered(e.ctx, first[1].Seq, "a"); err != nil {
			t.Fatal(err)
		}
		if got := mustClaimEvents(t, e, o, "b", 10, time.Minute); len(got) != 0 {
			t.Fatalf("while the head waits for its retry a deliverer got %v", describe(got))
		}
		e.clock.Add(10 * time.Second)
		again := mustClaimEvents(t, e, o, "b", 10, time.Minute)
		if len(again) != 1 || again[0].Seq != first[0].Seq || again[0].ID != first[0].ID || again[0].Attempts != 2 {
			t.Fatalf("after the backoff = %v, want the head again (same webhook-id, attempt 2)", describe(again))
		}
		var types []string
		for x := again; len(x) > 0; x = mustClaimEvents(t, e, o, "b", 10, time.Minute) {
			if len(x) != 1 {
				t.Fatalf("one link's events came %d at a time", len(x))
			}
			types = append(types, x[0].Type)
			if err := o.EventMarkDelivered(e.ctx, x[0].Seq, "b"); err != nil {
				t.Fatal(err)
			}
		}
		if want := []string{ledger.EventLinkCreated, ledger.EventGrantCreated, ledger.EventGrantCreated}; !slices.Equal(types, want) {
			t.Fatalf("delivered %v, want %v", types, want)
		}
	})
	t.Run("ABusyLinksBacklogHidesNoOtherLinksEvent", func(t *testing.T) {
		// One link's receiver is far behind: more of its events wait than
		// the deliverers' first look visits. The other links' events,
		// written after that backlog, still go out with its head, and
		// the backlog still goes out in its order.
		t.Parallel()
		e, o := open(t)
		const backlog = 300 // link.created and 299 grant.created
		busy := e.MustLink(t, backlog)
		for range backlog - 1 {
			if _, err := e.claim(busy, ""); err != nil {
				t.Fatal(err)
			}
		}
		quiet := e.MustLink(t, 1)
		first := mustClaimEvents(t, e, o, "a", 10, time.Minute)
		if len(first) != 2 || first[0].LinkID != busy.ID || first[0].Type != ledger.EventLinkCreated ||
			first[1].LinkID != quiet.ID || first[1].Type != ledger.EventLinkCreated {
			t.Fatalf("behind a backlog of %d events the first claim = %v, want the head of each link", backlog, describe(first))
		}
		for _, x := range first {
			if err := o.EventMarkDelivered(e.ctx, x.Seq, "a"); err != nil {
				t.Fatal(err)
			}
		}
		rest := drain(t, e, o)
		if len(rest) != backlog-1 {
			t.Fatalf("%d more events delivered, want the backlog's other %d", len(rest), backlog-1)
		}
		for i, x := range rest {
			if x.LinkID != busy.ID || x.Type != ledger.EventGrantCreated || i > 0 && x.Seq <= rest[i-1].Seq {
				t.Fatalf("event %d of the backlog = %v, want the busy link's grant.created in order", i, describe(rest[i:i+1]))
			}
		}
	})
	t.Run("ALinksOrderIsItsOwnSequenceNotTheOutboxSeq", func(t *testing.T) {
		t.Parallel()
		e, o := open(t)
		l := e.MustLink(t, 3)
		for range 2 {
			if _, err := e.claim(l, ""); err != nil {
				t.Fatal(err)
			}
		}
		// TiDB allocates AUTO_INCREMENT in ranges per server, so a
		// link's later event may get the smaller seq: reverse them.
		db := sqlOf(t, e.l)
		rows, err := db.QueryContext(e.ctx, `SELECT seq, event_id FROM webhook_outbox WHERE link_id = ? ORDER BY seq`, l.ID)
		if err != nil {
			t.Fatal(err)
		}
		var seqs []int64
		var ids []string
		for rows.Next() {
			var seq int64
			var id string
			if err := rows.Scan(&seq, &id); err != nil {
				t.Fatal(err)
			}
			seqs, ids = append(seqs, seq), append(ids, id)
		}
		rows.Close()
		if len(ids) != 3 {
			t.Fatalf("%d events of the link, want 3", len(ids))
		}
		for _, seq := range seqs {
			if _, err := db.ExecContext(e.ctx, `UPDATE webhook_outbox SET seq = ? WHERE seq = ?`, 1_000_000_000-seq, seq); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		for _, x := range drain(t, e, o) {
			got = append(got, x.ID)
		}
		if !slices.Equal(got, ids) {
			t.Fatalf("delivered %v, want the order they were written in, %v", got, ids)
		}
	})
	t.Run("AFailedEventIsDueAgainAfterItsBackoff", func(t *testing.T) {
		t.Parallel()
		e, o := open(t)
		e.MustLink(t, 1)
		x := mustClaimEvents(t, e, o, "a", 1, time.Minute)
		if len(x) != 1 || x[0].Attempts != 1 {
			t.Fatalf("claim = %v, want the event at attempt 1", describe(x))
		}
		if err := o.EventMarkFailed(e.ctx, x[0].Seq, "a", "HTTP 503", 4*time.Second); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(4*time.Second - time.Microsecond)
		if got := mustClaimEvents(t, e, o, "a", 1, time.Minute); len(got) != 0 {
			t.Fatalf("1µs before its retry time the event was handed out: %v", describe(got))
		}
		e.clock.Add(time.Microsecond)
		if got := mustClaimEvents(t, e, o, "a", 1, time.Minute); len(got) != 1 || got[0].Attempts != 2 {
			t.Fatalf("at its retry time = %v, want the event at attempt 2", describe(got))
		}
	})
	t.Run("ALapsedLeaseHandsTheEventToAnotherDeliverer", func(t *testing.T) {
		t.Parallel()
		e, o := open(t)
		e.MustLink(t, 1)
		x := mustClaimEvents(t, e, o, "crashed", 1, 15*time.Second)
		e.clock.Add(15*time.Second - time.Microsecond)
		if got := mustClaimEvents(t, e, o, "b", 1, 15*time.Second); len(got) != 0 {
			t.Fatalf("before the lease lapsed = %v", describe(got))
		}
		e.clock.Add(time.Microsecond)
		got := mustClaimEvents(t, e, o, "b", 1, 15*time.Second)
		if len(got) != 1 || got[0].ID != x[0].ID {
			t.Fatalf("after the lease lapsed = %v, want the same event", describe(got))
		}
		if err := o.EventMarkDelivered(e.ctx, x[0].Seq, "crashed"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("the old holder reporting = %v, want ErrNotFound", err)
		}
		if err := o.EventMarkDelivered(e.ctx, got[0].Seq, "b"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("EventsPastTheMaximumAgeAreGivenUpAndUnblockTheirLink", func(t *testing.T) {
		t.Parallel()
		e, o := open(t)
		const maxAge = 72 * time.Hour
		l := e.MustLink(t, 1)
		t0 := e.clock.Now()
		e.clock.Add(30 * time.Minute)
		if _, err := e.claim(l, ""); err != nil {
			t.Fatal(err)
		}
		head := mustClaimEvents(t, e, o, "a", 1, time.Minute)
		if err := o.EventMarkFailed(e.ctx, head[0].Seq, "a", "HTTP 500", time.Hour); err != nil {
			t.Fatal(err)
		}
		e.clock.Set(t0.Add(maxAge - time.Microsecond))
		if n, err := o.EventExpire(e.ctx, maxAge, 10); err != nil || n != 0 {
			t.Fatalf("before the maximum age EventExpire = %d, %v; want 0", n, err)
		}
		e.clock.Set(t0.Add(maxAge))
		if n, err := o.EventExpire(e.ctx, maxAge, 10); err != nil || n != 1 {
			t.Fatalf("at the maximum age EventExpire = %d, %v; want the head only", n, err)
		}
		next := mustClaimEvents(t, e, o, "a", 10, time.Minute)
		if len(next) != 1 || next[0].Type != ledger.EventGrantCreated {
			t.Fatalf("after the head was given up = %v, want the link's next event", describe(next))
		}
		if err := o.EventMarkFailed(e.ctx, head[0].Seq, "a", "late", 0); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("reporting on a given-up event = %v, want ErrNotFound", err)
		}
	})
	t.Run("AnEventBeingDeliveredIsNotGivenUp", func(t *testing.T) {
		t.Parallel()
		e, o := open(t)
		e.MustLink(t, 1)
		x := mustClaimEvents(t, e, o, "a", 1, time.Hour)
		e.clock.Add(30 * time.Minute)
		if n, err := o.EventExpire(e.ctx, 10*time.Minute, 10); err != nil || n != 0 {
			t.Fatalf("under a live lease EventExpire = %d, %v; want 0", n, err)
		}
		e.clock.Add(30 * time.Minute)
		if n, err := o.EventExpire(e.ctx, 10*time.Minute, 10); err != nil || n != 1 {
			t.Fatalf("after the lease lapsed EventExpire = %d, %v; want 1", n, err)
		}
		if err := o.EventMarkDelivered(e.ctx, x[0].Seq, "a"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("delivering a given-up event = %v, want ErrNotFound", err)
		}
	})
	t.Run("OutboxAgeIsThatOfTheOldestPendingEvent", func(t *testing.T) {
		t.Parallel()
		e, o := open(t)
		if age, err := o.OutboxAge(e.ctx); err != nil || age != 0 {
			t.Fatalf("empty outbox age = %v, %v; want 0", age, err)
		}
		e.MustLink(t, 1)
		e.clock.Add(90 * time.Second)
		e.MustLink(t, 1)
		if age, err := o.OutboxAge(e.ctx); err != nil || age != 90*time.Second {
			t.Fatalf("age = %v, %v; want 1m30s", age, err)
		}
		drain(t, e, o)
		if age, err := o.OutboxAge(e.ctx); err != nil || age != 0 {
			t.Fatalf("age after delivery = %v, %v; want 0", age, err)
		}
	})
	t.Run("PurgeDeletesOnlyFinishedEventsPastKeep", func(t *testing.T) {
		t.Parallel()
		e, o := open(t)
		e.MustLink(t, 1)
		drain(t, e, o)
		e.MustLink(t, 1) // pending
		e.clock.Add(24*time.Hour - time.Microsecond)
		if n, err := o.EventPurge(e.ctx, 24*time.Hour, 10); err != nil || n != 0 {
			t.Fatalf("EventPurge before keep = %d, %v; want 0", n, err)
		}
		e.clock.Add(time.Microsecond)
		if n, err := o.EventPurge(e.ctx, 24*time.Hour, 10); err != nil || n != 1 {
			t.Fatalf("EventPurge = %d, %v; want the delivered event only", n, err)
		}
		if got := drain(t, e, o); len(got) != 1 {
			t.Fatalf("after the purge %d events are due, want the pending one", len(got))
		}
	})
	t.Run("Objects", func(t *testing.T) { exerciseObjectEvents(t, newLedger) })
}

// sqlOf is the database under l, for the few sentences that must change
// a row the way only another engine would.
func sqlOf(tb testing.TB, l ledger.Ledger) *sql.DB {
	tb.Helper()
	x, ok := l.(interface{ SQL() *sql.DB })
	if !ok {
		tb.Fatalf("%T has no SQL()", l)
	}
	return x.SQL()
}

// MustSessionFor mints a session of l (budget 1000, 2 slots) for account.
func (e *env) MustSessionFor(tb testing.TB, l *ledger.Link, account string) *ledger.Session {
	tb.Helper()
	s, created, err := e.mint(l, account, "", 1000, 2)
	if err != nil || !created {
		tb.Fatalf("SessionMint = %v, %v", created, err)
	}
	return s
}

func mustClaimEvents(tb testing.TB, e *env, o ledger.Outbox, holder string, limit int, lease time.Duration) []ledger.OutboxEvent {
	tb.Helper()
	evs, err := o.EventClaim(e.ctx, holder, limit, lease)
	if err != nil {
		tb.Fatalf("EventClaim(%s): %v", holder, err)
	}
	return evs
}

// drain delivers every event that is due, round after round, and returns
// them in the order they were handed out.
func drain(tb testing.TB, e *env, o ledger.Outbox) []ledger.OutboxEvent {
	tb.Helper()
	var all []ledger.OutboxEvent
	for range 1000 {
		evs := mustClaimEvents(tb, e, o, "drain", 100, time.Minute)
		if len(evs) == 0 {
			return all
		}
		for _, x := range evs {
			if err := o.EventMarkDelivered(e.ctx, x.Seq, "drain"); err != nil {
				tb.Fatalf("EventMarkDelivered(%d): %v", x.Seq, err)
			}
		}
		all = append(all, evs...)
	}
	tb.Fatal("the outbox never ran dry")
	return nil
}

func eventTypes(evs []ledger.OutboxEvent) []string {
	out := make([]string, len(evs))
	for i, x := range evs {
		out[i] = x.Type
	}
	return out
}

func describe(evs []ledger.OutboxEvent) string {
	parts := make([]string, len(evs))
	for i, x := range evs {
		parts[i] = fmt.Sprintf("%s(seq %d, link %.8s, attempt %d)", x.Type, x.Seq, x.LinkID, x.Attempts)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func decodeEvents(tb testing.TB, evs []ledger.OutboxEvent) []ledger.Event {
	tb.Helper()
	out := make([]ledger.Event, len(evs))
	for i, x := range evs {
		if err := json.Unmarshal(x.Body, &out[i]); err != nil {
			tb.Fatalf("event %d body %q: %v", i, x.Body, err)
		}
		if out[i].Type != x.Type {
			tb.Fatalf("event %d: body type %q, row type %q", i, out[i].Type, x.Type)
		}
	}
	return out
}
