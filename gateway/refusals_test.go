package gateway_test

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dlgate/dlgate/auth"
	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/token"
)

// refusalHarness is a gateway behind a trusted proxy (127.0.0.1), so a
// test names each request's client with X-Forwarded-For, and the address
// the limiter keys on is the one the gateway derives (SPEC §8). hold is
// Options.RefusalHold.
func refusalHarness(t *testing.T, hold time.Duration) *Harness {
	t.Helper()
	trusted, err := auth.ParsePrefixes("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return MustHarness(t, func(o *gateway.Options) {
		o.ClientAddr = func(r *http.Request) netip.Addr { return auth.ClientAddr(r, trusted) }
		o.RefusalHold = hold
	})
}

func from(client string, kv ...string) http.Header {
	return withHeader(http.Header{"X-Forwarded-For": {client}}, kv...)
}

// mustRefuse sends n requests and demands status for each.
func (h *Harness) mustRefuse(t *testing.T, n int, method, url string, header http.Header, status int) {
	t.Helper()
	for i := range n {
		if resp, body := h.Do(t, method, url, header); resp.StatusCode != status {
			t.Fatalf("request %d of %d: %s %s = %d %s, want %d", i+1, n, method, url, resp.StatusCode, body, status)
		}
	}
}

// mustThrottle demands a 429 too-many-refusals with Retry-After
// retryAfter, and that the answer made no ledger call.
func (h *Harness) mustThrottle(t *testing.T, method, url string, header http.Header, retryAfter string) *http.Response {
	t.Helper()
	before := h.Ledger.Calls("")
	resp, body := h.Do(t, method, url, header)
	if method == http.MethodHead {
		if resp.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("HEAD %s = %d, want 429", url, resp.StatusCode)
		}
	} else {
		mustProblem(t, resp, body, http.StatusTooManyRequests, "too-many-refusals")
	}
	if got := resp.Header.Get("Retry-After"); got != retryAfter {
		t.Errorf("Retry-After = %q, want %q", got, retryAfter)
	}
	if n := h.Ledger.Calls("") - before; n != 0 {
		t.Errorf("the throttled request made %d ledger calls, want none", n)
	}
	return resp
}

