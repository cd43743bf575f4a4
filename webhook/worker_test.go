package webhook_test

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/webhook"
)

var testKey = []byte("0123456789abcdef0123456789abcdef")

var testSecret = "whsec_" + base64.StdEncoding.EncodeToString(testKey)

// fakeOutbox hands out its pending events once and records the reports.
type fakeOutbox struct {
	mu        sync.Mutex
	pending   []ledger.OutboxEvent
	delivered []int64
	failed    []failure
}

type failure struct {
	seq     int64
	reason  string
	retryIn time.Duration
}

var _ ledger.Outbox = (*fakeOutbox)(nil)

func (f *fakeOutbox) EventClaim(_ context.Context, _ string, limit int, _ time.Duration) ([]ledger.OutboxEvent, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := min(limit, len(f.pending))
	out := f.pending[:n]
	f.pending = f.pending[n:]
	return out, nil
}

func (f *fakeOutbox) EventMarkDelivered(_ context.Context, seq int64, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.delivered = append(f.delivered, seq)
	return nil
}

func (f *fakeOutbox) EventMarkFailed(_ context.Context, seq int64, _, reason string, retryIn time.Duration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = append(f.failed, failure{seq, reason, retryIn})
	return nil
}

func (f *fakeOutbox) EventExpire(context.Context, time.Duration, int) (int, error) { return 0, nil }
func (f *fakeOutbox) EventPurge(context.Context, time.Duration, int) (int, error)  { return 0, nil }
func (f *fakeOutbox) OutboxAge(context.Context) (time.Duration, error)             { return 0, nil }

func testEvent() ledger.OutboxEvent {
	return ledger.OutboxEvent{Seq: 7, ID: "0190a5e4-1c2b-7d3e-8f40-123456789abc", Type: ledger.EventGrantCreated,
		LinkID: "0190a5e4-0000-7000-8000-000000000001", Attempts: 3,
		Body: []byte(`{"type":"grant.created","timestamp":"2025-01-02T03:04:05Z","data":{"link_id":"0190a5e4-0000-7000-8000-000000000001"}}`)}
}

// mustWorker returns a worker on o aimed at url with a fixed jitter (0.5)
// and its own metrics registry.
func mustWorker(t *testing.T, o ledger.Outbox, url string, edit ...func(*webhook.Options)) (*webhook.Worker, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	opts := webhook.Options{Outbox: o, URL: url, Key: testKey, Timeout: 300 * time.Millisecond,
		Registerer: reg, Rand: func() float64 { return 0.5 }, Logger: slog.New(slog.DiscardHandler)}
	for _, f := range edit {
		f(&opts)
	}
	w, err := webhook.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return w, reg
}

func deliveries(t *testing.T, reg *prometheus.Registry, result string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "gateway_webhook_deliveries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "result" && l.GetValue() == result {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatal("gateway_webhook_deliveries_total is not registered")
	return 0
}

