package console_test

import (
	"bytes"
	"encoding/base64"
	"image"
	_ "image/png"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/qrcode"
	"golang.org/x/net/html"

	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/gateway/console"
)

// pagesOf signs in with the bootstrap token, makes a link and a key, and
// returns the path of every page of the console.
func pagesOf(t *testing.T, h *harness, c *client) []string {
	t.Helper()
	l := h.mustObjectAndLink(t, "docs/report.pdf")
	c.signIn(t, adminToken)
	var keys struct {
		Keys []struct {
			ID string `json:"id"`
		} `json:"keys"`
	}
	h.mustKey(t, "reader", "links:read")
	api(t, h.Admin[0].URL, adminToken, http.MethodGet, "/v1/keys", nil, http.StatusOK, &keys)
	var objs []string
	for _, a := range []string{"/console/objects"} {
		doc := parse(t, c.get(t, a, http.StatusOK))
		for _, n := range find(doc, func(n *html.Node) bool {
			v, _ := attr(n, "href")
			return strings.HasPrefix(v, "/console/objects/delete?")
		}) {
			v, _ := attr(n, "href")
			objs = append(objs, v)
		}
	}
	if len(objs) != 1 {
		t.Fatalf("the objects page links to %d deletions, want 1: %v", len(objs), objs)
	}
	return []string{
		"/console/links", "/console/links?state=active", "/console/links/new", "/console/links/" + l.ID,
		"/console/links/" + l.ID + "/revoke", "/console/links/" + l.ID + "/allowance",
		"/console/objects", objs[0], "/console/keys", "/console/keys/" + keys.Keys[0].ID + "/revoke", "/console/audit",
	}
}

// TestEveryPageCarriesTheCSPAndNoInlineScript asks every page, the
// sign-in page, an error page and a static file, and finds on each the
// Content-Security-Policy of SPEC §11 and the other headers, and in each
// page no script without src, no style element, no style or on…
// attribute, nothing 'unsafe-inline' would be needed for.
func TestEveryPageCarriesTheCSPAndNoInlineScript(t *testing.T) {
	h := mustHarness(t, 1)
	c := h.client(0)
	anon := h.client(0)
	check := func(r reply, page bool) {
		t.Helper()
		path := r.Request.URL.RequestURI()
		if got := r.Header.Get("Content-Security-Policy"); got != "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'" {
			t.Errorf("%s: Content-Security-Policy = %q", path, got)
		}
		if r.Header.Get("X-Content-Type-Options") != "nosniff" || r.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: nosniff and framing headers missing: %v", path, r.Header)
		}
		if !page {
			return
		}
		if cc := r.Header.Get("Cache-Control"); cc != "no-store" {
			t.Errorf("%s: Cache-Control = %q, want no-store", path, cc)
		}
		for _, bad := range inlineCode(parse(t, r)) {
			t.Errorf("%s: %s", path, bad)
		}
	}
	for _, p := range pagesOf(t, h, c) {
		check(c.get(t, p, http.StatusOK), true)
	}
	check(anon.get(t, "/console/sign-in", http.StatusOK), true)
	check(c.get(t, "/console/links/01a226c5-36c5-7cc5-9846-1e57c78d008f", http.StatusNotFound), true)
	check(c.get(t, "/console/static/console.css", http.StatusOK), false)
	check(anon.get(t, "/console/links", http.StatusSeeOther), false)
}

// inlineCode lists what in doc would need 'unsafe-inline': an inline
// script, a style element or attribute, an event handler attribute, a
// javascript: URL.
func inlineCode(doc *html.Node) []string {
	var out []string
	for _, n := range find(doc, func(*html.Node) bool { return true }) {
		if n.Data == "script" {
			if src, ok := attr(n, "src"); !ok || src == "" || n.FirstChild != nil {
				out = append(out, "an inline script")
			}
		}
		if n.Data == "style" {
			out = append(out, "a style element")
		}
		for _, a := range n.Attr {
			switch {
			case a.Key == "style":
				out = append(out, "a style attribute on <"+n.Data+">")
			case strings.HasPrefix(a.Key, "on"):
				out = append(out, "an event handler "+a.Key+" on <"+n.Data+">")
			case (a.Key == "href" || a.Key == "src" || a.Key == "action") && strings.HasPrefix(strings.ToLower(strings.TrimSpace(a.Val)), "javascript:"):
				out = append(out, "a javascript: URL")
			}
		}
	}
	return out
}

