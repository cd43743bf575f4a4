package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/storage"
)

// rawDo sends one request with target written exactly as given (no
// client cleans or re-escapes it) to the server at base, and reads the
// answer.
func rawDo(tb testing.TB, base, method, target string, header http.Header, body string) (*http.Response, []byte) {
	tb.Helper()
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	var b strings.Builder
	b.WriteString(method + " " + target + " HTTP/1.1\r\nHost: " + u.Host + "\r\nConnection: close\r\n")
	for k, vs := range header {
		for _, v := range vs {
			b.WriteString(k + ": " + v + "\r\n")
		}
	}
	if body != "" || method == http.MethodPut || method == http.MethodPost {
		b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	}
	b.WriteString("\r\n" + body)
	if _, err := io.WriteString(conn, b.String()); err != nil {
		tb.Fatal(err)
	}
	req, _ := http.NewRequest(method, base, nil) // for mustProblem's messages
	req.URL.Path = target
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, target, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: reading body: %v", method, target, err)
	}
	return resp, got
}

var adminAuth = http.Header{"Authorization": {"Bearer " + testAdminToken}}

// A POST to a link path that is not clean is refused, never redirected
// (a 301 or 302 is repeated as a GET, which would claim the link as the
// named URL of a file called "sessions") and never claims.
func TestUncleanPublicPostIsRefusedAndClaimsNothing(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "sessions-test.bin", testData(1000), map[string]any{"downloads": 2})
	tok := l.Token
	for _, target := range []string{
		"//d/" + tok + "/sessions",
		"/d//" + tok + "/sessions",
		"/d/" + tok + "//sessions",
		"/d/./" + tok + "/sessions",
		"/d/" + tok + "/./sessions",
		"/d/" + tok + "/x/../sessions",
		"/d/" + tok + "/x/%2e%2e/sessions", // the public router matches the decoded path
		"/d/" + tok + "/x/%2E%2E/sessions",
		"/d/" + tok + "%2F%2Fsessions",
		"//d/" + tok,
		"/d/" + tok + "/.",
		"/d/x/../" + tok,
	} {
		resp, body := rawDo(t, h.Public.URL, http.MethodPost, target, nil, "")
		p := mustProblem(t, resp, body, http.StatusBadRequest, "non-canonical-path")
		assertPublicHeaders(t, "POST "+target, resp)
		if id := resp.Header.Get("X-Request-Id"); id == "" || p.RequestID != id {
			t.Errorf("POST %s: X-Request-Id %q, problem request_id %q", target, id, p.RequestID)
		}
		if resp.Header.Get("Location") != "" {
			t.Errorf("POST %s: Location %q on a refusal", target, resp.Header.Get("Location"))
		}
		if strings.Contains(string(body), tok) {
			t.Errorf("POST %s: the body names the token: %s", target, body)
		}
	}
	// A person's browser gets the refusal as a page, with the headers.
	resp, body := rawDo(t, h.Public.URL, http.MethodPost, "//d/"+tok+"/sessions", header("Accept", "text/html"), "")
	if resp.StatusCode != http.StatusBadRequest || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		strings.Contains(string(body), tok) {
		t.Errorf("browser POST //d/…/sessions = %d %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	assertPublicHeaders(t, "browser POST", resp)
	if got := h.MustShowLink(t, l.ID); got.Remaining != 2 || got.Grants["granted"] != 0 {
		t.Fatalf("after the refused POSTs: remaining %d, grants %v; want 2 and none", got.Remaining, got.Grants)
	}
	// The clean path still mints.
	h.MustMint(t, l)
}

// GET and HEAD of an unclean path are sent to the cleaned path with a 308
// (method kept), which carries the listener's headers and request id and
// claims nothing itself.
func TestUncleanGetIsRedirectedWith308(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "redirect.bin", testData(100), map[string]any{"downloads": 1})
	tok := l.Token
	for _, c := range []struct{ method, target, location string }{
		{"GET", "//d/" + tok, "/d/" + tok},
		{"HEAD", "//d/" + tok, "/d/" + tok},
		{"GET", "/d/./" + tok, "/d/" + tok},
		{"GET", "/d/" + tok + "//redirect.bin", "/d/" + tok + "/redirect.bin"},
		{"GET", "/d/" + tok + "/x/../redirect.bin?a=1&b=%20", "/d/" + tok + "/redirect.bin?a=1&b=%20"},
		{"GET", "/d/" + tok + "/x/%2e%2e/y%20z", "/d/" + tok + "/y%20z"},
		{"GET", "/d/" + tok + "/dir//", "/d/" + tok + "/dir/"},
		// Never a Location that names another host.
		{"GET", "//evil.example/x/..", "/evil.example"},
		{"GET", "/..//evil.example", "/evil.example"},
		{"GET", "/./\\evil.example", "/%5Cevil.example"},
	} {
		resp, body := rawDo(t, h.Public.URL, c.method, c.target, nil, "")
		if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != c.location {
			t.Errorf("%s %s = %d Location %q, want 308 %q", c.method, c.target, resp.StatusCode, resp.Header.Get("Location"), c.location)
		}
		if len(body) != 0 {
			t.Errorf("%s %s: body %q", c.method, c.target, body)
		}
		assertPublicHeaders(t, c.method+" "+c.target, resp)
		if resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s %s: no X-Request-Id", c.method, c.target)
		}
	}
	if got := h.MustShowLink(t, l.ID); got.Remaining != 1 {
		t.Fatalf("redirects claimed: remaining %d", got.Remaining)
	}
	// The admin listener cleans GETs the same way, on its escaped path.
	resp, _ := rawDo(t, h.Admin.URL, "GET", "//v1/links?limit=1", adminAuth, "")
	if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != "/v1/links?limit=1" {
		t.Errorf("admin GET //v1/links = %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	resp, _ = rawDo(t, h.Admin.URL, "GET", "/v1/links/"+l.ID+"/../"+l.ID, adminAuth, "")
	if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != "/v1/links/"+l.ID {
		t.Errorf("admin GET /v1/links/…/../… = %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// Object keys with an empty, "." or ".." segment, raw or percent-encoded,
// are 400 invalid-key (docs/api.md) on PUT and DELETE, never stored or
// deleted under their cleaned form.
func TestObjectKeysWithEmptyOrDotSegmentsAreInvalid(t *testing.T) {
	h := MustHarness(t)
	b := h.MustPutObject(t, "b", "text/plain", []byte("the real b"))
	ab := h.MustPutObject(t, "a/b", "text/plain", []byte("the real a/b"))
	bad := []string{
		"a//b", "a%2F%2Fb", "a/%2F/b", "a%2f%2fb",
		"a/../b", "a/%2e%2e/b", "a/%2E%2E/b", "a/.%2e/b", "a%2F..%2Fb", "..%2Fb",
		"a/./b", "a/%2e/b", "./b", "%2e/b", "a/..", "a/%2e%2e",
		"dir/", "dir%2F", // an empty last segment, as client.checkKey refuses it
	}
	for _, key := range bad {
		resp, body := rawDo(t, h.Admin.URL, http.MethodPut, "/v1/objects/"+key, adminAuth, "evil")
		p := mustProblem(t, resp, body, http.StatusBadRequest, "invalid-key")
		if !strings.Contains(p.Detail, "bytes") || !strings.Contains(p.Detail, `"//"`) {
			t.Errorf("PUT %s: detail %q does not state the rules", key, p.Detail)
		}
		if resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("PUT %s: no X-Request-Id", key)
		}
		resp, body = rawDo(t, h.Admin.URL, http.MethodDelete, "/v1/objects/"+key+"?version_id="+url.QueryEscape(b.VersionID), adminAuth, "")
		mustProblem(t, resp, body, http.StatusBadRequest, "invalid-key")
		resp, body = rawDo(t, h.Admin.URL, http.MethodDelete, "/v1/objects/"+key+"?version_id="+url.QueryEscape(ab.VersionID), adminAuth, "")
		mustProblem(t, resp, body, http.StatusBadRequest, "invalid-key")
		// Without the token: 401 first, as on every admin route.
		resp, body = rawDo(t, h.Admin.URL, http.MethodPut, "/v1/objects/"+key, nil, "evil")
		mustProblem(t, resp, body, http.StatusUnauthorized, "unauthorized")
	}
	for _, v := range []objectJSON{b, ab} {
		got, err := h.Store.Stat(context.Background(), storage.Ref{Key: v.Key})
		if err != nil || got.VersionID != v.VersionID {
			t.Errorf("%s is now %+v (%v); want the version stored before, untouched", v.Key, got, err)
		}
	}
	for _, key := range []string{"a//b", "a/../b", "a/./b"} {
		if _, err := h.Store.Stat(context.Background(), storage.Ref{Key: key}); !errors.Is(err, storage.ErrNotFound) && !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("%q was stored: %v", key, err)
		}
	}
}

// Other admin POSTs and DELETEs on unclean paths are refused before any
// route runs: nothing is created, revoked or deleted.
func TestUncleanAdminWritesAreRefused(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "admin.bin", testData(100), nil)
	s := h.MustMint(t, l)
	body := `{"object":{"key":"admin.bin"},"downloads":1,"expires_in":60}`
	for _, c := range []struct{ method, target, body string }{
		{"POST", "//v1/links", body},
		{"POST", "/v1/./links", body},
		{"POST", "/v1/links/" + l.ID + "//revoke", ""},
		{"POST", "/v1/links/x/../" + l.ID + "/revoke", ""},
		{"POST", "/v1/links/" + l.ID + "/allowance/.", `{"add":1}`},
		{"DELETE", "/v1//sessions/" + s.SessionID, ""},
		{"DELETE", "/v1/sessions/x/../" + s.SessionID, ""},
	} {
		resp, got := rawDo(t, h.Admin.URL, c.method, c.target, adminAuth, c.body)
		mustProblem(t, resp, got, http.StatusBadRequest, "non-canonical-path")
		if resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s %s: no X-Request-Id", c.method, c.target)
		}
	}
	got := h.MustShowLink(t, l.ID)
	if got.RevokedAt != nil || got.Downloads != 5 {
		t.Errorf("link after refused writes: revoked %v, downloads %d", got.RevokedAt, got.Downloads)
	}
	if x := h.MustSession(t, s.SessionID); x.RevokedAt != nil {
		t.Error("the session was revoked by a refused DELETE")
	}
	page, err := h.DB.LinkList(context.Background(), ledger.ListQuery{Limit: 10})
	if err != nil || len(page.Links) != 1 {
		t.Errorf("links after refused POSTs: %d (%v), want 1", len(page.Links), err)
	}
}

