package gateway_test

import (
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/gateway/problem"
)

// browserNav is what Chromium sends when a person opens a link.
var browserNav = http.Header{
	"Accept":          {"text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,image/webp,image/apng,*/*;q=0.8"},
	"Sec-Fetch-Dest":  {"document"},
	"Sec-Fetch-Mode":  {"navigate"},
	"User-Agent":      {"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36"},
	"Accept-Language": {"en-US,en;q=0.9"},
}

const slackbot = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

// assertHTMLPage checks an HTML answer: status, the page CSP and that the
// body contains every want.
func assertHTMLPage(tb testing.TB, resp *http.Response, body []byte, status int, want ...string) {
	tb.Helper()
	if resp.StatusCode != status {
		tb.Fatalf("%s %s = %d %.300q, want %d", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, body, status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		tb.Errorf("Content-Type = %q, want text/html", ct)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		tb.Errorf("Content-Security-Policy = %q", csp)
	}
	assertPublicHeaders(tb, resp.Request.URL.Path, resp)
	for _, w := range want {
		if !strings.Contains(string(body), w) {
			tb.Errorf("page lacks %q: %.600q", w, body)
		}
	}
}

func TestPreviewsAndPrefetchesClaimNothing(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "report.pdf", testData(3<<20), map[string]any{"downloads": 1})
	cases := []struct {
		name string
		hdr  http.Header
	}{
		{"Slackbot", header("User-Agent", slackbot)},
		{"Outlook SafeLinks", header("User-Agent", "Mozilla/4.0 (compatible; ms-office; MSOffice 16)")},
		{"Sec-Purpose prefetch", header("Sec-Purpose", "prefetch", "Accept", "text/html")},
		{"Sec-Purpose prefetch;prerender", header("Sec-Purpose", "prefetch;prerender")},
		{"Purpose", header("Purpose", "prefetch")},
		{"X-Moz", header("X-Moz", "prefetch")},
	}
	for _, c := range cases {
		for _, m := range []string{http.MethodGet, http.MethodHead} {
			resp, body := h.Do(t, m, l.URL, c.hdr)
			if m == http.MethodHead {
				if resp.StatusCode != 200 || len(body) != 0 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
					t.Errorf("%s HEAD = %d %q (%d bytes), want the preview's headers", c.name, resp.StatusCode, resp.Header.Get("Content-Type"), len(body))
				}
				continue
			}
			assertHTMLPage(t, resp, body, http.StatusOK, `<meta property="og:title" content="report.pdf">`, "3.0 MiB", `<form method="post">`)
		}
	}
	if n := h.Ledger.Calls("Claim") + h.Ledger.Calls("SessionMint"); n != 0 {
		t.Fatalf("%d claims for previews, want 0", n)
	}
	// The person clicking afterwards still gets the file.
	resp, body := h.Do(t, http.MethodGet, l.URL, browserNav)
	if resp.StatusCode != http.StatusOK || len(body) != 3<<20 {
		t.Fatalf("browser GET after previews = %d (%d bytes), want 200 with the file", resp.StatusCode, len(body))
	}
	// And the second navigation is the HTML 404, not JSON.
	resp, body = h.Do(t, http.MethodGet, l.URL, browserNav)
	assertHTMLPage(t, resp, body, http.StatusNotFound, "This link is no longer available", problem.Base+"link-unavailable")
	// A previewer of a spent link learns nothing either.
	resp, _ = h.Do(t, http.MethodGet, l.URL, header("User-Agent", slackbot))
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("preview of a spent link = %d, want 404", resp.StatusCode)
	}
}

func TestSessionPreviewDrawsNoBudgetAndTakesNoSlot(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "s.bin", testData(64<<10), nil)
	x := h.MustMint(t, l)
	before := h.MustSession(t, x.SessionID).BytesDrawn
	resp, body := h.Do(t, http.MethodGet, x.SessionURL, header("User-Agent", "facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)"))
	assertHTMLPage(t, resp, body, http.StatusOK, "s.bin")
	if got := h.MustSession(t, x.SessionID).BytesDrawn; got != before {
		t.Errorf("bytes drawn %d → %d by a preview", before, got)
	}
	if n := h.Ledger.Calls("SlotAcquire") + h.Ledger.Calls("BudgetDraw"); n != 0 {
		t.Errorf("%d slot or budget calls for a preview, want 0", n)
	}
}