// TestNoTemplateHasInlineScriptOrStyle parses every template file as HTML
// (its actions left as text) and finds no inline script, style element,
// style or event handler attribute: the CSP admits none.
func TestNoTemplateHasInlineScriptOrStyle(t *testing.T) {
	files, err := filepath.Glob("templates/*.html")
	if err != nil || len(files) < 10 {
		t.Fatalf("templates: %v, %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := html.Parse(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, bad := range inlineCode(doc) {
			t.Errorf("%s: %s", f, bad)
		}
		if bytes.Contains(b, []byte("style=")) || bytes.Contains(b, []byte("<style")) {
			t.Errorf("%s: has style= or <style", f)
		}
	}
	// The scripts the pages load are files of static/, served with the
	// CSP like every console answer.
	scripts := 0
	err = fs.WalkDir(os.DirFS("static"), ".", func(p string, d fs.DirEntry, err error) error {
		if strings.HasSuffix(p, ".js") {
			scripts++
		}
		return err
	})
	if err != nil || scripts != 3 {
		t.Errorf("static/ has %d scripts (%v), want console.js, upload.js and tus.min.js", scripts, err)
	}
}

// TestTheSessionCookieIsHttpOnlyStrictAndForTheConsoleOnly signs in over
// http and over https and reads the cookie's attributes (SPEC §11).
func TestTheSessionCookieIsHttpOnlyStrictAndForTheConsoleOnly(t *testing.T) {
	h := mustHarness(t, 1)
	ck := h.client(0).signIn(t, adminToken)
	if !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/console/" || ck.Secure {
		t.Errorf("cookie over http = %+v, want HttpOnly, SameSite=Strict, Path=/console/, not Secure", ck)
	}
	if ck.MaxAge != 12*3600 || len(ck.Value) != 43 {
		t.Errorf("cookie Max-Age %d, value of %d characters; want 12 h and a 43-character secret", ck.MaxAge, len(ck.Value))
	}
	if strings.Contains(h.Logs.String(), ck.Value) {
		t.Error("the session's secret is in the log")
	}
	srv := httptest.NewTLSServer(h.Admin[0].Config.Handler)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/console/sign-in", strings.NewReader(url.Values{"key": {adminToken}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	cl := srv.Client()
	cl.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var secure *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == console.CookieName {
			secure = c
		}
	}
	if secure == nil || !secure.Secure || !secure.HttpOnly || secure.SameSite != http.SameSiteStrictMode {
		t.Errorf("cookie over https = %+v, want Secure, HttpOnly, SameSite=Strict", secure)
	}
}

// TestASignOutEndsTheSessionOnEveryProcess signs in on one gateway, uses
// the session on a second sharing the ledger, signs out on the first, and
// finds the second refusing the cookie: sent to sign in for a page, 401
// for a form.
func TestASignOutEndsTheSessionOnEveryProcess(t *testing.T) {
	h := mustHarness(t, 2)
	l := h.mustObjectAndLink(t, "a.txt")
	one, two := h.client(0), h.client(1)
	one.signIn(t, adminToken)
	two.cookie = one.cookie
	two.get(t, "/console/links/"+l.ID, http.StatusOK)
	r := one.post(t, "/console/sign-out", url.Values{}, http.StatusSeeOther)
	if loc := r.Header.Get("Location"); loc != "/console/sign-in" {
		t.Errorf("sign-out goes to %q, want /console/sign-in", loc)
	}
	if cleared := r.Cookies(); len(cleared) != 1 || cleared[0].MaxAge >= 0 {
		t.Errorf("sign-out cookies = %v, want the session's cleared", cleared)
	}
	r = two.get(t, "/console/links/"+l.ID, http.StatusSeeOther)
	if loc := r.Header.Get("Location"); loc != "/console/sign-in?next="+url.QueryEscape("/console/links/"+l.ID) {
		t.Errorf("the other process sends a signed-out page to %q", loc)
	}
	two.post(t, "/console/links/"+l.ID+"/revoke", url.Values{}, http.StatusUnauthorized)
	var st struct {
		RevokedAt *string `json:"revoked_at"`
	}
	api(t, h.Admin[1].URL, adminToken, http.MethodGet, "/v1/links/"+l.ID, nil, http.StatusOK, &st)
	if st.RevokedAt != nil {
		t.Error("a signed-out session's form revoked the link")
	}
}

