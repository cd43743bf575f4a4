package ledgertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/sessions"
)

// ExerciseDelivery runs the sentences of delivery evidence (SPEC §1): what
// each grant's client acknowledged, the events it writes exactly once,
// the retries it allows, the listing's filter and counts. newLedger's
// ledgers write webhook events when asked; open's ledgers (two processes
// on one database) must write them.
func ExerciseDelivery(t *testing.T, newLedger NewOutboxLedger, open OpenShared) {
	t.Run("Streams", func(t *testing.T) { exerciseStreamDelivery(t, newLedger) })
	t.Run("Retries", func(t *testing.T) { exerciseRetries(t, newLedger) })
	t.Run("Sessions", func(t *testing.T) { exerciseSessionDelivery(t, newLedger, open) })
	t.Run("Reads", func(t *testing.T) { exerciseDeliveryReads(t, newLedger) })
}

// deliveryEnv is a fresh ledger writing webhook events when events is set.
func deliveryEnv(t *testing.T, newLedger NewOutboxLedger, events bool) *env {
	t.Helper()
	c := NewClock()
	return &env{l: newLedger(t, c.Now, events), clock: c, ctx: t.Context()}
}

// mustGrant returns the grant id of link as the listing shows it.
func (e *env) mustGrant(tb testing.TB, linkID, id string) ledger.Grant {
	tb.Helper()
	for cursor := ""; ; {
		p, err := e.l.GrantList(e.ctx, ledger.GrantQuery{LinkID: linkID, Cursor: cursor, Limit: ledger.MaxListLimit})
		if err != nil {
			tb.Fatalf("GrantList: %v", err)
		}
		for _, g := range p.Grants {
			if g.ID == id {
				return g
			}
		}
		if cursor = p.Next; cursor == "" {
			tb.Fatalf("grant %s not listed", id)
		}
	}
}

// record records the end of attempt of stream grant g with acked bytes.
func (e *env) record(tb testing.TB, g *ledger.Grant, attempt int, acked int64, keys ...string) {
	tb.Helper()
	err := e.l.GrantDeliveryRecord(e.ctx, ledger.StreamDelivery{GrantID: g.ID, Attempt: attempt, BytesAcked: acked,
		Measured: true, ClientKeys: keys})
	if err != nil {
		tb.Fatalf("GrantDeliveryRecord(attempt %d, %d bytes): %v", attempt, acked, err)
	}
}

// mustClaimStream claims a stream download of l.
func (e *env) mustClaimStream(tb testing.TB, l *ledger.Link, account string) *ledger.Grant {
	tb.Helper()
	g, err := e.claim(l, account)
	if err != nil {
		tb.Fatalf("Claim: %v", err)
	}
	return g
}