func TestRefusalsAreBoundedPerClientAndToken(t *testing.T) {
	h := refusalHarness(t, -1)
	// A token this gateway minted for a link that does not exist: each
	// refusal is a real lookup.
	unknown := h.Public.URL + "/d/" + testKeys.Derive(token.Link, "no-such-link") + "/f.bin"
	alice, bob := from("198.51.100.1"), from("198.51.100.2")

	h.mustRefuse(t, 50, http.MethodGet, unknown, alice, http.StatusNotFound)
	resp := h.mustThrottle(t, http.MethodGet, unknown, alice, "5")
	if resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("429 lacks the public headers: %v", resp.Header)
	}
	// A person in a browser gets the same answer as a page (SPEC §3).
	if resp, _ := h.Do(t, http.MethodGet, unknown, withHeader(alice, "Sec-Fetch-Dest", "document")); resp.StatusCode != http.StatusTooManyRequests ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") || resp.Header.Get("Retry-After") != "5" {
		t.Errorf("browser navigation under penalty = %d %q, Retry-After %q; want a 429 page with Retry-After 5",
			resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Retry-After"))
	}
	// The same link's mint route shares the link token's count.
	h.mustThrottle(t, http.MethodPost, strings.TrimSuffix(unknown, "/f.bin")+"/sessions", alice, "5")

	t.Run("AnotherClientIsUnaffected", func(t *testing.T) {
		h.mustRefuse(t, 49, http.MethodGet, unknown, bob, http.StatusNotFound)
	})
	t.Run("AnotherTokenOfTheClientIsUnaffected", func(t *testing.T) {
		other := h.Public.URL + "/d/" + testKeys.Derive(token.Link, "another-missing-link")
		h.mustRefuse(t, 1, http.MethodGet, other, alice, http.StatusNotFound)
	})
	t.Run("TheClientIsTheAddressTheGatewayDerives", func(t *testing.T) {
		// Behind the trusted proxy the client is the right-most address
		// that is not a trusted proxy, whatever the header says before it.
		h.mustThrottle(t, http.MethodGet, unknown, from("10.0.0.9, 198.51.100.1"), "5")
	})
	t.Run("RetryAfterGrowsWithEachBurst", func(t *testing.T) {
		for _, step := range []struct {
			wait time.Duration // the penalty before
			want string
		}{{5 * time.Second, "10"}, {10 * time.Second, "20"}, {20 * time.Second, "40"}} {
			h.Clock.Advance(step.wait) // past the penalty: served again
			h.mustRefuse(t, 50, http.MethodGet, unknown, alice, http.StatusNotFound)
			h.mustThrottle(t, http.MethodGet, unknown, alice, step.want)
		}
	})
	t.Run("ForgivenOnceQuiet", func(t *testing.T) {
		h.Clock.Advance(40*time.Second + 10*time.Minute)
		h.mustRefuse(t, 50, http.MethodGet, unknown, alice, http.StatusNotFound)
		h.mustThrottle(t, http.MethodGet, unknown, alice, "5")
	})

	// One warning per penalty, never with the token.
	recs := h.Logs.Records(t, "refusals throttled")
	if len(recs) != 5 {
		t.Errorf("%d refusals-throttled records, want 5 (one per penalty)", len(recs))
	}
	for _, rec := range recs {
		if rec["level"] != "WARN" || rec["client"] != "198.51.100.1" || len(rec["token_hash"].(string)) != 12 {
			t.Errorf("log record %v", rec)
		}
	}
	if tok := testKeys.Derive(token.Link, "no-such-link"); strings.Contains(h.Logs.String(), tok) {
		t.Error("a log line carries the raw token")
	}
	_, body := mustDo(t, http.DefaultClient, mustRequest(t, http.MethodGet, h.Admin.URL+"/metrics"))
	for _, want := range []string{
		`gateway_refusals_throttled_total{answer="closed",route="link"} 7`,
		`gateway_refusals_throttled_total{answer="closed",route="mint"} 1`,
		`gateway_refusal_penalties_total{route="link"} 5`,
		`gateway_refusal_keys 2`, // another-missing-link was refused once: not yet counted,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestRefusalLimitCountsWhatSpendsNothing(t *testing.T) {
	h := refusalHarness(t, -1)
	alice := from("198.51.100.1")
	l := h.MustObjectLink(t, "r.bin", testData(1000), map[string]any{"downloads": 1})

	// 409: Range on the link URL, the loop of wget2 --chunk-size.
	ranged := withHeader(alice, "Range", "bytes=0-99")
	h.mustRefuse(t, 50, http.MethodGet, l.NamedURL, ranged, http.StatusConflict)
	h.mustThrottle(t, http.MethodGet, l.NamedURL, ranged, "5")
	// The penalty is on the client and token, whatever the request.
	h.mustThrottle(t, http.MethodHead, l.URL, alice, "5")

	// 416 on a session URL.
	x := h.MustMint(t, l)
	bad := withHeader(alice, "Range", "bytes=5000-")
	h.mustRefuse(t, 50, http.MethodGet, x.SessionURL, bad, http.StatusRequestedRangeNotSatisfiable)
	h.mustThrottle(t, http.MethodGet, x.SessionURL, alice, "5")

	t.Run("NotCounted", func(t *testing.T) {
		bob := from("198.51.100.2")
		// 2xx: HEAD of a live session, and its ranges.
		h.mustRefuse(t, 60, http.MethodHead, x.SessionURL, bob, http.StatusOK)
		h.mustRefuse(t, 60, http.MethodGet, x.SessionURL, withHeader(bob, "Range", "bytes=0-9"), http.StatusPartialContent)
		// 401: an account-bound link without credentials.
		bound := h.MustObjectLink(t, "b.bin", testData(10), map[string]any{"account_id": "alice"})
		h.mustRefuse(t, 60, http.MethodGet, bound.URL, bob, http.StatusUnauthorized)
		// A token this gateway never minted: its 404 costs no lookup,
		// and junk must not crowd the table.
		forged := h.Public.URL + "/d/" + strings.Repeat("A", token.Len)
		h.mustRefuse(t, 60, http.MethodGet, forged, bob, http.StatusNotFound)
		h.mustRefuse(t, 60, http.MethodGet, h.Public.URL+"/d/short", bob, http.StatusNotFound)
	})
}

func TestAThrottledAnswerIsHeldAndHoldsAreBounded(t *testing.T) {
	h := refusalHarness(t, time.Hour) // held until the client gives up
	alice := from("198.51.100.1")
	unknown := h.Public.URL + "/d/" + testKeys.Derive(token.Link, "no-such-link")
	h.mustRefuse(t, 50, http.MethodGet, unknown, alice, http.StatusNotFound)

	// Two requests of one client and token are held at once; a third is
	// answered at once, on a connection that closes.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type answer struct {
		resp *http.Response
		err  error
	}
	answers := make(chan answer, 3)
	for range 3 {
		go func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, unknown, nil)
			req.Header = alice.Clone()
			resp, err := h.Client.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			answers <- answer{resp, err}
		}()
	}
	first := <-answers
	if first.err != nil {
		t.Fatal(first.err)
	}
	if first.resp.StatusCode != http.StatusTooManyRequests || !first.resp.Close || first.resp.Header.Get("Retry-After") != "5" {
		t.Errorf("unheld answer = %d, Close %v, Retry-After %q; want 429, Connection: close, 5",
			first.resp.StatusCode, first.resp.Close, first.resp.Header.Get("Retry-After"))
	}
	cancel()
	for range 2 {
		if a := <-answers; !errors.Is(a.err, context.Canceled) {
			t.Errorf("held request ended with %v, %v; want the client's cancellation", a.resp, a.err)
		}
	}
	h.WaitIdle()
	_, body := mustDo(t, http.DefaultClient, mustRequest(t, http.MethodGet, h.Admin.URL+"/metrics"))
	for _, want := range []string{
		`gateway_refusals_throttled_total{answer="closed",route="link"} 1`,
		`gateway_refusals_throttled_total{answer="held",route="link"} 2`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
