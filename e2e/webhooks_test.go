package e2e

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql" // reading the outbox behind the gateways

	"github.com/dlgate/dlgate/internal/testenv"
)

// hookRequest is one request the test receiver got.
type hookRequest struct {
	ID, Timestamp, Signature string
	Body                     []byte
	Event                    hookEvent
	Verified                 bool
	At                       time.Time
	// Status is what the receiver answered; 0 when the sender hung up
	// before it answered.
	Status int
}

// hookEvent is the body of a webhook, read without the gateway's types.
type hookEvent struct {
	Type      string         `json:"type"`
	Timestamp time.Time      `json:"timestamp"`
	Data      map[string]any `json:"data"`
}

func (e hookEvent) str(key string) string { s, _ := e.Data[key].(string); return s }

func (e hookEvent) num(key string) int {
	n, ok := e.Data[key].(float64)
	if !ok {
		return -1
	}
	return int(n)
}

// receiver is a webhook receiver started by a test. It records every
// request, verifies its signature with verifyStandardWebhook, and answers
// as the test says: 500 for the next failNext requests, or nothing at all
// while held (until released or the sender hangs up), or 200.
type receiver struct {
	srv    *httptest.Server
	secret string

	mu       sync.Mutex
	failNext int
	hold     chan struct{} // non-nil: requests wait for it to close
	inFlight int
	reqs     []hookRequest
}

func mustStartReceiver(tb testing.TB) *receiver {
	tb.Helper()
	key := make([]byte, 32)
	rand.Read(key) //nolint:errcheck // never fails
	rv := &receiver{secret: "whsec_" + base64.StdEncoding.EncodeToString(key)}
	rv.srv = httptest.NewServer(http.HandlerFunc(rv.serve))
	tb.Cleanup(func() {
		rv.Release()
		rv.srv.Close()
	})
	return rv
}

func (rv *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body) // read whole, so a hang-up ends r.Context()
	h := hookRequest{ID: r.Header.Get("webhook-id"), Timestamp: r.Header.Get("webhook-timestamp"),
		Signature: r.Header.Get("webhook-signature"), Body: body, At: time.Now()}
	h.Verified = verifyStandardWebhook(rv.secret, h.ID, h.Timestamp, body, h.Signature)
	_ = json.Unmarshal(body, &h.Event)
	rv.mu.Lock()
	fail := rv.failNext > 0
	if fail {
		rv.failNext--
	}
	hold := rv.hold
	rv.inFlight++
	rv.mu.Unlock()
	h.Status = http.StatusOK
	switch {
	case fail:
		h.Status = http.StatusInternalServerError
	case hold != nil:
		select {
		case <-hold:
		case <-r.Context().Done():
			h.Status = 0
		}
	}
	rv.mu.Lock()
	rv.inFlight--
	rv.reqs = append(rv.reqs, h)
	rv.mu.Unlock()
	if h.Status != 0 {
		w.WriteHeader(h.Status)
	}
}

// Hold makes requests wait without an answer until Release.
func (rv *receiver) Hold() {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if rv.hold == nil {
		rv.hold = make(chan struct{})
	}
}

// Release answers the held requests (200) and stops holding.
func (rv *receiver) Release() {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	if rv.hold != nil {
		close(rv.hold)
		rv.hold = nil
	}
}

// FailNext makes the next n requests answer 500.
func (rv *receiver) FailNext(n int) {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	rv.failNext = n
}

// InFlight is how many requests wait for their answer.
func (rv *receiver) InFlight() int {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return rv.inFlight
}

// Requests returns every answered or abandoned request so far.
func (rv *receiver) Requests() []hookRequest {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return slices.Clone(rv.reqs)
}

// Delivered returns, in arrival order, the requests of link answered 200.
func (rv *receiver) Delivered(linkID string) []hookRequest {
	var out []hookRequest
	for _, h := range rv.Requests() {
		if h.Status == http.StatusOK && h.Event.str("link_id") == linkID {
			out = append(out, h)
		}
	}
	return out
}