// outboxEvents reads the events the outbox holds about link, in the
// link's order, straight from its rows: what was written, delivered or not.
func (e *env) outboxEvents(tb testing.TB, linkID string, types ...string) []ledger.Event {
	tb.Helper()
	rows, err := sqlOf(tb, e.l).QueryContext(e.ctx, `SELECT event_type, payload FROM webhook_outbox WHERE link_id = ? ORDER BY link_seq`, linkID)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var out []ledger.Event
	for rows.Next() {
		var typ, body string
		if err := rows.Scan(&typ, &body); err != nil {
			tb.Fatal(err)
		}
		if len(types) > 0 && !slices.Contains(types, typ) {
			continue
		}
		var ev ledger.Event
		if err := json.Unmarshal([]byte(body), &ev); err != nil || ev.Type != typ {
			tb.Fatalf("outbox row %s: %s (%v)", typ, body, err)
		}
		out = append(out, ev)
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return out
}

var deliveryTypes = []string{ledger.EventGrantDelivered, ledger.EventGrantInterrupted}

// wantDeliveryEvents fails unless the delivery events of link are types,
// in order, and returns them.
func (e *env) wantDeliveryEvents(tb testing.TB, linkID string, types ...string) []ledger.Event {
	tb.Helper()
	evs := e.outboxEvents(tb, linkID, deliveryTypes...)
	got := make([]string, len(evs))
	for i, ev := range evs {
		got[i] = ev.Type
	}
	if !slices.Equal(got, types) {
		tb.Fatalf("delivery events of link %s = %v, want %v", linkID, got, types)
	}
	return evs
}

// wantDelivery fails unless d has status, bytes, coverage and attempts.
func wantDelivery(tb testing.TB, what string, d ledger.Delivery, status ledger.DeliveryStatus, bytes int64, coverage float64, attempts int) {
	tb.Helper()
	if d.Status != status || d.BytesAcked != bytes || math.Abs(d.Coverage-coverage) > 1e-9 || d.Attempts != attempts {
		tb.Fatalf("%s: delivery %+v, want %s, %d bytes, coverage %v, %d attempts", what, d, status, bytes, coverage, attempts)
	}
}

// wantEvent fails unless ev is about g with these numbers and reason.
func wantEvent(tb testing.TB, ev ledger.Event, g *ledger.Grant, bytes int64, coverage float64, attempts int, reason string) {
	tb.Helper()
	d := ev.Data
	if d.GrantID != g.ID || d.LinkID != g.LinkID || d.Kind != g.Kind || d.SessionID != g.SessionID ||
		d.BytesAcked == nil || *d.BytesAcked != bytes || d.Coverage == nil || math.Abs(*d.Coverage-coverage) > 1e-9 ||
		d.Attempts == nil || *d.Attempts != attempts || d.Size == nil || *d.Size != 1000 || d.Reason != reason || d.Measured == nil {
		tb.Fatalf("%s = %+v; want grant %s, %d bytes, coverage %v, attempt %d, reason %q", ev.Type, d, g.ID, bytes, coverage, attempts, reason)
	}
}

func exerciseStreamDelivery(t *testing.T, newLedger NewOutboxLedger) {
	t.Run("AStreamGrantDeliversNothingUntilItsResponseEnds", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, true)
		l := e.MustLink(t, 1)
		g := e.mustClaimStream(t, l, "")
		got := e.mustGrant(t, l.ID, g.ID)
		wantDelivery(t, "after the claim", got.Delivery, ledger.DeliveryNone, 0, 0, 1)
		if got.Delivery.Measured || got.Delivery.DeliveredAt != nil || got.Delivery.InterruptedAt != nil {
			t.Fatalf("after the claim: %+v, want nothing recorded", got.Delivery)
		}
		e.wantDeliveryEvents(t, l.ID)
	})
	t.Run("AWholeResponseCompletesTheGrantWithOneDeliveredEvent", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, true)
		l := e.MustLink(t, 1)
		g := e.mustClaimStream(t, l, "")
		for range 2 { // the second record of the attempt changes nothing
			e.record(t, g, 1, 1000)
		}
		got := e.mustGrant(t, l.ID, g.ID)
		wantDelivery(t, "after the whole response", got.Delivery, ledger.DeliveryComplete, 1000, 1, 1)
		if !got.Delivery.Measured || got.Delivery.DeliveredAt == nil || !got.Delivery.DeliveredAt.Equal(e.clock.Now()) ||
			got.Delivery.InterruptedAt != nil {
			t.Fatalf("after the whole response: %+v, want measured, delivered now, not interrupted", got.Delivery)
		}
		evs := e.wantDeliveryEvents(t, l.ID, ledger.EventGrantDelivered)
		wantEvent(t, evs[0], g, 1000, 1, 1, "")
		if evs[0].Data.DeliveredAt == nil || !evs[0].Data.DeliveredAt.Equal(*got.Delivery.DeliveredAt) || !*evs[0].Data.Measured {
			t.Fatalf("grant.delivered = %+v, want delivered_at %v, measured", evs[0].Data, got.Delivery.DeliveredAt)
		}
	})
	t.Run("AResponseEndedShortIsPartialWithOneInterruptedEvent", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, true)
		l := e.MustLink(t, 1)
		g := e.mustClaimStream(t, l, "")
		for range 2 {
			e.record(t, g, 1, 400)
		}
		got := e.mustGrant(t, l.ID, g.ID)
		wantDelivery(t, "after 400 of 1000 bytes", got.Delivery, ledger.DeliveryPartial, 400, 0.4, 1)
		if got.Delivery.DeliveredAt != nil || got.Delivery.InterruptedAt == nil {
			t.Fatalf("after 400 of 1000 bytes: %+v, want interrupted, not delivered", got.Delivery)
		}
		evs := e.wantDeliveryEvents(t, l.ID, ledger.EventGrantInterrupted)
		wantEvent(t, evs[0], g, 400, 0.4, 1, ledger.InterruptedEndedShort)
	})
	t.Run("AResponseNothingOfWhichWasAcknowledgedIsNone", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, true)
		l := e.MustLink(t, 1)
		g := e.mustClaimStream(t, l, "")
		e.record(t, g, 1, 0)
		got := e.mustGrant(t, l.ID, g.ID)
		wantDelivery(t, "after 0 bytes", got.Delivery, ledger.DeliveryNone, 0, 0, 1)
		if !got.Delivery.Measured || got.Delivery.InterruptedAt == nil {
			t.Fatalf("after 0 bytes: %+v, want a measured interruption", got.Delivery)
		}
		e.wantDeliveryEvents(t, l.ID, ledger.EventGrantInterrupted)
	})
	t.Run("WrittenBytesAreMarkedAsNotAcknowledged", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, false)
		l := e.MustLink(t, 1)
		g := e.mustClaimStream(t, l, "")
		err := e.l.GrantDeliveryRecord(e.ctx, ledger.StreamDelivery{GrantID: g.ID, Attempt: 1, BytesAcked: 1000, Measured: false})
		if err != nil {
			t.Fatal(err)
		}
		got := e.mustGrant(t, l.ID, g.ID)
		wantDelivery(t, "after 1000 written bytes", got.Delivery, ledger.DeliveryComplete, 1000, 1, 1)
		if got.Delivery.Measured {
			t.Fatalf("written bytes read as measured: %+v", got.Delivery)
		}
	})
	t.Run("BytesPastTheSizeCountAsTheSize", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, false)
		l := e.MustLink(t, 1)
		g := e.mustClaimStream(t, l, "")
		e.record(t, g, 1, 5000)
		wantDelivery(t, "after 5000 bytes of 1000", e.mustGrant(t, l.ID, g.ID).Delivery, ledger.DeliveryComplete, 1000, 1, 1)
	})
	t.Run("TheVersionsSizeGivenJudgesAsTheOneRead", func(t *testing.T) {
		// The gateway gives the size of the version its claim's link row
		// pins (StreamDelivery.Size), so that the record reads no link
		// row; it judges as the size the ledger reads.
		t.Parallel()
		for _, events := range []bool{false, true} {
			e := deliveryEnv(t, newLedger, events)
			l := e.MustLink(t, 3)
			for _, c := range []struct {
				acked  int64
				status ledger.DeliveryStatus
				bytes  int64
			}{{999, ledger.DeliveryPartial, 999}, {1000, ledger.DeliveryComplete, 1000}, {5000, ledger.DeliveryComplete, 1000}} {
				g := e.mustClaimStream(t, l, "")
				err := e.l.GrantDeliveryRecord(e.ctx, ledger.StreamDelivery{GrantID: g.ID, Attempt: 1, BytesAcked: c.acked, Measured: true, Size: l.Object.Size})
				if err != nil {
					t.Fatal(err)
				}
				wantDelivery(t, fmt.Sprintf("webhooks %v, %d bytes of 1000, the size given", events, c.acked), e.mustGrant(t, l.ID, g.ID).Delivery,
					c.status, c.bytes, float64(c.bytes)/1000, 1)
			}
			if events {
				e.wantDeliveryEvents(t, l.ID, ledger.EventGrantInterrupted, ledger.EventGrantDelivered, ledger.EventGrantDelivered)
			}
		}
	})
	t.Run("WithWebhooksOffNothingIsWritten", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, false)
		l := e.MustLink(t, 2)
		e.record(t, e.mustClaimStream(t, l, ""), 1, 400)
		e.record(t, e.mustClaimStream(t, l, ""), 1, 1000)
		e.wantDeliveryEvents(t, l.ID)
		if st := e.mustStatus(t, l.ID); st.Deliveries[ledger.DeliveryPartial] != 1 || st.Deliveries[ledger.DeliveryComplete] != 1 {
			t.Fatalf("deliveries %v, want one partial and one complete", st.Deliveries)
		}
	})
	t.Run("ARecordNamesAnAttemptOfAStreamGrant", func(t *testing.T) {
		t.Parallel()
		for _, events := range []bool{false, true} {
			e := deliveryEnv(t, newLedger, events)
			l := e.MustLink(t, 2, func(l *ledger.Link) { l.Delivery = ledger.DeliverySession })
			x := e.MustSession(t, l, 1000, 1)
			stream := e.MustLink(t, 2)
			g := e.mustClaimStream(t, stream, "")
			for _, c := range []struct {
				d    ledger.StreamDelivery
				want error
			}{
				{ledger.StreamDelivery{GrantID: "0192f000-0000-7000-8000-000000000001", Attempt: 1}, ledger.ErrNotFound},
				{ledger.StreamDelivery{GrantID: x.GrantID, Attempt: 1, BytesAcked: 10}, ledger.ErrInvalid},
				{ledger.StreamDelivery{GrantID: g.ID, Attempt: 2, BytesAcked: 10}, ledger.ErrInvalid},
				{ledger.StreamDelivery{GrantID: g.ID, Attempt: 0}, ledger.ErrInvalid},
				{ledger.StreamDelivery{GrantID: g.ID, Attempt: 1, BytesAcked: -1}, ledger.ErrInvalid},
				{ledger.StreamDelivery{GrantID: g.ID, Attempt: 1, ClientKeys: []string{"has space"}}, ledger.ErrInvalid},
				{ledger.StreamDelivery{GrantID: g.ID, Attempt: 1, ClientKeys: []string{"a", "b", "c", "d"}}, ledger.ErrInvalid},
				// The size given, as the gateway does, changes none of it.
				{ledger.StreamDelivery{GrantID: "0192f000-0000-7000-8000-000000000001", Attempt: 1, Size: 1000}, ledger.ErrNotFound},
				{ledger.StreamDelivery{GrantID: x.GrantID, Attempt: 1, BytesAcked: 10, Size: 1000}, ledger.ErrInvalid},
				{ledger.StreamDelivery{GrantID: g.ID, Attempt: 2, BytesAcked: 10, Size: 1000}, ledger.ErrInvalid},
				{ledger.StreamDelivery{GrantID: g.ID, Attempt: 1, BytesAcked: 10, Size: -1}, ledger.ErrInvalid},
			} {
				if err := e.l.GrantDeliveryRecord(e.ctx, c.d); !errors.Is(err, c.want) {
					t.Errorf("webhooks %v: GrantDeliveryRecord(%+v) = %v, want %v", events, c.d, err, c.want)
				}
			}
			if got := e.mustGrant(t, stream.ID, g.ID); got.Delivery.Status != ledger.DeliveryNone || got.Delivery.InterruptedAt != nil {
				t.Fatalf("webhooks %v: refused records changed the grant: %+v", events, got.Delivery)
			}
		}
	})
	t.Run("RecordsWrittenTogetherEachKeepTheirOwnOutcome", func(t *testing.T) {
		// With a record window (as the gateway runs), records that wait
		// together go in one transaction: each lands as it would alone,
		// and an unknown grant's or a session's refusal is its own.
		t.Parallel()
		for _, events := range []bool{false, true} {
			e := deliveryEnv(t, newLedger, events)
			dbOf(t, e.l).RecordWindow = 20 * time.Millisecond
			l := e.MustLink(t, 20)
			grants := make([]*ledger.Grant, 20)
			for i := range grants {
				grants[i] = e.mustClaimStream(t, l, "")
			}
			sl := e.MustLink(t, 1, func(l *ledger.Link) { l.Delivery = ledger.DeliverySession })
			x := e.MustSession(t, sl, 1000, 1)
			errs := make([]error, len(grants)+2)
			releaseAll(t, len(errs), func(i int) error {
				d := ledger.StreamDelivery{GrantID: "0192f000-0000-7000-8000-000000000001", Attempt: 1, BytesAcked: 1}
				switch {
				case i < len(grants):
					d = ledger.StreamDelivery{GrantID: grants[i].ID, Attempt: 1, BytesAcked: int64(60 * i), Measured: true}
					if i%2 == 0 {
						d.Size = 1000 // as the gateway gives it; the others' the ledger reads
					}
				case i == len(grants):
					d.GrantID = x.GrantID
				}
				errs[i] = e.l.GrantDeliveryRecord(e.ctx, d)
				return nil
			})
			for i, g := range grants {
				if errs[i] != nil {
					t.Fatalf("webhooks %v: record %d: %v", events, i, errs[i])
				}
				got := e.mustGrant(t, l.ID, g.ID).Delivery
				want := ledger.DeliveryPartial
				switch {
				case i == 0:
					want = ledger.DeliveryNone
				case int64(60*i) >= l.Object.Size:
					want = ledger.DeliveryComplete
				}
				if got.BytesAcked != min(int64(60*i), l.Object.Size) || got.Status != want {
					t.Errorf("webhooks %v: grant %d recorded %+v; want %d bytes, %s", events, i, got, min(60*i, 1000), want)
				}
			}
			if !errors.Is(errs[len(grants)], ledger.ErrInvalid) || !errors.Is(errs[len(grants)+1], ledger.ErrNotFound) {
				t.Errorf("webhooks %v: a session's grant's record = %v, an unknown grant's = %v; want ErrInvalid and ErrNotFound",
					events, errs[len(grants)], errs[len(grants)+1])
			}
		}
	})
	t.Run("RecordsInOneWindowLandAsEachWouldAlone", func(t *testing.T) {
		// The records of a window are written together (one statement on
		// MySQL and its kin): each grant must end as the same record
		// written alone leaves its twin, whatever the record says.
		t.Parallel()
		type record struct {
			acked    int64
			measured bool
			keys     []string
			before   int64 // acknowledged by an earlier record of the attempt, -1: none
		}
		cases := []record{
			{0, true, nil, -1}, {0, false, nil, -1}, {400, true, []string{"c:one"}, -1}, {999, true, nil, -1},
			{1000, true, nil, -1}, {1000, false, []string{"u:two", "c:two"}, -1},
			{1000, true, nil, 300}, {0, true, nil, 1000},
		}
		for _, events := range []bool{false, true} {
			e := deliveryEnv(t, newLedger, events)
			db := dbOf(t, e.l)
			l := e.MustLink(t, 2*len(cases))
			alone, together := make([]*ledger.Grant, len(cases)), make([]*ledger.Grant, len(cases))
			db.RecordWindow = 0
			for i, c := range cases {
				alone[i], together[i] = e.mustClaimStream(t, l, ""), e.mustClaimStream(t, l, "")
				for _, g := range []*ledger.Grant{alone[i], together[i]} {
					if c.before >= 0 {
						e.record(t, g, 1, c.before)
					}
				}
				if err := e.l.GrantDeliveryRecord(e.ctx, ledger.StreamDelivery{GrantID: alone[i].ID, Attempt: 1,
					BytesAcked: c.acked, Measured: c.measured, ClientKeys: c.keys}); err != nil {
					t.Fatalf("webhooks %v: case %d alone: %v", events, i, err)
				}
			}
			db.RecordWindow = 200 * time.Millisecond
			errs := make([]error, len(cases))
			releaseAll(t, len(cases), func(i int) error {
				c := cases[i]
				errs[i] = e.l.GrantDeliveryRecord(e.ctx, ledger.StreamDelivery{GrantID: together[i].ID, Attempt: 1,
					BytesAcked: c.acked, Measured: c.measured, ClientKeys: c.keys, Size: l.Object.Size})
				return nil
			})
			for i := range cases {
				if errs[i] != nil {
					t.Fatalf("webhooks %v: case %d in the window: %v", events, i, errs[i])
				}
				a, b := e.mustGrant(t, l.ID, alone[i].ID).Delivery, e.mustGrant(t, l.ID, together[i].ID).Delivery
				if a.Status != b.Status || a.BytesAcked != b.BytesAcked || a.Coverage != b.Coverage || a.Attempts != b.Attempts ||
					a.Measured != b.Measured || (a.DeliveredAt == nil) != (b.DeliveredAt == nil) || (a.InterruptedAt == nil) != (b.InterruptedAt == nil) {
					t.Errorf("webhooks %v: case %+v: alone %+v, in a window %+v", events, cases[i], a, b)
				}
			}
		}
	})
	t.Run("TwoRecordsOfOneGrantInOneWindowLandOnce", func(t *testing.T) {
		// A grant is updated once by a statement that joins many records
		// to their grants, so a second record of one grant in the window
		// waits for a statement of its own: both are answered, the
		// attempt is recorded once, and the other grants of the window
		// land beside them.
		t.Parallel()
		for _, events := range []bool{false, true} {
			e := deliveryEnv(t, newLedger, events)
			dbOf(t, e.l).RecordWindow = 20 * time.Millisecond
			l := e.MustLink(t, 3)
			g, other := e.mustClaimStream(t, l, ""), e.mustClaimStream(t, l, "")
			errs := make([]error, 3)
			releaseAll(t, len(errs), func(i int) error {
				d := ledger.StreamDelivery{GrantID: g.ID, Attempt: 1, BytesAcked: 400, Measured: true}
				if i == 2 {
					d = ledger.StreamDelivery{GrantID: other.ID, Attempt: 1, BytesAcked: 1000, Measured: true}
				}
				errs[i] = e.l.GrantDeliveryRecord(e.ctx, d)
				return nil
			})
			for i, err := range errs {
				if err != nil {
					t.Fatalf("webhooks %v: record %d: %v", events, i, err)
				}
			}
			wantDelivery(t, "the grant recorded twice", e.mustGrant(t, l.ID, g.ID).Delivery, ledger.DeliveryPartial, 400, 0.4, 1)
			wantDelivery(t, "the other grant", e.mustGrant(t, l.ID, other.ID).Delivery, ledger.DeliveryComplete, 1000, 1, 1)
		}
	})
	t.Run("ARefundedGrantRecordsNothing", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, true)
		l := e.MustLink(t, 1)
		g := e.mustClaimStream(t, l, "")
		if err := e.l.GrantRefund(e.ctx, g.ID); err != nil {
			t.Fatal(err)
		}
		e.record(t, g, 1, 0)
		if got := e.mustGrant(t, l.ID, g.ID); got.Delivery.InterruptedAt != nil || got.Delivery.Measured {
			t.Fatalf("a refunded grant recorded %+v", got.Delivery)
		}
		e.wantDeliveryEvents(t, l.ID)
	})
}

