package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/token"
)

// publicHeaders are on every public answer (SPEC §3).
var publicHeaders = map[string]string{
	"Cache-Control":          "no-store",
	"X-Content-Type-Options": "nosniff",
	"Referrer-Policy":        "no-referrer",
}

func assertPublicHeaders(tb testing.TB, name string, resp *http.Response) {
	tb.Helper()
	for k, want := range publicHeaders {
		if got := resp.Header.Values(k); len(got) != 1 || got[0] != want {
			tb.Errorf("%s (%d): %s = %q, want exactly %q", name, resp.StatusCode, k, got, want)
		}
	}
}

func TestEveryPublicAnswerCarriesTheCommonHeaders(t *testing.T) {
	h := MustHarness(t)
	data := testData(10 << 10)
	stream := h.MustObjectLink(t, "stream.bin", data, nil)
	redirect := h.MustObjectLink(t, "redirect.bin", data, map[string]any{"delivery": "session"})
	bound := h.MustObjectLink(t, "bound.bin", data, map[string]any{"account_id": "alice"})
	spent := h.MustObjectLink(t, "spent.bin", data, map[string]any{"downloads": 1})
	small := h.MustObjectLink(t, "small.bin", data, map[string]any{"session": map[string]any{"byte_budget": len(data)}})
	held := h.MustObjectLink(t, "held.bin", data, map[string]any{"session": map[string]any{"max_concurrency": 1}})
	broken := h.MustObjectLink(t, "broken.bin", data, nil)

	type answer struct {
		name string
		want int
		resp *http.Response
	}
	var answers []answer
	do := func(name string, want int, method, url string, header http.Header) (*http.Response, []byte) {
		t.Helper()
		resp, body := h.Do(t, method, url, header)
		answers = append(answers, answer{name, want, resp})
		return resp, body
	}

	do("stream GET", http.StatusOK, http.MethodGet, stream.URL, nil)
	do("link HEAD", http.StatusOK, http.MethodHead, stream.URL, nil)
	do("link GET with Range", http.StatusConflict, http.MethodGet, stream.URL, http.Header{"Range": {"bytes=0-1"}})
	do("malformed token", http.StatusNotFound, http.MethodGet, h.Public.URL+"/d/short", nil)
	do("account-bound link, anonymous", http.StatusUnauthorized, http.MethodGet, bound.URL, nil)
	do("wrong method", http.StatusMethodNotAllowed, http.MethodDelete, stream.URL, nil)
	do("unknown path", http.StatusNotFound, http.MethodGet, h.Public.URL+"/nope", nil)
	do("exhausting GET", http.StatusOK, http.MethodGet, spent.URL, nil)
	do("exhausted link", http.StatusNotFound, http.MethodGet, spent.URL, nil)
	resp, _ := do("session-delivery GET", http.StatusSeeOther, http.MethodGet, redirect.URL, nil)
	loc := resp.Header.Get("Location")
	do("session range", http.StatusPartialContent, http.MethodGet, loc, http.Header{"Range": {"bytes=0-9"}})
	do("session HEAD", http.StatusOK, http.MethodHead, loc, nil)
	do("session unsatisfiable range", http.StatusRequestedRangeNotSatisfiable, http.MethodGet, loc, http.Header{"Range": {"bytes=999999-"}})

	_, body := do("mint", http.StatusCreated, http.MethodPost, small.URL+"/sessions", nil)
	sx := mustJSON[sessionJSON](t, body).SessionURL
	do("whole budget", http.StatusOK, http.MethodGet, sx, nil)
	do("budget spent", http.StatusForbidden, http.MethodGet, sx, nil)

	hx := h.MustMint(t, held).SessionURL
	opened, release := h.GateFirstOpen("held.bin")
	first := h.Go(http.MethodGet, hx, nil)
	<-opened
	do("slot taken", http.StatusTooManyRequests, http.MethodGet, hx, nil)
	release()
	answers = append(answers, answer{"slot holder", http.StatusOK, mustResult(t, first).resp})
	h.WaitIdle()

	h.Store.OpenFunc = func(context.Context, storage.Version, int64, int64) (io.ReadCloser, error) {
		return nil, fmt.Errorf("disk gone: %w", storage.ErrUnavailable)
	}
	do("storage failure", http.StatusBadGateway, http.MethodGet, broken.URL, nil)

	for _, a := range answers {
		if a.resp.StatusCode != a.want {
			t.Errorf("%s = %d, want %d", a.name, a.resp.StatusCode, a.want)
		}
		assertPublicHeaders(t, a.name, a.resp)
	}
}