// OPTIONS * is the gateway's own answer (204, Allow the listener's
// methods) with the listener's headers, not net/http's built-in one.
func TestOptionsAsteriskIsTheGatewaysAnswer(t *testing.T) {
	h := MustHarness(t)
	for _, c := range []struct {
		name  string
		h     http.Handler
		allow string
	}{
		{"public", h.Server.PublicHandler(), "GET, HEAD, POST"},
		{"admin", h.Server.AdminHandler(), "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"}, // PATCH and OPTIONS: tus at /v1/uploads/
	} {
		rec := httptest.NewRecorder()
		c.h.ServeHTTP(rec, httptest.NewRequest(http.MethodOptions, "*", nil))
		resp := rec.Result()
		if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Allow") != c.allow || rec.Body.Len() != 0 {
			t.Errorf("%s OPTIONS * = %d Allow %q body %q, want 204 %q", c.name, resp.StatusCode, resp.Header.Get("Allow"), rec.Body, c.allow)
		}
		if resp.Header.Get("X-Request-Id") == "" {
			t.Errorf("%s OPTIONS *: no X-Request-Id", c.name)
		}
		if c.name == "public" {
			assertPublicHeaders(t, "OPTIONS *", resp)
		}
		// Another method with target "*" is no path.
		rec = httptest.NewRecorder()
		c.h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "*", nil))
		if rec.Code != http.StatusBadRequest || rec.Header().Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s GET * = %d %q", c.name, rec.Code, rec.Header().Get("Content-Type"))
		}
	}
}