// retryLink is a stream link with n downloads and retries retries.
func (e *env) retryLink(tb testing.TB, n, retries int, edit ...func(*ledger.Link)) *ledger.Link {
	tb.Helper()
	return e.MustLink(tb, n, append([]func(*ledger.Link){func(l *ledger.Link) { l.Retries = retries }}, edit...)...)
}

// retry asks to download l again as the client named by keys.
func (e *env) retry(l *ledger.Link, account string, keys ...string) (*ledger.Grant, error) {
	return e.l.GrantRetryBegin(e.ctx, ledger.RetryRequest{LinkID: l.ID, AccountID: account, ClientKeys: keys})
}

func wantNoRetry(tb testing.TB, what string, g *ledger.Grant, err error) {
	tb.Helper()
	if !errors.Is(err, ledger.ErrNotFound) {
		tb.Fatalf("%s: GrantRetryBegin = %+v, %v; want ErrNotFound", what, g, err)
	}
}

// wantRetryInFlight checks a retry was refused because grant's retry is
// in flight, its lease ending within lease.
func wantRetryInFlight(tb testing.TB, what string, g *ledger.Grant, err error, grant string, lease time.Duration) {
	tb.Helper()
	var busy *ledger.RetryInFlightError
	if !errors.As(err, &busy) || !errors.Is(err, ledger.ErrRetryInFlight) || errors.Is(err, ledger.ErrNotFound) {
		tb.Fatalf("%s: GrantRetryBegin = %+v, %v; want ErrRetryInFlight", what, g, err)
	}
	if busy.GrantID != grant || busy.Left <= 0 || busy.Left > lease {
		tb.Fatalf("%s: %+v, want grant %s with its lease ending within %v", what, busy, grant, lease)
	}
}