func TestPreviewDetailsCanBeTurnedOff(t *testing.T) {
	h := MustHarness(t, func(o *gateway.Options) { o.HidePreviewDetails = true })
	l := h.MustObjectLink(t, "secret-plans.pdf", testData(100), nil)
	resp, body := h.Do(t, http.MethodGet, l.URL, header("User-Agent", slackbot))
	assertHTMLPage(t, resp, body, http.StatusOK, "A file shared with you")
	if strings.Contains(string(body), "secret-plans") {
		t.Errorf("preview names the file with details off:\n%s", body)
	}
}

func TestConfirmLinkShowsALandingPageAndClaimsOnPost(t *testing.T) {
	h := MustHarness(t)
	data := testData(5000)
	l := h.MustObjectLink(t, "contract.pdf", data, map[string]any{"downloads": 1, "confirm": true})
	for _, hdr := range []http.Header{nil, browserNav, header("User-Agent", "curl/7.88.1")} {
		resp, body := h.Do(t, http.MethodGet, l.URL, hdr)
		assertHTMLPage(t, resp, body, http.StatusOK, "contract.pdf", "4.9 KiB", "in 1 hour", "UTC", `<form method="post">`, "<button")
		if strings.Contains(string(body), l.Token) {
			t.Errorf("landing page contains the raw token")
		}
	}
	resp, body := h.Do(t, http.MethodHead, l.URL, nil)
	if resp.StatusCode != http.StatusOK || len(body) != 0 || resp.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("HEAD of a confirm link = %d %q, want the landing page's headers", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if got := h.MustShowLink(t, l.ID).Remaining; got != 1 {
		t.Fatalf("remaining = %d after GET and HEAD, want 1", got)
	}
	post := header("Content-Type", "application/x-www-form-urlencoded")
	resp, body = h.Do(t, http.MethodPost, l.URL, post)
	if resp.StatusCode != http.StatusOK || string(body) != string(data) {
		t.Fatalf("POST = %d (%d bytes), want 200 with the file", resp.StatusCode, len(body))
	}
	if cd := resp.Header.Get("Content-Disposition"); !strings.HasPrefix(cd, "attachment;") {
		t.Errorf("Content-Disposition = %q, want an attachment", cd)
	}
	resp, body = h.Do(t, http.MethodGet, l.URL, browserNav)
	assertHTMLPage(t, resp, body, http.StatusNotFound, "This link is no longer available")
}

func TestConcurrentPostsOnAOneDownloadConfirmLinkGrantOne(t *testing.T) {
	h := MustHarness(t)
	data := testData(20000)
	l := h.MustObjectLink(t, "one.bin", data, map[string]any{"downloads": 1, "confirm": true})
	statuses := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			resp, body := h.Do(t, http.MethodPost, l.URL, nil)
			mu.Lock()
			defer mu.Unlock()
			statuses[resp.StatusCode]++
			if resp.StatusCode == http.StatusOK && string(body) != string(data) {
				t.Errorf("the granted POST got %d bytes, want the file", len(body))
			}
		})
	}
	wg.Wait()
	if statuses[200] != 1 || statuses[404] != 19 {
		t.Fatalf("statuses = %v, want 1 × 200 and 19 × 404", statuses)
	}
}

func TestConfirmSessionLinkPostRedirectsToTheNamedSessionURL(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "big file.iso", testData(1000), map[string]any{"confirm": true, "delivery": "session"})
	resp, _ := h.Do(t, http.MethodPost, l.URL, nil)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, h.Public.URL+"/s/") || !strings.HasSuffix(loc, "/big%20file.iso") {
		t.Fatalf("POST = %d Location %q, want 303 to the named session URL", resp.StatusCode, loc)
	}
	resp, body := h.Do(t, http.MethodGet, loc, nil)
	if resp.StatusCode != http.StatusOK || len(body) != 1000 {
		t.Fatalf("GET named session URL = %d (%d bytes)", resp.StatusCode, len(body))
	}
}

