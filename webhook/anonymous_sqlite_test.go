package webhook_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
)

// The events of an anonymous link, as the SQLite ledger writes them into
// the outbox, carry account_id (and a stream grant's session_id) as null,
// as docs/api.md lists them and the admin API writes them, and every
// documented field of their type.
func TestEventsOfAnAnonymousLinkSendNullAccount(t *testing.T) {
	ctx := context.Background()
	db := mustSQLite(t, 1)[0]
	hash := make([]byte, 32)
	rand.Read(hash)
	link, _, err := db.LinkCreate(ctx, &ledger.Link{ID: uuid.Must(uuid.NewV7()).String(), TokenHash: hash,
		Object:    ledger.Object{Bucket: "b", Key: "k", VersionID: "v1", Size: 10, ETag: `"e"`},
		Filename:  "k",
		Allowance: 2, Remaining: 2, ExpiresAt: time.Now().Add(time.Hour), Delivery: ledger.DeliveryStream})
	if err != nil {
		t.Fatal(err)
	}
	tokenHash := append([]byte(nil), hash...) // hash is reused for the session below
	o, err := db.LinkClaim(ctx, tokenHash, ledger.ClaimRequest{Kind: ledger.KindStream, Client: "203.0.113.7 curl/8.5.0"}, false)
	if err != nil || o.Grant == nil {
		t.Fatalf("LinkClaim = %+v, %v", o, err)
	}
	if err := db.GrantRefund(ctx, o.Grant.ID); err != nil {
		t.Fatal(err)
	}
	rand.Read(hash)
	if _, _, err := db.SessionMint(ctx, ledger.MintRequest{
		Claim:     ledger.ClaimRequest{LinkID: link.ID, Kind: ledger.KindSession, Client: "203.0.113.7 aria2/1.36"},
		SessionID: uuid.Must(uuid.NewV7()).String(), TokenHash: hash, ByteBudget: 1000, MaxConcurrency: 2,
		ExpiresAt: time.Now().Add(time.Hour),
	}); err != nil {
		t.Fatal(err)
	}
	if o, err := db.LinkClaim(ctx, tokenHash, ledger.ClaimRequest{Kind: ledger.KindStream, Client: "x"}, false); err != nil || o.Grant == nil {
		t.Fatalf("LinkClaim = %+v, %v", o, err)
	}
	if err := db.LinkRevoke(ctx, link.ID); err != nil {
		t.Fatal(err)
	}

	// A link's events are handed out one at a time, in order.
	var evs []ledger.OutboxEvent
	for range 20 {
		next, err := db.EventClaim(ctx, "test", 100, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(next) == 0 {
			break
		}
		for _, ev := range next {
			if err := db.EventMarkDelivered(ctx, ev.Seq, "test"); err != nil {
				t.Fatal(err)
			}
		}
		evs = append(evs, next...)
	}
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type)
		var body struct {
			Data map[string]json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(ev.Body, &body); err != nil {
			t.Fatalf("%s: %v", ev.Type, err)
		}
		want := ledger.EventFields(ev.Type)
		var got []string
		for k := range body.Data {
			got = append(got, k)
		}
		if !sameSet(got, want) {
			t.Errorf("%s: data fields %v, want %v: %s", ev.Type, got, want, ev.Body)
		}
		if v, ok := body.Data["account_id"]; !ok || string(v) != "null" {
			t.Errorf("%s: account_id = %s (present %v), want null: %s", ev.Type, v, ok, ev.Body)
		}
		if v, ok := body.Data["session_id"]; ok {
			isStream := bytes.Contains(ev.Body, []byte(`"kind":"stream"`))
			if isStream != (string(v) == "null") {
				t.Errorf("%s: session_id = %s: %s", ev.Type, v, ev.Body)
			}
		}
	}
	// The revocation ends the live session, which delivered nothing.
	want := []string{ledger.EventLinkCreated, ledger.EventGrantCreated, ledger.EventGrantRefunded, ledger.EventGrantCreated,
		ledger.EventSessionCreated, ledger.EventGrantCreated, ledger.EventLinkExhausted, ledger.EventLinkRevoked,
		ledger.EventGrantInterrupted}
	if !slices.Equal(types, want) {
		t.Errorf("events %v, want %v", types, want)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