func exerciseRetries(t *testing.T, newLedger NewOutboxLedger) {
	const cookie, addr = "c:cookie-a", "u:client-a"
	t.Run("TheSameClientDownloadsAnInterruptedGrantAgainWithoutAClaim", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, true)
		l := e.retryLink(t, 1, 1)
		g := e.mustClaimStream(t, l, "")
		e.record(t, g, 1, 400, cookie, addr)
		// The client comes back without its cookie (another tool): its
		// address key was recorded too.
		again, err := e.retry(l, "", addr)
		if err != nil || again.ID != g.ID {
			t.Fatalf("GrantRetryBegin = %+v, %v; want grant %s", again, err, g.ID)
		}
		wantDelivery(t, "the retry's grant", again.Delivery, ledger.DeliveryPartial, 400, 0.4, 2)
		st := e.mustStatus(t, l.ID)
		if st.Remaining != 0 || st.Grants[ledger.StatusGranted] != 1 {
			t.Fatalf("after the retry: remaining %d, grants %v; want the claim's only", st.Remaining, st.Grants)
		}
		e.record(t, again, 2, 1000)
		got := e.mustGrant(t, l.ID, g.ID)
		wantDelivery(t, "after the retry's whole response", got.Delivery, ledger.DeliveryComplete, 1000, 1, 2)
		evs := e.wantDeliveryEvents(t, l.ID, ledger.EventGrantInterrupted, ledger.EventGrantDelivered)
		wantEvent(t, evs[0], g, 400, 0.4, 1, ledger.InterruptedEndedShort)
		wantEvent(t, evs[1], g, 1000, 1, 2, "")
		if st := e.mustStatus(t, l.ID); st.Remaining != 0 || st.Grants[ledger.StatusGranted] != 1 {
			t.Fatalf("after the retry's response: %+v", st)
		}
	})
	t.Run("AnotherClientIsRefused", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, false)
		l := e.retryLink(t, 2, 3)
		e.record(t, e.mustClaimStream(t, l, ""), 1, 400, cookie, addr)
		for _, keys := range [][]string{{"u:client-b"}, {"c:cookie-b"}, {"u:client-"}, {"client-a"}, {"c:cookie-a-2"}} {
			g, err := e.retry(l, "", keys...)
			wantNoRetry(t, "another client "+keys[0], g, err)
		}
		g, err := e.retry(l, "alice")
		wantNoRetry(t, "a verified account the grant is not", g, err)
		if _, err := e.retry(l, ""); !errors.Is(err, ledger.ErrInvalid) {
			t.Fatalf("a retry naming no client = %v, want ErrInvalid", err)
		}
		if _, err := e.retry(l, "", "bad key"); !errors.Is(err, ledger.ErrInvalid) {
			t.Fatalf("a retry with a bad key = %v, want ErrInvalid", err)
		}
		if _, err := e.retry(l, "", cookie); err != nil {
			t.Fatalf("the client itself, by its cookie: %v", err)
		}
	})
	t.Run("AnAccountRetriesItsOwnGrant", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, false)
		l := e.retryLink(t, 2, 1, func(l *ledger.Link) { l.AccountID = "alice" })
		e.record(t, e.mustClaimStream(t, l, "alice"), 1, 400)
		g, err := e.retry(l, "bob")
		wantNoRetry(t, "another account", g, err)
		if g, err := e.retry(l, "alice"); err != nil || g.Delivery.Attempts != 2 || g.AccountID != "alice" {
			t.Fatalf("alice's retry = %+v, %v", g, err)
		}
	})
	t.Run("ARetryCountSpentIsRefused", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, false)
		none := e.retryLink(t, 1, 0)
		e.record(t, e.mustClaimStream(t, none, ""), 1, 400, addr)
		g, err := e.retry(none, "", addr)
		wantNoRetry(t, "a link without retries", g, err)

		l := e.retryLink(t, 1, 2)
		first := e.mustClaimStream(t, l, "")
		e.record(t, first, 1, 100, addr)
		for attempt := 2; attempt <= 3; attempt++ {
			g, err := e.retry(l, "", addr)
			if err != nil || g.Delivery.Attempts != attempt {
				t.Fatalf("retry %d = %+v, %v", attempt-1, g, err)
			}
			e.record(t, g, attempt, int64(100*attempt))
		}
		g, err = e.retry(l, "", addr)
		wantNoRetry(t, "a third retry of a link with two", g, err)
		wantDelivery(t, "after three attempts", e.mustGrant(t, l.ID, first.ID).Delivery, ledger.DeliveryPartial, 300, 0.3, 3)
	})
	t.Run("ACompleteGrantIsRefused", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, false)
		l := e.retryLink(t, 1, 5)
		e.record(t, e.mustClaimStream(t, l, ""), 1, 1000, addr)
		g, err := e.retry(l, "", addr)
		wantNoRetry(t, "a complete grant", g, err)
	})
	t.Run("ARevokedOrExpiredLinkIsRefused", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, false)
		revoked := e.retryLink(t, 1, 5)
		e.record(t, e.mustClaimStream(t, revoked, ""), 1, 10, addr)
		if err := e.l.LinkRevoke(e.ctx, revoked.ID); err != nil {
			t.Fatal(err)
		}
		g, err := e.retry(revoked, "", addr)
		wantNoRetry(t, "a revoked link", g, err)

		expiring := e.retryLink(t, 1, 5)
		e.record(t, e.mustClaimStream(t, expiring, ""), 1, 10, addr)
		e.clock.Set(expiring.ExpiresAt.Add(-time.Microsecond))
		if _, err := e.retry(expiring, "", addr); err != nil {
			t.Fatalf("1µs before expiry: %v", err)
		}
		e.clock.Add(ledger.DefaultRetryLease) // the attempt's lease lapsed, and the link expired
		g, err = e.retry(expiring, "", addr)
		wantNoRetry(t, "an expired link", g, err)

		// A retry in flight on a link revoked since: the link is dead
		// (a claim's 404), not a download under way.
		busy := e.retryLink(t, 1, 5)
		e.record(t, e.mustClaimStream(t, busy, ""), 1, 10, addr)
		if _, err := e.retry(busy, "", addr); err != nil {
			t.Fatal(err)
		}
		if err := e.l.LinkRevoke(e.ctx, busy.ID); err != nil {
			t.Fatal(err)
		}
		g, err = e.retry(busy, "", addr)
		wantNoRetry(t, "a retry in flight on a revoked link", g, err)
	})
	t.Run("ADownloadStillStreamingIsNotRetried", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, false)
		l := e.retryLink(t, 1, 5)
		first := e.mustClaimStream(t, l, "")
		e.record(t, first, 1, 10, addr)
		// A refunded grant of the client, and the client's first
		// download still streaming (nothing recorded): neither counts.
		l2 := e.retryLink(t, 2, 5)
		refunded := e.mustClaimStream(t, l2, "")
		e.record(t, refunded, 1, 0, addr)
		if err := e.l.GrantRefund(e.ctx, refunded.ID); err != nil {
			t.Fatal(err)
		}
		e.mustClaimStream(t, l2, "")
		g, err := e.retry(l2, "", addr)
		wantNoRetry(t, "a refunded grant and one still streaming", g, err)
		// A retry's attempt in flight: no second one until its lease
		// lapses, however often it is renewed meanwhile.
		second, err := e.retry(l, "", addr)
		if err != nil {
			t.Fatal(err)
		}
		g, err = e.retry(l, "", addr)
		wantRetryInFlight(t, "while the retry streams", g, err, first.ID, ledger.DefaultRetryLease)
		e.clock.Add(ledger.DefaultRetryLease - time.Second)
		if err := e.l.GrantRetryRenew(e.ctx, second.ID, 2, ledger.DefaultRetryLease); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(ledger.DefaultRetryLease - time.Microsecond)
		g, err = e.retry(l, "", addr)
		wantRetryInFlight(t, "1µs before the renewed lease lapses", g, err, first.ID, time.Microsecond)
		e.clock.Add(time.Microsecond)
		third, err := e.retry(l, "", addr)
		if err != nil || third.Delivery.Attempts != 3 {
			t.Fatalf("after the lease lapsed = %+v, %v; want attempt 3", third, err)
		}
		if err := e.l.GrantRetryRenew(e.ctx, second.ID, 2, time.Minute); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("renewing the lapsed attempt = %v, want ErrNotFound", err)
		}
		// The lapsed attempt's end still counts as evidence; the one in
		// flight keeps its lease.
		e.record(t, second, 2, 600)
		g, err = e.retry(l, "", addr)
		wantRetryInFlight(t, "while attempt 3 streams", g, err, first.ID, ledger.DefaultRetryLease)
		if _, err := e.retry(l, "", "u:client-b"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("another client while attempt 3 streams = %v, want ErrNotFound", err)
		}
		e.record(t, third, 3, 1000)
		wantDelivery(t, "after attempts 2 and 3", e.mustGrant(t, l.ID, first.ID).Delivery, ledger.DeliveryComplete, 1000, 1, 3)
		if err := e.l.GrantRetryRenew(e.ctx, third.ID, 3, time.Minute); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("renewing a recorded attempt = %v, want ErrNotFound", err)
		}
	})
	t.Run("OfTwoConcurrentRetriesExactlyOneWins", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, false)
		const rounds, racers = 20, 2
		for round := range rounds {
			// Retries to spare: the attempts seen and the attempt in
			// flight decide, not the count.
			l := e.retryLink(t, 1, ledger.MaxRetries)
			g := e.mustClaimStream(t, l, "")
			e.record(t, g, 1, 500, cookie, addr)
			var (
				mu   sync.Mutex
				won  []*ledger.Grant
				lost int
			)
			releaseAll(t, racers, func(i int) error {
				keys := [][]string{{cookie, addr}, {addr}}[i%2]
				got, err := e.retry(l, "", keys...)
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					won = append(won, got)
				case errors.Is(err, ledger.ErrRetryInFlight):
					// Refused as the grant's retry in flight, not sent
					// on to claim another download.
					lost++
				default:
					return err
				}
				return nil
			})
			if len(won) != 1 || lost != racers-1 || won[0].ID != g.ID || won[0].Delivery.Attempts != 2 {
				for _, w := range won {
					t.Logf("round %d: won grant %s, attempt %d", round, w.ID, w.Delivery.Attempts)
				}
				t.Fatalf("round %d: %d won, %d refused; want exactly one, attempt 2 of grant %s", round, len(won), lost, g.ID)
			}
			if st := e.mustStatus(t, l.ID); st.Remaining != 0 || st.Grants[ledger.StatusGranted] != 1 {
				t.Fatalf("round %d: %+v, want the claim's grant only", round, st)
			}
		}
	})
}