// TestAnIdleOrOldSessionIsSentToSignIn: an hour without a request ends a
// session, and so do 12 hours however busy (the ledger's clock).
func TestAnIdleOrOldSessionIsSentToSignIn(t *testing.T) {
	h := mustHarness(t, 1)
	c := h.client(0)
	c.signIn(t, adminToken)
	c.get(t, "/console/links", http.StatusOK)
	h.Clock.Advance(59 * time.Minute)
	c.get(t, "/console/links", http.StatusOK)
	h.Clock.Advance(time.Hour)
	r := c.get(t, "/console/links", http.StatusSeeOther)
	if !strings.HasPrefix(r.Header.Get("Location"), "/console/sign-in?next=") {
		t.Errorf("an idle session's page goes to %q", r.Header.Get("Location"))
	}
	c.signIn(t, adminToken)
	for range 13 {
		h.Clock.Advance(55 * time.Minute)
		c.get(t, "/console/links", http.StatusOK)
	}
	h.Clock.Advance(6 * time.Minute) // 12 h 1 min after sign-in, 6 min after the last request
	c.get(t, "/console/links", http.StatusSeeOther)
	c.post(t, "/console/keys", url.Values{"name": {"late"}, "scope": {"links:read"}}, http.StatusUnauthorized)
}

// TestScopesHideControlsAndTheServerRefusesThemAnyway: a links:read key
// sees the links and a link, with no control to create, revoke, top up,
// delete or manage keys; the same forms posted with its cookie are 403
// insufficient-scope and change nothing. A links:write key sees them.
func TestScopesHideControlsAndTheServerRefusesThemAnyway(t *testing.T) {
	h := mustHarness(t, 1)
	l := h.mustObjectAndLink(t, "b.txt")
	reader := h.client(0)
	reader.signIn(t, h.mustKey(t, "reader", "links:read"))
	for _, p := range []string{"/console/links", "/console/links/" + l.ID} {
		for _, ctl := range controls(parse(t, reader.get(t, p, http.StatusOK))) {
			for _, banned := range []string{"/console/links/new", "/revoke", "/allowance", "/console/objects", "/console/keys", "/console/audit"} {
				if strings.Contains(ctl, banned) {
					t.Errorf("%s shows a links:read key the control %s", p, ctl)
				}
			}
		}
	}
	for _, f := range []struct {
		path string
		form url.Values
	}{
		{"/console/links/" + l.ID + "/revoke", url.Values{}},
		{"/console/links/" + l.ID + "/allowance", url.Values{"add": {"5"}}},
		{"/console/links/new", url.Values{"object_key": {"b.txt"}, "downloads": {"1"}, "expires_value": {"1"}, "expires_unit": {"days"}}},
		{"/console/objects/delete", url.Values{"key": {"b.txt"}, "version_id": {"x"}, "force": {"true"}}},
		{"/console/keys", url.Values{"name": {"more"}, "scope": {"links:read"}}},
	} {
		r := reader.post(t, f.path, f.form, http.StatusForbidden)
		if !strings.Contains(string(r.Body), "https://dlgate.dev/problems/insufficient-scope") {
			t.Errorf("POST %s: the 403 page does not name insufficient-scope: %s", f.path, r.Body)
		}
		// A script (no Accept: text/html) gets the problem as JSON.
		r = reader.do(t, http.MethodPost, f.path, f.form, "Accept", "application/json")
		if ct := r.Header.Get("Content-Type"); r.StatusCode != http.StatusForbidden || ct != "application/problem+json" ||
			!strings.Contains(string(r.Body), `"type":"https://dlgate.dev/problems/insufficient-scope"`) {
			t.Errorf("POST %s as a script = %s (%s), want 403 insufficient-scope problem+json", f.path, r, ct)
		}
	}
	var st struct {
		Remaining int     `json:"remaining"`
		RevokedAt *string `json:"revoked_at"`
	}
	api(t, h.Admin[0].URL, adminToken, http.MethodGet, "/v1/links/"+l.ID, nil, http.StatusOK, &st)
	if st.RevokedAt != nil || st.Remaining != 2 {
		t.Errorf("after the refused forms the link is %+v, want unchanged", st)
	}

	writer := h.client(0)
	writer.signIn(t, h.mustKey(t, "writer", "links:read", "links:write"))
	ctls := controls(parse(t, writer.get(t, "/console/links/"+l.ID, http.StatusOK)))
	for _, want := range []string{"GET /console/links/new", "GET /console/links/" + l.ID + "/revoke", "GET /console/links/" + l.ID + "/allowance"} {
		if !slices.Contains(ctls, want) {
			t.Errorf("a links:write key's link page lacks %s: %v", want, ctls)
		}
	}
	for _, banned := range []string{"GET /console/keys", "GET /console/objects", "GET /console/audit"} {
		if slices.Contains(ctls, banned) {
			t.Errorf("a links:read+write key's page shows %s", banned)
		}
	}
}