func TestDeliveryOutcomes(t *testing.T) {
	redirectTarget := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a redirect was followed to %s", r.URL)
	}))
	defer redirectTarget.Close()
	closed := httptest.NewServer(http.NotFoundHandler())
	closedURL := strings.Replace(closed.URL, "http://", "http://u:pw@", 1) + "/hooks?key=abc"
	closed.Close()

	backoff := webhook.DefaultBackoff.Delay(3, 0.5)
	tests := []struct {
		name      string
		handler   http.HandlerFunc
		url       string // instead of the handler's server
		result    string
		reason    string
		retryIn   time.Duration
		delivered bool
	}{
		{name: "200IsSuccess", handler: func(w http.ResponseWriter, r *http.Request) {}, result: webhook.ResultSuccess, delivered: true},
		{name: "AnyOther2xxIsSuccess", handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(299) },
			result: webhook.ResultSuccess, delivered: true},
		{name: "500IsRetriedAfterItsBackoff", handler: func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) },
			result: webhook.ResultHTTPError, reason: "HTTP 500", retryIn: backoff},
		{name: "ARedirectIsAFailureNotFollowed", handler: func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, redirectTarget.URL, http.StatusFound)
		}, result: webhook.ResultHTTPError, reason: "HTTP 302", retryIn: backoff},
		{name: "ALongerRetryAfterWins", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "120")
			w.WriteHeader(503)
		}, result: webhook.ResultHTTPError, reason: "HTTP 503", retryIn: 120 * time.Second},
		{name: "AShorterRetryAfterDoesNotShortenTheBackoff", handler: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(429)
		}, result: webhook.ResultHTTPError, reason: "HTTP 429", retryIn: backoff},
		{name: "NoAnswerWithinTheTimeoutIsANetworkError", handler: func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}, result: webhook.ResultNetworkError, reason: "timeout: no answer within the delivery timeout", retryIn: backoff},
		{name: "ARefusedConnectionIsANetworkError", url: closedURL, result: webhook.ResultNetworkError, retryIn: backoff},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				mu  sync.Mutex
				got *http.Request
				raw []byte
			)
			url := tt.url
			if tt.handler != nil {
				srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					b, _ := io.ReadAll(r.Body)
					mu.Lock()
					got, raw = r, b
					mu.Unlock()
					tt.handler(w, r)
				}))
				defer srv.Close()
				url = srv.URL + "/hooks?key=abc"
			}
			o := &fakeOutbox{pending: []ledger.OutboxEvent{testEvent()}}
			w, reg := mustWorker(t, o, url)
			start := time.Now()
			if n, err := w.Round(context.Background()); n != 1 || err != nil {
				t.Fatalf("Round = %d, %v", n, err)
			}
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("the round took %v with a 300ms delivery timeout", took)
			}
			if tt.delivered {
				if len(o.delivered) != 1 || o.delivered[0] != 7 || len(o.failed) != 0 {
					t.Fatalf("delivered %v, failed %v; want seq 7 delivered", o.delivered, o.failed)
				}
			} else {
				if len(o.failed) != 1 || len(o.delivered) != 0 {
					t.Fatalf("delivered %v, failed %v; want one failure", o.delivered, o.failed)
				}
				f := o.failed[0]
				if tt.reason != "" && f.reason != tt.reason {
					t.Errorf("reason = %q, want %q", f.reason, tt.reason)
				}
				if f.retryIn != tt.retryIn {
					t.Errorf("retry in %v, want %v", f.retryIn, tt.retryIn)
				}
				if len(f.reason) == 0 || strings.Contains(f.reason, "key=abc") || strings.Contains(f.reason, "pw@") {
					t.Errorf("reason %q is empty or names the URL", f.reason)
				}
			}
			if n := deliveries(t, reg, tt.result); n != 1 {
				t.Errorf("deliveries_total{result=%q} = %v, want 1", tt.result, n)
			}
			if tt.handler == nil {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if got == nil {
				t.Fatal("the receiver got nothing")
			}
			e := testEvent()
			ts := got.Header.Get(webhook.HeaderTimestamp)
			unix, _ := strconv.ParseInt(ts, 10, 64)
			switch {
			case got.Method != http.MethodPost || got.Header.Get("Content-Type") != "application/json":
				t.Errorf("%s with Content-Type %q, want a JSON POST", got.Method, got.Header.Get("Content-Type"))
			case got.URL.RawQuery != "key=abc":
				t.Errorf("query %q, want the URL's own", got.URL.RawQuery)
			case string(raw) != string(e.Body):
				t.Errorf("body %q, want the event's", raw)
			case got.Header.Get(webhook.HeaderID) != e.ID:
				t.Errorf("webhook-id %q, want %q", got.Header.Get(webhook.HeaderID), e.ID)
			case time.Since(time.Unix(unix, 0)).Abs() > 5*time.Second:
				t.Errorf("webhook-timestamp %q is not now", ts)
			case !verify(testSecret, e.ID, ts, raw, got.Header.Get(webhook.HeaderSignature)):
				t.Errorf("webhook-signature %q does not verify", got.Header.Get(webhook.HeaderSignature))
			}
		})
	}
}

func TestStoppingLetsGoOfTheEventsInFlight(t *testing.T) {
	arrived := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // until the body is read, a hang-up does not end r.Context()
		close(arrived)
		<-r.Context().Done()
	}))
	defer srv.Close()
	o := &fakeOutbox{pending: []ledger.OutboxEvent{testEvent()}}
	w, reg := mustWorker(t, o, srv.URL, func(o *webhook.Options) { o.Timeout = time.Minute })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	<-arrived
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	if len(o.failed) != 1 || o.failed[0].retryIn != 0 {
		t.Fatalf("failed %v, want the event let go at once", o.failed)
	}
	for _, r := range []string{webhook.ResultSuccess, webhook.ResultHTTPError, webhook.ResultNetworkError} {
		if n := deliveries(t, reg, r); n != 0 {
			t.Errorf("an interrupted attempt counted as %s", r)
		}
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	o := &fakeOutbox{}
	for name, opts := range map[string]webhook.Options{
		"NoOutbox":    {URL: "https://example.com/hook", Key: testKey},
		"RelativeURL": {Outbox: o, URL: "/hook", Key: testKey},
		"FTPURL":      {Outbox: o, URL: "ftp://example.com/hook", Key: testKey},
		"ShortKey":    {Outbox: o, URL: "https://example.com/hook", Key: testKey[:10]},
	} {
		if _, err := webhook.New(opts); err == nil {
			t.Errorf("New(%s) = nil error", name)
		}
	}
}