// mustRecordSession reports ranges of session id acknowledged, first-last
// pairs as in Range headers, and returns unsent bytes.
func mustRecordSession(tb testing.TB, e *env, l ledger.Ledger, id string, ret int64, pairs ...int64) {
	tb.Helper()
	var c sessions.Coverage
	for i := 0; i+1 < len(pairs); i += 2 {
		c.Add(sessions.Range{Start: pairs[i], Length: pairs[i+1] - pairs[i] + 1})
	}
	if err := l.SessionDeliveryRecord(e.ctx, ledger.SessionDelivery{SessionID: id, Acked: c, Return: ret, Measured: true}); err != nil {
		tb.Fatalf("SessionDeliveryRecord(%v): %v", pairs, err)
	}
}

func exerciseSessionDelivery(t *testing.T, newLedger NewOutboxLedger, open OpenShared) {
	sessionLink := func(l *ledger.Link) { l.Delivery = ledger.DeliverySession }
	t.Run("CoverageMergedByTwoProcessesCompletesTheGrantOnce", func(t *testing.T) {
		t.Parallel()
		ls := open(t, time.Now, time.Now)
		e := &env{l: ls[0], clock: NewClock(), ctx: t.Context()}
		l := mustCreateOn(t, ls[0], func(l *ledger.Link) { l.Delivery = ledger.DeliverySession; l.Allowance, l.Remaining = 1, 1 })
		x, _, err := ls[0].SessionMint(e.ctx, ledger.MintRequest{
			Claim:     ledger.ClaimRequest{LinkID: l.ID, Client: "test"},
			SessionID: uuid.Must(uuid.NewV7()).String(), TokenHash: randomHash(t), ByteBudget: 2000, MaxConcurrency: 4,
			ExpiresAt: time.Now().Add(time.Hour),
		})
		if err != nil {
			t.Fatal(err)
		}
		// Twenty 50-byte pieces, ten reported by each process, all at
		// once; each report gives back 10 bytes of 20 drawn.
		if got, err := ls[0].BudgetDraw(e.ctx, x.ID, 400); err != nil || got != 400 {
			t.Fatalf("BudgetDraw = %d, %v", got, err)
		}
		releaseAll(t, 20, func(i int) error {
			var c sessions.Coverage
			c.Add(sessions.Range{Start: int64(50 * i), Length: 50})
			return ls[i%2].SessionDeliveryRecord(e.ctx, ledger.SessionDelivery{SessionID: x.ID, Acked: c, Return: 10, Measured: true})
		})
		for i, p := range ls {
			pe := &env{l: p, clock: e.clock, ctx: e.ctx}
			got := pe.mustGrant(t, l.ID, x.GrantID)
			wantDelivery(t, "read by process "+string(rune('1'+i)), got.Delivery, ledger.DeliveryComplete, 1000, 1, 1)
			if !got.Delivery.Measured || got.Delivery.DeliveredAt == nil {
				t.Fatalf("process %d reads %+v", i+1, got.Delivery)
			}
		}
		if s, err := ls[1].SessionGet(e.ctx, x.ID); err != nil || s.BytesDrawn != 200 {
			t.Fatalf("after 20 returns of 10 bytes: %+v, %v; want 200 drawn", s, err)
		}
		evs := e.wantDeliveryEvents(t, l.ID, ledger.EventGrantDelivered)
		g := e.mustGrant(t, l.ID, x.GrantID)
		wantEvent(t, evs[0], &g, 1000, 1, 1, "")
		// The session ends complete: nothing interrupted.
		if err := ls[1].SessionRevoke(e.ctx, x.ID); err != nil {
			t.Fatal(err)
		}
		e.wantDeliveryEvents(t, l.ID, ledger.EventGrantDelivered)
	})
	t.Run("ASessionIsPartialUntilItsCoverageIsWhole", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, true)
		l := e.MustLink(t, 1, sessionLink)
		x := e.MustSession(t, l, 2000, 2)
		wantDelivery(t, "a new session", e.mustGrant(t, l.ID, x.GrantID).Delivery, ledger.DeliveryNone, 0, 0, 1)
		mustRecordSession(t, e, e.l, x.ID, 0, 0, 299, 600, 899)
		mustRecordSession(t, e, e.l, x.ID, 0, 250, 349)
		got := e.mustGrant(t, l.ID, x.GrantID)
		wantDelivery(t, "two reports", got.Delivery, ledger.DeliveryPartial, 650, 0.65, 1)
		if !got.Delivery.Measured || got.Delivery.DeliveredAt != nil {
			t.Fatalf("two reports: %+v", got.Delivery)
		}
		if st := e.mustStatus(t, l.ID); st.Deliveries[ledger.DeliveryPartial] != 1 || st.Deliveries[ledger.DeliveryNone] != 0 {
			t.Fatalf("deliveries %v, want one partial", st.Deliveries)
		}
		// Written, not acknowledged: marked.
		var c sessions.Coverage
		c.Add(sessions.Range{Start: 900, Length: 10})
		if err := e.l.SessionDeliveryRecord(e.ctx, ledger.SessionDelivery{SessionID: x.ID, Acked: c}); err != nil {
			t.Fatal(err)
		}
		got = e.mustGrant(t, l.ID, x.GrantID)
		wantDelivery(t, "a written range", got.Delivery, ledger.DeliveryPartial, 660, 0.66, 1)
		if got.Delivery.Measured {
			t.Fatalf("a written range left the coverage measured: %+v", got.Delivery)
		}
		e.wantDeliveryEvents(t, l.ID)
	})
	t.Run("ASessionExpiredAt60PercentIsInterruptedOnce", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, true)
		l := e.MustLink(t, 1, sessionLink, func(l *ledger.Link) { l.ExpiresAt = e.clock.Now().Add(24 * time.Hour) })
		x := e.MustSession(t, l, 2000, 2)
		mustRecordSession(t, e, e.l, x.ID, 0, 0, 599)
		e.clock.Set(x.ExpiresAt)
		for range 2 {
			if _, err := e.l.SessionSweep(e.ctx, 10); err != nil {
				t.Fatal(err)
			}
		}
		evs := e.wantDeliveryEvents(t, l.ID, ledger.EventGrantInterrupted)
		g := e.mustGrant(t, l.ID, x.GrantID)
		wantEvent(t, evs[0], &g, 600, 0.6, 1, ledger.InterruptedExpired)
		if g.Delivery.InterruptedAt == nil || g.Delivery.Status != ledger.DeliveryPartial {
			t.Fatalf("the expired session's grant: %+v", g.Delivery)
		}
		// Revoking the ended session, or its link, interrupts nothing more.
		if err := e.l.SessionRevoke(e.ctx, x.ID); err != nil {
			t.Fatal(err)
		}
		if err := e.l.LinkRevoke(e.ctx, l.ID); err != nil {
			t.Fatal(err)
		}
		// Evidence a process reports after the end still counts: the
		// grant completes, and says so once.
		mustRecordSession(t, e, e.l, x.ID, 0, 600, 999)
		mustRecordSession(t, e, e.l, x.ID, 0, 0, 999)
		wantDelivery(t, "late evidence", e.mustGrant(t, l.ID, x.GrantID).Delivery, ledger.DeliveryComplete, 1000, 1, 1)
		e.wantDeliveryEvents(t, l.ID, ledger.EventGrantInterrupted, ledger.EventGrantDelivered)
	})
	t.Run("ARevokedSessionIsInterruptedOnce", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, true)
		l := e.MustLink(t, 3, sessionLink)
		x := e.MustSession(t, l, 2000, 2)
		done := e.MustSession(t, l, 2000, 2)
		unused := e.MustSession(t, l, 2000, 2)
		mustRecordSession(t, e, e.l, x.ID, 0, 0, 99)
		mustRecordSession(t, e, e.l, done.ID, 0, 0, 999)
		for range 2 {
			if err := e.l.SessionRevoke(e.ctx, x.ID); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.l.LinkRevoke(e.ctx, l.ID); err != nil {
			t.Fatal(err)
		}
		if res, err := e.l.SessionSweep(e.ctx, 10); err != nil || res.SessionsEnded != 3 {
			t.Fatalf("Sweep = %+v, %v; want the three revoked sessions ended", res, err)
		}
		evs := e.wantDeliveryEvents(t, l.ID, ledger.EventGrantDelivered, ledger.EventGrantInterrupted, ledger.EventGrantInterrupted)
		gx, gu := e.mustGrant(t, l.ID, x.GrantID), e.mustGrant(t, l.ID, unused.GrantID)
		wantEvent(t, evs[1], &gx, 100, 0.1, 1, ledger.InterruptedRevoked)
		wantEvent(t, evs[2], &gu, 0, 0, 1, ledger.InterruptedRevoked)
		if *evs[2].Data.Measured {
			t.Fatalf("an unused session's interruption reads measured: %+v", evs[2].Data)
		}
	})
	t.Run("ASpentSessionEndsOnlyWhenNothingCanComeBack", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, true)
		l := e.MustLink(t, 1, sessionLink)
		x := e.MustSession(t, l, 1000, 2)
		sweep := func(want int) {
			t.Helper()
			if res, err := e.l.SessionSweep(e.ctx, 10); err != nil || res.SessionsEnded != want {
				t.Fatalf("Sweep = %+v, %v; want %d ended", res, err, want)
			}
		}
		if err := e.l.SlotAcquire(e.ctx, x.ID, "streaming", time.Minute); err != nil {
			t.Fatal(err)
		}
		if got, err := e.l.BudgetDraw(e.ctx, x.ID, 1000); err != nil || got != 1000 {
			t.Fatalf("BudgetDraw = %d, %v", got, err)
		}
		// Never reported, wholly drawn, but a request holds a slot: it
		// may give back what it did not send.
		sweep(0)
		// It ends and reports what its client acknowledged; the process
		// keeps the rest of its draw for a second, so the session waits.
		mustRecordSession(t, e, e.l, x.ID, 0, 0, 699)
		if err := e.l.SlotRelease(e.ctx, x.ID, "streaming"); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(ledger.SpentGrace - time.Microsecond)
		sweep(0)
		e.clock.Add(time.Microsecond)
		sweep(1)
		evs := e.wantDeliveryEvents(t, l.ID, ledger.EventGrantInterrupted)
		g := e.mustGrant(t, l.ID, x.GrantID)
		wantEvent(t, evs[0], &g, 700, 0.7, 1, ledger.InterruptedBudgetSpent)
		if got, err := e.l.SessionGet(e.ctx, x.ID); err != nil || got.EndedAt == nil {
			t.Fatalf("the spent session: %+v, %v; want ended", got, err)
		}

		// A budget given back in time keeps a session alive.
		l2 := e.MustLink(t, 1, sessionLink)
		y := e.MustSession(t, l2, 1000, 1)
		if _, err := e.l.BudgetDraw(e.ctx, y.ID, 1000); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(ledger.SpentGrace / 2)
		if err := e.l.SessionDeliveryRecord(e.ctx, ledger.SessionDelivery{SessionID: y.ID, Return: 100}); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(ledger.SpentGrace)
		sweep(0)
		if got, err := e.l.SessionGet(e.ctx, y.ID); err != nil || got.BytesDrawn != 900 || got.EndedAt != nil {
			t.Fatalf("after a return: %+v, %v; want 900 drawn, alive", got, err)
		}
		e.wantDeliveryEvents(t, l2.ID)
	})
	t.Run("AReportNamesASession", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, false)
		var c sessions.Coverage
		c.Add(sessions.Range{Start: 0, Length: 10})
		for _, d := range []ledger.SessionDelivery{
			{SessionID: "0192f000-0000-7000-8000-000000000001"},
			{SessionID: "0192f000-0000-7000-8000-000000000001", Acked: c},
		} {
			if err := e.l.SessionDeliveryRecord(e.ctx, d); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("SessionDeliveryRecord(unknown, %d spans) = %v, want ErrNotFound", d.Acked.Len(), err)
			}
		}
		for _, d := range []ledger.SessionDelivery{{}, {SessionID: "x", Return: -1}} {
			if err := e.l.SessionDeliveryRecord(e.ctx, d); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("SessionDeliveryRecord(%+v) = %v, want ErrInvalid", d, err)
			}
		}
	})
	t.Run("WithWebhooksOffSessionsWriteNoEvents", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, false)
		l := e.MustLink(t, 2, sessionLink)
		x := e.MustSession(t, l, 2000, 2)
		y := e.MustSession(t, l, 2000, 2)
		mustRecordSession(t, e, e.l, x.ID, 0, 0, 999)
		if err := e.l.SessionRevoke(e.ctx, y.ID); err != nil {
			t.Fatal(err)
		}
		e.wantDeliveryEvents(t, l.ID)
		if got := e.mustGrant(t, l.ID, y.GrantID); got.Delivery.InterruptedAt == nil {
			t.Fatalf("the revoked session's grant: %+v, want interrupted", got.Delivery)
		}
	})
}