// TestACrossOriginFormIsRefused: a POST another site's page makes (its
// browser says Sec-Fetch-Site: cross-site, or only an Origin of another
// host) is 403 and changes nothing, with the session's cookie or without.
func TestACrossOriginFormIsRefused(t *testing.T) {
	h := mustHarness(t, 1)
	l := h.mustObjectAndLink(t, "c.txt")
	c := h.client(0)
	c.signIn(t, adminToken)
	for _, hdr := range [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
		{"Sec-Fetch-Site", "", "Origin", "http://evil.example"},
	} {
		r := c.do(t, http.MethodPost, "/console/links/"+l.ID+"/revoke", url.Values{}, hdr...)
		if r.StatusCode != http.StatusForbidden || !strings.Contains(string(r.Body), "cross-origin-request") {
			t.Errorf("POST with %v = %s, want 403 cross-origin-request", hdr, r)
		}
		if got := r.Header.Get("Content-Security-Policy"); got != console.CSP {
			t.Errorf("the refusal's CSP = %q", got)
		}
		r = c.do(t, http.MethodPost, "/console/sign-in", url.Values{"key": {adminToken}}, hdr...)
		if r.StatusCode != http.StatusForbidden || len(r.Cookies()) != 0 {
			t.Errorf("a cross-origin sign-in = %s with cookies %v, want 403 and none", r, r.Cookies())
		}
	}
	var st struct {
		RevokedAt *string `json:"revoked_at"`
	}
	api(t, h.Admin[0].URL, adminToken, http.MethodGet, "/v1/links/"+l.ID, nil, http.StatusOK, &st)
	if st.RevokedAt != nil {
		t.Error("a cross-origin form revoked the link")
	}
	c.post(t, "/console/links/"+l.ID+"/revoke", url.Values{}, http.StatusSeeOther) // same origin: done
}

// TestSignInFailuresCountOnTheAdminThrottle: wrong keys at the sign-in
// form count toward the admin API's one penalty of the address: the 21st
// starts it, and then the sign-in form, the console's pages and the API
// are all 429, even with the right key.
func TestSignInFailuresCountOnTheAdminThrottle(t *testing.T) {
	h := mustHarness(t, 1)
	c := h.client(0)
	for i := range 20 {
		r := c.post(t, "/console/sign-in", url.Values{"key": {"dlk_wrong" + strings.Repeat("x", i)}}, http.StatusUnauthorized)
		if !strings.Contains(string(r.Body), "not one this gateway knows") {
			t.Fatalf("failure %d: the page says %s", i+1, r.Body)
		}
	}
	c.post(t, "/console/sign-in", url.Values{"key": {"wrong"}}, http.StatusUnauthorized)
	r := c.post(t, "/console/sign-in", url.Values{"key": {adminToken}}, http.StatusTooManyRequests)
	if r.Header.Get("Retry-After") == "" || len(r.Cookies()) != 0 {
		t.Errorf("throttled sign-in: Retry-After %q, cookies %v", r.Header.Get("Retry-After"), r.Cookies())
	}
	api(t, h.Admin[0].URL, adminToken, http.MethodGet, "/v1/links", nil, http.StatusTooManyRequests, nil)
	if !strings.Contains(h.Logs.String(), "admin authentication throttled") {
		t.Error("the penalty was not logged")
	}
}