func TestMalformedTokensAreRefusedWithoutTheDatabase(t *testing.T) {
	h := MustHarness(t)
	valid := testKeys.Derive(token.Link, "x")
	cases := []struct {
		name, method, path, suffix string
	}{
		{"TooShort", http.MethodGet, "/d/abc", "link-unavailable"},
		{"OneTooLong", http.MethodGet, "/d/" + valid + "A", "link-unavailable"},
		{"OneTooShort", http.MethodGet, "/d/" + valid[:42], "link-unavailable"},
		{"PaddedBase64", http.MethodGet, "/d/" + valid[:42] + "=", "link-unavailable"},
		{"StandardBase64Plus", http.MethodGet, "/d/" + valid[:42] + "+", "link-unavailable"},
		{"Dot", http.MethodGet, "/d/" + valid[:42] + ".", "link-unavailable"},
		{"NonASCII", http.MethodGet, "/d/" + valid[:41] + "%C3%A9", "link-unavailable"},
		{"HeadTooShort", http.MethodHead, "/d/abc", "link-unavailable"},
		{"MintTooShort", http.MethodPost, "/d/abc/sessions", "link-unavailable"},
		{"MintWithSpace", http.MethodPost, "/d/" + valid[:42] + "%20/sessions", "link-unavailable"},
		{"SessionTooShort", http.MethodGet, "/s/abc", "session-unavailable"},
		{"SessionOneTooLong", http.MethodGet, "/s/" + valid + "_", "session-unavailable"},
		{"SessionHeadTooShort", http.MethodHead, "/s/abc", "session-unavailable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := h.Ledger.Calls("")
			resp, body := h.Do(t, c.method, h.Public.URL+c.path, nil)
			if c.method == http.MethodHead {
				if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Content-Type") != "application/problem+json" {
					t.Errorf("HEAD %s = %d %q, want 404 problem+json", c.path, resp.StatusCode, resp.Header.Get("Content-Type"))
				}
			} else {
				mustProblem(t, resp, body, http.StatusNotFound, c.suffix)
			}
			assertPublicHeaders(t, c.name, resp)
			if n := h.Ledger.Calls("") - before; n != 0 {
				t.Errorf("%s %s made %d ledger calls, want 0", c.method, c.path, n)
			}
		})
	}
}

func TestRangeOnALinkIsRefusedBeforeAnyClaim(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "r.bin", testData(4096), map[string]any{"downloads": 2})
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		t.Run(method+"WithRangeIs409", func(t *testing.T) {
			before := h.claimCalls()
			resp, body := h.Do(t, method, l.URL, http.Header{"Range": {"bytes=0-99"}})
			if resp.StatusCode != http.StatusConflict {
				t.Fatalf("%s with Range = %d, want 409", method, resp.StatusCode)
			}
			if got := resp.Header.Get("Accept-Ranges"); got != "none" {
				t.Errorf("Accept-Ranges = %q, want none", got)
			}
			if method == http.MethodGet {
				p := mustProblem(t, resp, body, http.StatusConflict, "range-requires-session")
				if !strings.Contains(p.Detail, "POST /d/") || !strings.Contains(p.Detail, "/sessions") {
					t.Errorf("detail = %q, want it to point to POST /d/{token}/sessions", p.Detail)
				}
				if tok := l.URL[strings.LastIndex(l.URL, "/")+1:]; strings.Contains(string(body), tok) {
					t.Errorf("the 409 body echoes the link token: %s", body)
				}
			}
			// It may look the link up (a client of a session-delivery
			// link would be sent to its session, SPEC §5), never claim.
			if n := h.claimCalls() - before; n != 0 {
				t.Errorf("a Range request made %d claim calls, want 0", n)
			}
		})
	}
	if got := h.MustShowLink(t, l.ID); got.Remaining != 2 || got.Grants["granted"] != 0 {
		t.Errorf("after Range requests: remaining %d, grants %v; want 2 and none", got.Remaining, got.Grants)
	}
}

func TestHeadOnALinkNeverClaimsAndSendsTheGetHeaders(t *testing.T) {
	h := MustHarness(t)
	data := testData(12345)
	h.MustPutObject(t, "docs/report.pdf", "application/pdf", data)
	l := h.MustCreateLink(t, map[string]any{"object": map[string]any{"key": "docs/report.pdf"}, "downloads": 1, "expires_in": 60})

	for range 3 {
		resp, body := h.Do(t, http.MethodHead, l.URL, nil)
		if resp.StatusCode != http.StatusOK || len(body) != 0 {
			t.Fatalf("HEAD = %d with %d body bytes, want 200 and none", resp.StatusCode, len(body))
		}
	}
	if n := h.Ledger.Calls("Claim"); n != 0 {
		t.Errorf("HEAD made %d claims, want 0", n)
	}
	if got := h.MustShowLink(t, l.ID).Remaining; got != 1 {
		t.Errorf("remaining after HEADs = %d, want 1", got)
	}

	head, _ := h.Do(t, http.MethodHead, l.URL, nil)
	get, body := h.Do(t, http.MethodGet, l.URL, nil)
	if get.StatusCode != http.StatusOK || string(body) != string(data) {
		t.Fatalf("GET after HEADs = %d, %d bytes; want 200 and the object", get.StatusCode, len(body))
	}
	for _, k := range []string{"Content-Length", "ETag", "Content-Type", "Content-Disposition", "Last-Modified", "Accept-Ranges"} {
		if head.Header.Get(k) == "" || head.Header.Get(k) != get.Header.Get(k) {
			t.Errorf("%s: HEAD %q, GET %q; want equal and present", k, head.Header.Get(k), get.Header.Get(k))
		}
	}
	if head.ContentLength != int64(len(data)) {
		t.Errorf("HEAD Content-Length = %d, want %d", head.ContentLength, len(data))
	}

	// Exhausted now: HEAD reports what GET would do, still without a claim.
	claims := h.Ledger.Calls("Claim")
	resp, _ := h.Do(t, http.MethodHead, l.URL, nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("HEAD on an exhausted link = %d, want 404", resp.StatusCode)
	}
	if h.Ledger.Calls("Claim") != claims {
		t.Errorf("HEAD on an exhausted link claimed")
	}
}