func exerciseDeliveryReads(t *testing.T, newLedger NewOutboxLedger) {
	t.Run("GrantsAreFilteredByDeliveryStatusPageByPage", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, false)
		l := e.MustLink(t, 9)
		want := map[ledger.DeliveryStatus][]string{}
		for _, acked := range []int64{-1, 400, 1000, -1, 1, 1000, 999, -1} {
			e.clock.Add(time.Millisecond)
			g := e.mustClaimStream(t, l, "")
			status := ledger.DeliveryNone
			if acked >= 0 {
				e.record(t, g, 1, acked)
				status = map[bool]ledger.DeliveryStatus{true: ledger.DeliveryComplete, false: ledger.DeliveryPartial}[acked == 1000]
			}
			want[status] = append([]string{g.ID}, want[status]...)
		}
		e.clock.Add(time.Millisecond)
		x := e.MustSession(t, l, 2000, 1)
		mustRecordSession(t, e, e.l, x.ID, 0, 0, 9)
		want[ledger.DeliveryPartial] = append([]string{x.GrantID}, want[ledger.DeliveryPartial]...)
		for status, ids := range want {
			var got []string
			for cursor, pages := "", 0; ; pages++ {
				if pages > 10 {
					t.Fatalf("%s: still paging", status)
				}
				p, err := e.l.GrantList(e.ctx, ledger.GrantQuery{LinkID: l.ID, Cursor: cursor, Limit: 2, Delivery: status})
				if err != nil {
					t.Fatal(err)
				}
				for _, g := range p.Grants {
					if g.Delivery.Status != status {
						t.Fatalf("filter %s listed a %s grant", status, g.Delivery.Status)
					}
					got = append(got, g.ID)
				}
				if cursor = p.Next; cursor == "" {
					break
				}
			}
			if !slices.Equal(got, ids) && !(len(ids) == 0 && len(got) == 0) {
				t.Errorf("filter %s: %v, want %v newest first", status, got, ids)
			}
		}
		for _, bad := range []ledger.DeliveryStatus{"Complete", "done", " none"} {
			if _, err := e.l.GrantList(e.ctx, ledger.GrantQuery{LinkID: l.ID, Delivery: bad}); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("GrantList(delivery %q) = %v, want ErrInvalid", bad, err)
			}
		}
		if _, err := ledger.ParseDeliveryStatus("partial"); err != nil {
			t.Fatal(err)
		}
		if _, err := ledger.ParseDeliveryStatus("bad"); !errors.Is(err, ledger.ErrInvalid) {
			t.Fatalf("ParseDeliveryStatus(bad) = %v, want ErrInvalid", err)
		}
	})
	t.Run("TheLinkCountsItsGrantsByDeliveryStatus", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, false)
		l := e.MustLink(t, 5, func(l *ledger.Link) { l.Filename = "counted" })
		e.mustClaimStream(t, l, "")
		e.record(t, e.mustClaimStream(t, l, ""), 1, 10)
		e.record(t, e.mustClaimStream(t, l, ""), 1, 1000)
		e.record(t, e.mustClaimStream(t, l, ""), 1, 1000)
		refunded := e.mustClaimStream(t, l, "")
		if err := e.l.GrantRefund(e.ctx, refunded.ID); err != nil {
			t.Fatal(err)
		}
		want := map[ledger.DeliveryStatus]int{ledger.DeliveryNone: 2, ledger.DeliveryPartial: 1, ledger.DeliveryComplete: 2}
		if st := e.mustStatus(t, l.ID); !maps.Equal(st.Deliveries, want) || st.Grants[ledger.StatusRefunded] != 1 {
			t.Fatalf("LinkGet: deliveries %v, grants %v; want %v and one refunded", st.Deliveries, st.Grants, want)
		}
		other := e.MustLink(t, 1)
		page, err := e.l.LinkList(e.ctx, ledger.ListQuery{})
		if err != nil {
			t.Fatal(err)
		}
		for _, st := range page.Links {
			w := want
			if st.ID == other.ID {
				w = map[ledger.DeliveryStatus]int{ledger.DeliveryNone: 0, ledger.DeliveryPartial: 0, ledger.DeliveryComplete: 0}
			}
			if !maps.Equal(st.Deliveries, w) {
				t.Fatalf("LinkList: link %s deliveries %v, want %v", st.ID, st.Deliveries, w)
			}
		}
	})
	t.Run("RetriesAreStoredAndReadWithTheLink", func(t *testing.T) {
		t.Parallel()
		e := deliveryEnv(t, newLedger, false)
		l := e.retryLink(t, 2, 3)
		byHash, err := e.l.LinkGetByTokenHash(e.ctx, l.TokenHash)
		if err != nil || byHash.Retries != 3 || l.Retries != 3 {
			t.Fatalf("LinkGetByTokenHash = %+v, %v; want 3 retries", byHash, err)
		}
		if st := e.mustStatus(t, l.ID); st.Retries != 3 {
			t.Fatalf("LinkGet: %d retries, want 3", st.Retries)
		}
		if got := e.mustList(t, ledger.ListQuery{}); len(got) != 1 || got[0].Retries != 3 {
			t.Fatalf("LinkList = %+v, want the link with 3 retries", got)
		}
		// The retry asked first (a link with retries is not claimed at
		// once before that: ClaimsByToken/NotClaimed/StreamLinkWithRetries).
		o, err := e.l.LinkClaim(e.ctx, l.TokenHash, ledger.ClaimRequest{Kind: ledger.KindStream, Client: "test", RetriesChecked: true}, false)
		if err != nil || o.Grant == nil || o.Link.Retries != 3 {
			t.Fatalf("LinkClaim = %+v, %v; want a grant and the link's 3 retries", o, err)
		}
		// An idempotent replay names the same retries.
		keyed := e.retryLink(t, 1, 1, func(l *ledger.Link) { l.IdempotencyKey = "retries-key" })
		again := *keyed
		again.ID, again.TokenHash, again.Retries = "0192f000-0000-7000-8000-0000000000fe", randomHash(t), 2
		if _, _, err := e.l.LinkCreate(e.ctx, &again); !errors.Is(err, ledger.ErrConflict) {
			t.Fatalf("a replay with other retries = %v, want ErrConflict", err)
		}
		for _, n := range []int{-1, ledger.MaxRetries + 1} {
			bad := e.newLinkValue(t, func(l *ledger.Link) { l.Retries = n })
			if _, _, err := e.l.LinkCreate(e.ctx, bad); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("LinkCreate(retries %d) = %v, want ErrInvalid", n, err)
			}
		}
		if _, _, err := e.l.LinkCreate(e.ctx, e.newLinkValue(t, func(l *ledger.Link) { l.Retries = ledger.MaxRetries })); err != nil {
			t.Fatalf("LinkCreate(retries %d) = %v", ledger.MaxRetries, err)
		}
	})
}

// mustCreateOn creates a one-download stream link of a 1000-byte object
// on l, edit applied first.
func mustCreateOn(tb testing.TB, l ledger.Ledger, edit ...func(*ledger.Link)) *ledger.Link {
	tb.Helper()
	link := &ledger.Link{ID: uuid.Must(uuid.NewV7()).String(), TokenHash: randomHash(tb),
		Object:    ledger.Object{Bucket: "b", Key: "delivered", VersionID: "v1", Size: 1000},
		Allowance: 1, Remaining: 1, ExpiresAt: time.Now().Add(time.Hour), Delivery: ledger.DeliveryStream}
	for _, f := range edit {
		f(link)
	}
	if _, _, err := l.LinkCreate(context.Background(), link); err != nil {
		tb.Fatalf("LinkCreate = %v", err)
	}
	return link
}
