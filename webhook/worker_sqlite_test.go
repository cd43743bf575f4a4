package webhook_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore"
	"github.com/dlgate/dlgate/ledger/sqlite"
	"github.com/dlgate/dlgate/webhook"
)

// mustSQLite opens n ledgers on one fresh SQLite file, as n processes
// would, each writing webhook events.
func mustSQLite(t *testing.T, n int) []*sqlcore.DB {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gateway.db")
	var out []*sqlcore.DB
	for range n {
		db, err := sqlite.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if err := sqlite.Migrate(context.Background(), db.SQL(), path); err != nil {
			t.Fatal(err)
		}
		db.Webhooks = true
		out = append(out, db)
	}
	return out
}

type received struct {
	id, typ, linkID string
	status          int
}

func TestTwoWorkersDeliverEveryEventOfALinkInOrderThroughFailures(t *testing.T) {
	var (
		mu   sync.Mutex
		got  []received
		fail = 3 // the receiver's first three requests fail
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var ev ledger.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			t.Errorf("body %q: %v", body, err)
		}
		if !verify(testSecret, r.Header.Get(webhook.HeaderID), r.Header.Get(webhook.HeaderTimestamp), body, r.Header.Get(webhook.HeaderSignature)) {
			t.Errorf("signature of %s does not verify", r.Header.Get(webhook.HeaderID))
		}
		mu.Lock()
		defer mu.Unlock()
		status := http.StatusOK
		if fail > 0 {
			fail--
			status = http.StatusInternalServerError
		}
		got = append(got, received{r.Header.Get(webhook.HeaderID), ev.Type, ev.Data.LinkID, status})
		w.WriteHeader(status)
	}))
	defer srv.Close()

	dbs := mustSQLite(t, 2)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for i, db := range dbs {
		w, _ := mustWorker(t, db, srv.URL, func(o *webhook.Options) {
			o.Backoff = webhook.Backoff{First: 20 * time.Millisecond, Max: 100 * time.Millisecond}
			o.Poll = 10 * time.Millisecond
			o.Holder = "worker-" + string(rune('a'+i))
		})
		wg.Go(func() { w.Run(ctx) })
	}

	// Two links, each with its own sequence of changes.
	l := dbs[0]
	var links []*ledger.Link
	for range 2 {
		hash := make([]byte, 32)
		rand.Read(hash)
		link, _, err := l.LinkCreate(ctx, &ledger.Link{ID: uuid.Must(uuid.NewV7()).String(), TokenHash: hash,
			Object:    ledger.Object{Bucket: "b", Key: "k", VersionID: "v1", Size: 10},
			Allowance: 2, Remaining: 2, ExpiresAt: time.Now().Add(time.Hour), Delivery: ledger.DeliveryStream})
		if err != nil {
			t.Fatal(err)
		}
		links = append(links, link)
	}
	for _, link := range links {
		for range 2 {
			if o, err := l.LinkClaim(ctx, link.TokenHash, ledger.ClaimRequest{Kind: ledger.KindStream, Client: "test"}, false); err != nil || o.Grant == nil {
				t.Fatalf("LinkClaim = %+v, %v", o, err)
			}
		}
		if err := l.LinkRevoke(ctx, link.ID); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{ledger.EventLinkCreated, ledger.EventGrantCreated, ledger.EventGrantCreated,
		ledger.EventLinkExhausted, ledger.EventLinkRevoked}

	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		ok := 0
		for _, r := range got {
			if r.status == http.StatusOK {
				ok++
			}
		}
		snapshot := slices.Clone(got)
		mu.Unlock()
		// A worker marks an event delivered after its 200 reached the
		// receiver: done once the outbox is empty too, not at the 200s.
		age, err := dbs[1].OutboxAge(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if ok >= 2*len(want) && age == 0 {
			cancel()
			wg.Wait()
			checkDelivered(t, snapshot, links, want)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s the receiver got %d successful deliveries of %d, outbox age %v (want 0): %+v", ok, 2*len(want), age, snapshot)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func checkDelivered(t *testing.T, got []received, links []*ledger.Link, want []string) {
	t.Helper()
	failedIDs := map[string]bool{}
	seen := map[string]bool{}
	byLink := map[string][]string{}
	for _, r := range got {
		if r.status != http.StatusOK {
			failedIDs[r.id] = true
			continue
		}
		if seen[r.id] {
			t.Errorf("event %s delivered twice", r.id)
		}
		seen[r.id] = true
		byLink[r.linkID] = append(byLink[r.linkID], r.typ)
	}
	for _, l := range links {
		if !slices.Equal(byLink[l.ID], want) {
			t.Errorf("link %s: delivered %v, want %v in that order", l.ID, byLink[l.ID], want)
		}
	}
	for id := range failedIDs {
		if !seen[id] {
			t.Errorf("event %s failed and was never delivered again under its webhook-id", id)
		}
	}
	if len(failedIDs) == 0 {
		t.Error("no attempt failed; the test receiver should have refused three")
	}
}