func TestErrorsAreHTMLForBrowsersAndJSONForTools(t *testing.T) {
	h := MustHarness(t)
	unknown := h.Public.URL + "/d/" + strings.Repeat("A", 43)
	for _, hdr := range []http.Header{
		browserNav,
		header("Accept", "text/html"),
		header("Sec-Fetch-Dest", "document"),
	} {
		resp, body := h.Do(t, http.MethodGet, unknown, hdr)
		assertHTMLPage(t, resp, body, http.StatusNotFound, "This link is no longer available", problem.Base+"link-unavailable", "<h1>")
	}
	for _, hdr := range []http.Header{
		nil,
		header("Accept", "*/*", "User-Agent", "curl/7.88.1"),
		header("Accept", "application/json, text/html;q=0.5"),
		header("Accept", "text/html;q=0"),
	} {
		resp, body := h.Do(t, http.MethodGet, unknown, hdr)
		mustProblem(t, resp, body, http.StatusNotFound, "link-unavailable")
	}
	// The admin listener always answers JSON.
	req, _ := http.NewRequest(http.MethodGet, h.Admin.URL+"/v1/links/x", nil)
	req.Header = browserNav.Clone()
	resp, body := mustDo(t, http.DefaultClient, req)
	mustProblem(t, resp, body, http.StatusUnauthorized, "unauthorized")
}

func TestPagesEscapeHostileFilenames(t *testing.T) {
	h := MustHarness(t)
	for _, name := range []string{`<script>alert(1)</script>"'.pdf`, "invoice\u202Efdp.exe", "x\u2066y\u200f.pdf"} {
		l := h.MustObjectLink(t, "f.bin", testData(10), map[string]any{"filename": name, "confirm": true})
		for _, hdr := range []http.Header{nil, header("User-Agent", slackbot)} {
			resp, body := h.Do(t, http.MethodGet, l.URL, hdr)
			assertHTMLPage(t, resp, body, http.StatusOK)
			page := string(body)
			if strings.Contains(page, "<script") || strings.Contains(page, `"'.pdf`) {
				t.Errorf("page shows %q unescaped:\n%s", name, page)
			}
			if strings.ContainsAny(page, "\u202E\u2066\u200f") {
				t.Errorf("page keeps a bidi control character of %q", name)
			}
		}
	}
}

func TestNamedURLsServeLikeTheBareOnes(t *testing.T) {
	h := MustHarness(t)
	data := testData(3000)
	l := h.MustObjectLink(t, "dir/Résumé final.pdf", data, nil)
	wantNamed := l.URL + "/" + url.PathEscape("Résumé final.pdf")
	if l.NamedURL != wantNamed {
		t.Fatalf("named_url = %q, want %q", l.NamedURL, wantNamed)
	}
	resp, body := h.Do(t, http.MethodGet, l.NamedURL, nil)
	if resp.StatusCode != http.StatusOK || string(body) != string(data) {
		t.Fatalf("GET named URL = %d (%d bytes)", resp.StatusCode, len(body))
	}
	// The name is ignored for authorization: any name works.
	resp, _ = h.Do(t, http.MethodHead, l.URL+"/other.txt", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HEAD with another name = %d", resp.StatusCode)
	}
	resp, _ = h.Do(t, http.MethodGet, l.NamedURL, header("Range", "bytes=0-1"))
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("Range on the named URL = %d, want 409", resp.StatusCode)
	}
	x := h.MustMint(t, l)
	if x.NamedSessionURL != x.SessionURL+"/"+url.PathEscape("Résumé final.pdf") {
		t.Fatalf("named_session_url = %q (session_url %q)", x.NamedSessionURL, x.SessionURL)
	}
	resp, body = h.Do(t, http.MethodGet, x.NamedSessionURL, header("Range", "bytes=10-19"))
	if resp.StatusCode != http.StatusPartialContent || string(body) != string(data[10:20]) {
		t.Fatalf("range on the named session URL = %d %q", resp.StatusCode, body)
	}
	// A GET of …/sessions is the named URL of a file called "sessions";
	// POST there mints.
	resp, _ = h.Do(t, http.MethodGet, l.URL+"/sessions", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET …/sessions = %d, want the file", resp.StatusCode)
	}
	resp, _ = h.Do(t, http.MethodDelete, l.NamedURL, nil)
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD, POST" {
		t.Fatalf("DELETE named URL = %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	resp, _ = h.Do(t, http.MethodPut, x.NamedSessionURL, nil)
	if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Fatalf("PUT named session URL = %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
}

func TestRouterAnswersCarryTheCommonHeaders(t *testing.T) {
	h := MustHarness(t)
	// mux cleans //d/… and /d/./… with a 301 of its own.
	for _, p := range []string{"//d/" + strings.Repeat("A", 43), "/d/./" + strings.Repeat("A", 43)} {
		req, _ := http.NewRequest(http.MethodGet, h.Public.URL+p, nil)
		req.URL.Opaque = p // keep the path as written
		resp, _ := mustDo(t, h.Client, req)
		assertPublicHeaders(t, p, resp)
		if resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s: %d without X-Request-Id", p, resp.StatusCode)
		}
	}
}