// TestTheLinkPagesQRCodesAreItsURLs decodes the two QR codes of a link's
// page and finds its URL and its named URL.
func TestTheLinkPagesQRCodesAreItsURLs(t *testing.T) {
	h := mustHarness(t, 1)
	l := h.mustObjectAndLink(t, "reports/Quarterly report.pdf")
	c := h.client(0)
	c.signIn(t, adminToken)
	doc := parse(t, c.get(t, "/console/links/"+l.ID, http.StatusOK))
	var got []string
	for _, img := range find(doc, func(n *html.Node) bool { return n.Data == "img" }) {
		src, _ := attr(img, "src")
		data, ok := strings.CutPrefix(src, "data:image/png;base64,")
		if !ok {
			t.Fatalf("a QR code's src is %.40q…, want a data: PNG", src)
		}
		png, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			t.Fatal(err)
		}
		im, _, err := image.Decode(bytes.NewReader(png))
		if err != nil {
			t.Fatal(err)
		}
		bmp, err := gozxing.NewBinaryBitmapFromImage(im)
		if err != nil {
			t.Fatal(err)
		}
		res, err := qrcode.NewQRCodeReader().Decode(bmp, nil)
		if err != nil {
			t.Fatalf("decoding the QR code: %v", err)
		}
		got = append(got, res.GetText())
	}
	if !slices.Equal(got, []string{l.URL, l.NamedURL}) {
		t.Errorf("the QR codes say %q, want the URL and the named URL %q", got, []string{l.URL, l.NamedURL})
	}
	if v, _ := attr(byID(doc, "url"), "value"); v != l.URL {
		t.Errorf("the copy field holds %q, want %q", v, l.URL)
	}
}

// TestTheConsoleSaysWhatTheAPISays: a form the admin API would refuse is
// shown again with the API's detail beside the field it is about; one it
// takes makes the link, audited as the session's key.
func TestTheConsoleSaysWhatTheAPISays(t *testing.T) {
	h := mustHarness(t, 1)
	api(t, h.Admin[0].URL, adminToken, http.MethodPut, "/v1/objects/d.txt", []byte("d"), http.StatusCreated, nil)
	c := h.client(0)
	c.signIn(t, h.mustKey(t, "maker", "links:read", "links:write", "objects:read", "audit:read"))
	form := url.Values{"object_key": {"d.txt"}, "downloads": {"0"}, "expires_value": {"2"}, "expires_unit": {"hours"},
		"delivery": {"stream"}, "session_max_concurrency": {"65"}, "idempotency_key": {"console-test-1"}}
	var problem struct {
		Detail string `json:"detail"`
	}
	api(t, h.Admin[0].URL, adminToken, http.MethodPost, "/v1/links", map[string]any{"object": map[string]string{"key": "d.txt"},
		"downloads": 0, "expires_in": 7200}, http.StatusBadRequest, &problem)
	doc := parse(t, c.post(t, "/console/links/new", form, http.StatusBadRequest))
	if e := byID(doc, "downloads-error"); e == nil || text(e) != problem.Detail {
		t.Errorf("beside downloads: %v, want the API's %q", e, problem.Detail)
	}
	if v, _ := attr(byID(doc, "session_max_concurrency"), "value"); v != "65" {
		t.Errorf("the form did not keep what was typed: max concurrency %q", v)
	}
	form.Set("downloads", "1")
	doc = parse(t, c.post(t, "/console/links/new", form, http.StatusBadRequest))
	if e := byID(doc, "session_max_concurrency-error"); e == nil || text(e) != "session.max_concurrency must be between 0 (default) and 64." {
		t.Errorf("beside max concurrency: %v", e)
	}
	form.Set("session_max_concurrency", "")
	form.Set("retries", "11")
	doc = parse(t, c.post(t, "/console/links/new", form, http.StatusBadRequest))
	if e := byID(doc, "retries-error"); e == nil || text(e) != "retries must be between 0 and 10." {
		t.Errorf("beside retries: %v", e)
	}
	form.Set("retries", "1")
	r := c.post(t, "/console/links/new", form, http.StatusSeeOther)
	loc := r.Header.Get("Location")
	id := strings.TrimSuffix(strings.TrimPrefix(loc, "/console/links/"), "?created=1")
	if again := c.post(t, "/console/links/new", form, http.StatusSeeOther); again.Header.Get("Location") != loc {
		t.Errorf("the same form again made %s, want the same link %s", again.Header.Get("Location"), loc)
	}
	doc = parse(t, c.get(t, loc, http.StatusOK))
	if n := byID(doc, "remaining"); n == nil || text(n) != "1 of 1 downloads" {
		t.Errorf("the new link's page says %v", n)
	}
	var made struct {
		Retries int `json:"retries"`
	}
	api(t, h.Admin[0].URL, adminToken, http.MethodGet, "/v1/links/"+id, nil, http.StatusOK, &made)
	if made.Retries != 1 {
		t.Errorf("the console's link has retries %d, want the form's 1", made.Retries)
	}
	var audit struct {
		Entries []struct {
			Action string `json:"action"`
			Actor  struct {
				KeyName string `json:"key_name"`
			} `json:"actor"`
		} `json:"entries"`
	}
	api(t, h.Admin[0].URL, adminToken, http.MethodGet, "/v1/audit?target_id="+id, nil, http.StatusOK, &audit)
	if len(audit.Entries) != 1 || audit.Entries[0].Action != "link.created" || audit.Entries[0].Actor.KeyName != "maker" {
		t.Errorf("audit of the console's link = %+v, want one link.created by maker", audit.Entries)
	}
	actions := text(byID(doc, "audit"))
	if !strings.Contains(actions, "link.created") || !strings.Contains(actions, "maker") {
		t.Errorf("the link page's audit table says %q", actions)
	}
}