func TestRefusedLinksLookAlike(t *testing.T) {
	h := MustHarness(t)
	data := testData(100)
	expired := h.MustObjectLink(t, "e.bin", data, map[string]any{"expires_in": 60})
	revoked := h.MustObjectLink(t, "v.bin", data, nil)
	exhausted := h.MustObjectLink(t, "x.bin", data, map[string]any{"downloads": 1})
	sessionExhausted := h.MustObjectLink(t, "sx.bin", data, map[string]any{"downloads": 1, "delivery": "session"})

	if resp, body := h.AdminDo(t, http.MethodPost, "/v1/links/"+revoked.ID+"/revoke", nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke = %d %s", resp.StatusCode, body)
	}
	if resp, _ := h.Do(t, http.MethodGet, exhausted.URL, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("first GET = %d, want 200", resp.StatusCode)
	}
	// Another client spends it: its own GET would be sent back to its
	// session (SPEC §5).
	if resp, _ := h.Do(t, http.MethodGet, sessionExhausted.URL, http.Header{"User-Agent": {"first-client"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("first GET of a session link = %d, want 303", resp.StatusCode)
	}
	h.Clock.Advance(61 * time.Second)

	urls := map[string]string{
		"Expired":          expired.URL,
		"Revoked":          revoked.URL,
		"Exhausted":        exhausted.URL,
		"SessionExhausted": sessionExhausted.URL,
		"Unknown":          h.Public.URL + "/d/" + testKeys.Derive(token.Link, "no-such-link"),
		"Malformed":        h.Public.URL + "/d/not-a-token",
	}
	var first string
	for name, url := range urls {
		for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
			target := url
			if method == http.MethodPost {
				target += "/sessions"
			}
			resp, body := h.Do(t, method, target, nil)
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s %s = %d, want 404", name, method, resp.StatusCode)
				continue
			}
			if method == http.MethodHead {
				continue
			}
			p := mustProblem(t, resp, body, http.StatusNotFound, "link-unavailable")
			if p.RequestID == "" {
				t.Errorf("%s %s: problem without request_id", name, method)
			}
			p.RequestID = ""
			norm, _ := json.Marshal(p)
			if first == "" {
				first = string(norm)
			} else if string(norm) != first {
				t.Errorf("%s %s body = %s, want the same as every refusal: %s", name, method, norm, first)
			}
		}
	}
	for _, l := range []linkJSON{expired, revoked} {
		if got := h.MustShowLink(t, l.ID); got.Remaining != 5 || got.Grants["granted"] != 0 {
			t.Errorf("refused link %s: remaining %d, grants %v; want 5 and none", l.ID, got.Remaining, got.Grants)
		}
	}
}

func TestAccountBoundLinksDemandCredentials(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "mine.bin", testData(100), map[string]any{"account_id": "alice", "delivery": "session"})
	for _, c := range []struct{ method, url string }{
		{http.MethodGet, l.URL},
		{http.MethodHead, l.URL},
		{http.MethodPost, l.URL + "/sessions"},
	} {
		resp, body := h.Do(t, c.method, c.url, nil)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("anonymous %s = %d, want 401", c.method, resp.StatusCode)
			continue
		}
		if got := resp.Header.Get("WWW-Authenticate"); got != "Bearer" {
			t.Errorf("anonymous %s: WWW-Authenticate = %q, want Bearer", c.method, got)
		}
		if c.method != http.MethodHead {
			mustProblem(t, resp, body, http.StatusUnauthorized, "authentication-required")
		}
	}
	if n := h.Ledger.Calls("Claim") + h.Ledger.Calls("SessionMint"); n != 0 {
		t.Errorf("anonymous requests reached the claim %d times", n)
	}
	if got := h.MustShowLink(t, l.ID); got.Remaining != 5 || got.AccountID == nil || *got.AccountID != "alice" {
		t.Errorf("link = remaining %d, account %v; want 5 and alice", got.Remaining, got.AccountID)
	}
}