// waitFor polls cond every 50 ms until it holds or limit passes, and
// returns how long it took.
func waitFor(tb testing.TB, limit time.Duration, what string, cond func() bool) time.Duration {
	tb.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			tb.Fatalf("after %v: %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start)
}

// verifyStandardWebhook checks a delivery the way a receiver would, from
// the Standard Webhooks specification alone: the secret is the base64
// after "whsec_"; the signed content is "{webhook-id}.{webhook-timestamp}.
// {body}"; webhook-signature is a space-separated list of "v1,<base64
// HMAC-SHA256>", one of which must match in constant time.
func verifyStandardWebhook(secret, id, timestamp string, body []byte, header string) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || id == "" || timestamp == "" {
		return false
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.", id, timestamp)
	mac.Write(body)
	want := mac.Sum(nil)
	for _, s := range strings.Fields(header) {
		version, sig, ok := strings.Cut(s, ",")
		got, err := base64.StdEncoding.DecodeString(sig)
		if ok && version == "v1" && err == nil && hmac.Equal(got, want) {
			return true
		}
	}
	return false
}

// TestWebhooks runs one cluster of three processes against a receiver the
// test controls, through the SPEC §6 promises one after the other.
func TestWebhooks(t *testing.T) {
	t.Parallel()
	rv := mustStartReceiver(t)
	dsn := testenv.SharedMariaDB(t).NewDatabase(t)
	c := MustStartCluster(t, ClusterOptions{Env: map[string]string{
		"GATEWAY_DB_DSN":         dsn,
		"GATEWAY_WEBHOOK_URL":    rv.srv.URL + "/dlgate/events?source=e2e",
		"GATEWAY_WEBHOOK_SECRET": rv.secret,
	}})
	db, err := sql.Open("mysql", dsn+"?timeout=5s&readTimeout=10s&parseTime=true")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	obj := c.Admin().MustUpload(t, "hooks/object.bin", 64<<10)

	t.Run("FiftyClaimsOnAFiveDownloadLinkAnnounceFiveGrantsThroughAFailingReceiver", func(t *testing.T) {
		rv.FailNext(3)
		link := c.Admin().MustCreateLink(t, obj, LinkRequest{Downloads: 5})
		addrs := make([]string, len(c.Gateways))
		for i, g := range c.Gateways {
			addrs[i] = g.PublicAddr
		}
		path := "/d/" + link.Token
		full := 0
		for _, r := range MustStampede(t, addrs, 50, http.MethodGet, path, getHead(path)) {
			if r.Status == http.StatusOK {
				full++
			}
		}
		if full != 5 {
			t.Fatalf("%d of 50 simultaneous GETs got the object, want 5", full)
		}
		// Each whole download also announces its grant.delivered (SPEC
		// §1), once its response ended: 12 events in all.
		took := waitFor(t, 45*time.Second, "the receiver did not get link.created, 5 grant.created, link.exhausted and 5 grant.delivered", func() bool {
			return len(rv.Delivered(link.ID)) >= 12
		})
		time.Sleep(time.Second) // time for a duplicate, should one come
		got := rv.Delivered(link.ID)
		var types []string
		ids := map[string]bool{}
		grants, delivered := map[string]bool{}, map[string]bool{}
		var remaining []int
		for _, h := range got {
			ids[h.ID] = true
			switch h.Event.Type {
			case "grant.delivered":
				// Written when a response ends, so among the claims' events
				// wherever its stream ended.
				delivered[h.Event.str("grant_id")] = true
				continue
			case "grant.created":
				grants[h.Event.str("grant_id")] = true
				remaining = append(remaining, h.Event.num("remaining"))
			}
			types = append(types, h.Event.Type)
		}
		want := []string{"link.created", "grant.created", "grant.created", "grant.created", "grant.created", "grant.created", "link.exhausted"}
		if !slices.Equal(types, want) {
			t.Errorf("delivered in this order (grant.delivered aside): %v, want %v", types, want)
		}
		if len(ids) != 12 || len(grants) != 5 || !maps.Equal(grants, delivered) {
			t.Errorf("%d distinct webhook-ids, %d distinct grant ids and grant.delivered of %d among %d deliveries; want 12, 5 and the same 5", len(ids), len(grants), len(delivered), len(got))
		}
		if !slices.Equal(remaining, []int{4, 3, 2, 1, 0}) {
			t.Errorf("grant.created remaining = %v, want 4 3 2 1 0 in order", remaining)
		}
		failed := 0
		for _, h := range rv.Requests() {
			if h.Status == http.StatusInternalServerError {
				failed++
				if !ids[h.ID] {
					t.Errorf("event %s (%s) failed and was never delivered under the same webhook-id", h.ID, h.Event.Type)
				}
			}
		}
		if failed != 3 {
			t.Errorf("the receiver refused %d requests, want its first 3", failed)
		}
		checkHookRequests(t, rv.Requests(), link.Token)
		t.Logf("5 of 50 simultaneous claims granted over 3 processes; receiver refused its first 3 attempts; "+
			"all 7 events of the link delivered in order %v after the stampede (%d attempts in all)", took.Round(10*time.Millisecond), len(rv.Requests()))
	})

	t.Run("AHangingReceiverNeverSlowsADownload", func(t *testing.T) {
		download := func(l *Link) time.Duration {
			start := time.Now()
			r := MustFetch(t, http.MethodGet, l.URL)
			if r.Status != http.StatusOK || len(r.Body) != len(obj.Data) {
				t.Fatalf("download: %v, %d bytes", r, len(r.Body))
			}
			return time.Since(start)
		}
		const n = 10
		calm := c.Admin().MustCreateLink(t, obj, LinkRequest{Downloads: n})
		var before []time.Duration
		for range n {
			before = append(before, download(calm))
		}
		waitFor(t, 20*time.Second, "the calm link's events were not all delivered", func() bool {
			return len(rv.Delivered(calm.ID)) >= n+2
		})

		rv.Hold()
		hung := c.Admin().MustCreateLink(t, obj, LinkRequest{Downloads: n})
		waitFor(t, 10*time.Second, "no delivery reached the held receiver", func() bool { return rv.InFlight() > 0 })
		var during []time.Duration
		for range n {
			during = append(during, download(hung))
		}
		held := rv.InFlight()
		rv.Release()
		if held == 0 {
			t.Fatal("the receiver held no request while the downloads ran")
		}
		mb, md := median(before), median(during)
		t.Logf("download latency with a healthy receiver: median %v, max %v; while it hangs (%d deliveries held): median %v, max %v",
			mb.Round(time.Microsecond), slices.Max(before).Round(time.Microsecond), held, md.Round(time.Microsecond), slices.Max(during).Round(time.Microsecond))
		if slices.Max(during) > 2*time.Second || md > 5*mb+200*time.Millisecond {
			t.Errorf("downloads slowed down while the receiver hung: median %v (was %v), max %v", md, mb, slices.Max(during))
		}
		waitFor(t, 30*time.Second, "the hung link's events were not delivered after the receiver came back", func() bool {
			return len(rv.Delivered(hung.ID)) >= n+2
		})
	})

	t.Run("AProcessKilledMidDeliveryLosesNoEvent", func(t *testing.T) {
		rv.Hold()
		const n = 6
		var links []*Link
		for range n {
			links = append(links, c.Admin().MustCreateLink(t, obj, LinkRequest{Downloads: 1}))
		}
		// Find a process holding leases on events it is sending.
		var victim *Gateway
		var victimEvents []string
		waitFor(t, 15*time.Second, "no process was sending the new links' events", func() bool {
			for _, g := range c.Gateways {
				ids := leasedBy(t, db, g.Pid())
				if len(ids) > len(victimEvents) {
					victim, victimEvents = g, ids
				}
			}
			return victim != nil && rv.InFlight() > 0
		})
		victim.Kill(t)
		rv.Release()
		took := waitFor(t, 40*time.Second, "the killed process's events were not delivered by the others", func() bool {
			for _, l := range links {
				if len(rv.Delivered(l.ID)) == 0 {
					return false
				}
			}
			return true
		})
		// The receiver counts an event when it answers; the sender marks it
		// delivered right after. An answer to the killed process's held
		// request counts at the receiver but never reached its sender: that
		// event stays leased until the lease (15 s) lapses and another
		// process sends it again. The killed process may also have held an
		// earlier subtest's event (a grant.delivered of its downloads),
		// which waits for that lease too.
		waitFor(t, 40*time.Second, "events still pending in the outbox", func() bool {
			var pending int
			if err := db.QueryRow(`SELECT COUNT(*) FROM webhook_outbox WHERE status = 'pending'`).Scan(&pending); err != nil {
				t.Fatal(err)
			}
			return pending == 0
		})
		delivered := map[string]bool{}
		for _, h := range rv.Requests() {
			if h.Status == http.StatusOK {
				delivered[h.ID] = true
			}
		}
		for _, id := range victimEvents {
			if !delivered[id] {
				t.Errorf("event %s, leased by the killed process, was never delivered", id)
			}
		}
		t.Logf("killed %s (pid %d) while it sent %d events; the other processes delivered them %v after the kill (lease 15 s)",
			victim.Name, victim.Pid(), len(victimEvents), took.Round(10*time.Millisecond))
	})
}

// leasedBy returns the webhook-ids of the events the process pid holds
// under a live lease (claimed_by is host/pid/random).
func leasedBy(tb testing.TB, db *sql.DB, pid int) []string {
	tb.Helper()
	rows, err := db.Query(`SELECT event_id FROM webhook_outbox
WHERE status = 'pending' AND claimed_by LIKE ? AND next_attempt_at > UTC_TIMESTAMP(6)`, "%/"+strconv.Itoa(pid)+"/%")
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			tb.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// checkHookRequests checks what every request carried: a signature that
// verifies, a timestamp of now, a body in the Standard Webhooks shape
// without the link's token.
func checkHookRequests(t *testing.T, reqs []hookRequest, token string) {
	t.Helper()
	for _, h := range reqs {
		ts, err := strconv.ParseInt(h.Timestamp, 10, 64)
		switch {
		case !h.Verified:
			t.Errorf("request for %s: webhook-signature %q does not verify", h.ID, h.Signature)
		case err != nil || h.At.Sub(time.Unix(ts, 0)).Abs() > time.Minute:
			t.Errorf("request for %s: webhook-timestamp %q is not now", h.ID, h.Timestamp)
		case h.Event.Type == "" || h.Event.Timestamp.IsZero() || h.Event.str("link_id") == "":
			t.Errorf("request for %s: body %s lacks type, timestamp or data.link_id", h.ID, h.Body)
		case strings.Contains(string(h.Body), token):
			t.Errorf("request for %s: body carries the link's token", h.ID)
		}
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