// TestTheConsoleCanBeTurnedOff: with GATEWAY_CONSOLE=false nothing is
// served under /console/.
func TestTheConsoleCanBeTurnedOff(t *testing.T) {
	h := mustHarness(t, 1, func(o *gateway.Options) { o.NoConsole = true })
	for _, p := range []string{"/console/", "/console/sign-in", "/console/static/console.css", "/console/links"} {
		if r := h.client(0).do(t, http.MethodGet, p, nil); r.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s with the console off = %s, want 404", p, r)
		}
	}
	api(t, h.Admin[0].URL, adminToken, http.MethodGet, "/v1/links", nil, http.StatusOK, nil)
}

// TestStaticFilesAreVersionedAndTheVendoredClientKeepsItsLicence: the
// pages name each static file with its content's hash, which may be
// cached for good; tus-js-client is there with its licence and version.
func TestStaticFilesAreVersionedAndTheVendoredClientKeepsItsLicence(t *testing.T) {
	h := mustHarness(t, 1)
	c := h.client(0)
	c.signIn(t, adminToken)
	doc := parse(t, c.get(t, "/console/links/new", http.StatusOK))
	var srcs []string
	for _, s := range find(doc, func(n *html.Node) bool { return n.Data == "script" || n.Data == "link" }) {
		v, ok := attr(s, "src")
		if !ok {
			v, _ = attr(s, "href")
		}
		srcs = append(srcs, v)
	}
	if len(srcs) != 4 {
		t.Fatalf("the new-link page loads %v, want the style sheet and three scripts", srcs)
	}
	for _, s := range srcs {
		r := c.get(t, s, http.StatusOK)
		if cc := r.Header.Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
			t.Errorf("%s: Cache-Control %q", s, cc)
		}
		path, _, _ := strings.Cut(s, "?")
		if r := c.get(t, path+"?v=old", http.StatusOK); r.Header.Get("Cache-Control") != "no-cache" {
			t.Errorf("%s with another version: Cache-Control %q, want no-cache", path, r.Header.Get("Cache-Control"))
		}
	}
	for _, f := range []string{"tus-js-client/LICENSE", "tus-js-client/VERSION"} {
		r := c.get(t, "/console/static/"+f, http.StatusOK)
		if !strings.Contains(string(r.Body), map[bool]string{true: "MIT", false: "4.3.1"}[strings.HasSuffix(f, "LICENSE")]) {
			t.Errorf("%s: %s", f, r.Body)
		}
	}
}
