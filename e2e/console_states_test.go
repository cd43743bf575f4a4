package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The console's other states and the changes it makes, in a real
// browser, each checked against what the gateway guarantees afterwards:
// the sign-in, new-link, filter and key forms showing the API's refusals
// beside their fields; error pages; a links listing of more than one
// page; a session link's page with its live session and its webhook
// deliveries; a session, a pinned object (refused, then forced), an
// unpinned object and a key removed from the console; the landing of
// keys that may not read links. axe-core checks each state at 375 and
// 1440 px and each is photographed (docs/screenshots with
// DLGATE_SCREENSHOTS=1).

// consoleForm posts form to the console's path with cookie as the
// console's own page would (same origin, a page wanted).
func consoleForm(t *testing.T, base, path, cookie string, form url.Values) *Reply {
	t.Helper()
	r, err := fetch(http.MethodPost, base+path, []byte(form.Encode()), "Cookie", cookie, "Sec-Fetch-Site", "same-origin",
		"Content-Type", "application/x-www-form-urlencoded", "Accept", "text/html")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// consolePage asks for the console's page at path with cookie, as a
// browser's navigation would.
func consolePage(t *testing.T, base, path, cookie string) *Reply {
	t.Helper()
	r, err := fetch(http.MethodGet, base+path, nil, "Cookie", cookie, "Sec-Fetch-Site", "same-origin", "Accept", "text/html")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// consoleSignIn signs in with key over plain HTTP and returns the
// session's cookie (name=value).
func consoleSignIn(t *testing.T, base, key string) string {
	t.Helper()
	r := consoleForm(t, base, "/console/sign-in", "", url.Values{"key": {key}})
	if r.Status != http.StatusSeeOther {
		t.Fatalf("sign-in = %v, want 303", r)
	}
	for _, c := range r.Header.Values("Set-Cookie") {
		if v, ok := strings.CutPrefix(c, "dlgate_console="); ok {
			v, _, _ = strings.Cut(v, ";")
			if v != "" {
				return "dlgate_console=" + v
			}
		}
	}
	t.Fatalf("sign-in set no session cookie: %v", r.Header.Values("Set-Cookie"))
	return ""
}

// auditEntry is what the tests read of GET /v1/audit.
type auditEntry struct {
	Action string `json:"action"`
	Actor  struct {
		KeyID   string `json:"key_id"`
		KeyName string `json:"key_name"`
	} `json:"actor"`
	Target struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	} `json:"target"`
	Details json.RawMessage `json:"details"`
}

// mustAudit reads the audit entries of query (GET /v1/audit?query).
func (a *Admin) mustAudit(t *testing.T, query string) []auditEntry {
	t.Helper()
	var out struct {
		Entries []auditEntry `json:"entries"`
	}
	a.call(t, http.MethodGet, "/v1/audit?"+query, nil, http.StatusOK, &out)
	return out.Entries
}

// checkAuditedBy checks that the audit has exactly one entry of action on
// target, written with the key id as actor.
func (a *Admin) checkAuditedBy(t *testing.T, action, target, keyID string) {
	t.Helper()
	var got []string
	n := 0
	for _, e := range a.mustAudit(t, url.Values{"action": {action}, "target_id": {target}}.Encode()) {
		got = append(got, e.Actor.KeyID)
		if e.Actor.KeyID == keyID {
			n++
		}
	}
	if n != 1 || len(got) != 1 {
		t.Errorf("audit of %s on %s: actors %v, want one entry by %s", action, target, got, keyID)
	}
}

// checkFieldError checks in the browser that the field id is marked
// invalid and described by the paragraph that says want.
func (b *consoleBrowser) checkFieldError(t *testing.T, id, want string) {
	t.Helper()
	got := eval[map[string]string](t, b, fmt.Sprintf(`(() => {
		const e = document.getElementById(%q), by = e.getAttribute("aria-describedby");
		const d = by ? document.getElementById(by) : null;
		return {invalid: e.getAttribute("aria-invalid") || "", text: d ? d.textContent.trim() : ""};
	})()`, id))
	if got["invalid"] != "true" || got["text"] != want {
		t.Errorf("#%s: aria-invalid %q, described as %q; want true and %q", id, got["invalid"], got["text"], want)
	}
}

// rows is the text of the first cell of each row of the table sel.
func (b *consoleBrowser) rows(t *testing.T, sel string) []string {
	t.Helper()
	return eval[[]string](t, b, `[...document.querySelectorAll(`+"`"+sel+` tbody tr`+"`"+`)].map(r => r.cells[0].textContent.trim())`)
}

func TestConsoleStatesAndWhatTheyChange(t *testing.T) {
	t.Parallel()
	rv := mustStartReceiver(t)
	g := MustStartGateways(t, GatewaySpec{Name: "console-states", Env: map[string]string{
		"GATEWAY_DATA_DIR":       filepath.Join(t.TempDir(), "gateway-data"),
		"GATEWAY_ADMIN_TOKEN":    randomHex(24),
		"GATEWAY_WEBHOOK_URL":    rv.srv.URL + "/hooks",
		"GATEWAY_WEBHOOK_SECRET": rv.secret,
		"GATEWAY_SHUTDOWN_GRACE": "2s",
		"GATEWAY_LOG_LEVEL":      "debug",
	}})[0]
	admin := g.Admin()
	op := admin.MustCreateKey(t, "operator", 0, "links:read", "links:write", "objects:read", "objects:write",
		"objects:delete", "sessions:write", "audit:read", "keys:write")
	base := "http://" + g.AdminAddr
	b := newConsoleBrowser(t, base)

	// A wrong key: the form again, the field marked with the error.
	b.open(t, "/console/sign-in")
	b.run(t, 60*time.Second,
		chromedp.SendKeys(chromedp.ID("key"), "dlk_not-a-key-this-gateway-knows"),
		chromedp.Click(chromedp.CSS(`main form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("key-error")),
	)
	b.checkFieldError(t, "key", "That key is not one this gateway knows, or it was revoked or has expired.")
	b.inspect(t, "sign-in-error")
	b.signIn(t, op.Key)
	if loc := b.location(t); loc != base+"/console/links" {
		t.Errorf("the operator landed on %s, want the links", loc)
	}

	t.Run("NextPage", func(t *testing.T) {
		obj := admin.MustUpload(t, "console/many.txt", 1<<10)
		for range 51 {
			admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1})
		}
		var all struct {
			Links []struct {
				ID string `json:"id"`
			} `json:"links"`
		}
		admin.call(t, http.MethodGet, "/v1/links?limit=500", nil, http.StatusOK, &all)
		b.open(t, "/console/links")
		ids := func() []string {
			return eval[[]string](t, b, `[...document.querySelectorAll("#links tbody a")].map(a => a.getAttribute("href").split("/").pop())`)
		}
		first := ids()
		if len(first) != 50 {
			t.Fatalf("the first page shows %d links, want 50", len(first))
		}
		b.run(t, 60*time.Second, chromedp.Click(chromedp.ID("next-page")))
		b.waitFor(t, time.Minute, `location.search.includes("cursor=") && document.readyState === "complete"`)
		second := ids()
		if n := eval[int](t, b, `document.querySelectorAll("#next-page").length`); n != 0 {
			t.Error("the last page offers a next page")
		}
		got := append(slices.Clone(first), second...)
		want := make([]string, 0, len(all.Links))
		for _, l := range all.Links {
			want = append(want, l.ID)
		}
		if !slices.Equal(got, want) {
			t.Errorf("the two pages show %d links (%d then %d), want the %d of GET /v1/links newest first, each once",
				len(got), len(first), len(second), len(want))
		}
	})

	t.Run("RefusalsBesideTheirFields", func(t *testing.T) {
		admin.MustUpload(t, "console/form.txt", 1<<10)
		b.open(t, "/console/links/new")
		b.run(t, 60*time.Second,
			chromedp.SetValue(chromedp.ID("object_key"), "console/form.txt"),
			chromedp.SetValue(chromedp.ID("downloads"), "0"),
			chromedp.Click(chromedp.ID("create")),
			chromedp.WaitVisible(chromedp.ID("downloads-error")),
		)
		b.checkFieldError(t, "downloads", "downloads must be between 1 and 1000000.")
		b.inspect(t, "new-link-errors")

		if st := b.open(t, "/console/links?state=lost"); st != http.StatusBadRequest {
			t.Errorf("a bad state filter answers %d, want 400", st)
		}
		b.checkFieldError(t, "state", "state must be one of active, exhausted, expired, revoked.")
		b.inspect(t, "links-errors")

		b.open(t, "/console/keys")
		b.run(t, 60*time.Second,
			chromedp.SendKeys(chromedp.ID("name"), "no scope at all"),
			chromedp.Click(chromedp.ID("create-key")),
			chromedp.WaitVisible(chromedp.ID("scopes-error")),
		)
		if by := eval[string](t, b, `document.querySelector("fieldset").getAttribute("aria-describedby")`); by != "scopes-error" {
			t.Errorf("the scopes are described by %q, want scopes-error", by)
		}
		b.inspect(t, "keys-errors")

		if st := b.open(t, "/console/links/01912345-6789-7abc-8def-0123456789ab"); st != http.StatusNotFound {
			t.Errorf("an unknown link's page answers %d, want 404", st)
		}
		b.inspect(t, "error-404")
	})

	t.Run("ASessionLinkAndItsSession", func(t *testing.T) {
		obj := admin.MustUpload(t, "console/session.bin", 64<<10)
		link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 2, Delivery: "session"})
		s := MustMintSession(t, g.PublicBase(), link)
		if r := MustFetch(t, http.MethodGet, s.SessionURL, "Range", "bytes=0-1023"); r.Status != http.StatusPartialContent {
			t.Fatalf("the session serves %v", r)
		}
		// The link's page: the live session with its budget and slots,
		// and the webhook events the outbox delivered.
		b.waitFor(t, time.Minute, `fetch("/console/links/`+link.ID+`", {credentials: "same-origin"}).then(r => r.text()).then(t => {
			const d = new DOMParser().parseFromString(t, "text/html");
			const ev = [...d.querySelectorAll("#events tbody tr")].map(r => r.cells[0].textContent + " " + r.cells[1].textContent);
			return ev.includes("session.created delivered") && ev.includes("link.created delivered");
		})`)
		b.open(t, "/console/links/"+link.ID)
		if got := b.rows(t, "#sessions"); !slices.Equal(got, []string{s.SessionID}) {
			t.Errorf("the live sessions table shows %v, want the session %s", got, s.SessionID)
		}
		b.inspect(t, "link-sessions")
		seen := b.keyboard(t, "/console/links/"+link.ID, 16)
		for _, want := range []string{"A#top-up Top up", "A#revoke Revoke", "INPUT#url", "BUTTON# Copy", "INPUT#named_url"} {
			if !slices.ContainsFunc(seen, func(s string) bool { return strings.HasPrefix(s, want) }) {
				t.Errorf("Tab never reached %q on the link page: %v", want, seen)
			}
		}

		// Revoke the session from its row: the page shows none, the
		// session's URL is refused, the audit names the console's key.
		b.run(t, 60*time.Second, chromedp.Click(chromedp.CSS(`#sessions form button`)))
		// The same page again, once the form's answer is in: without the
		// session.
		b.waitFor(t, time.Minute, `document.readyState === "complete" && document.querySelector("#sessions tbody td") !== null &&
			document.querySelector("#sessions tbody td").textContent === "No live session."`)
		checkProblem(t, MustFetch(t, http.MethodGet, s.SessionURL, "Range", "bytes=0-1023"), http.StatusNotFound, "session-unavailable")
		admin.checkAuditedBy(t, "session.revoked", s.SessionID, op.ID)
	})

	t.Run("NewLinkFormByKeyboard", func(t *testing.T) {
		seen := b.keyboard(t, "/console/links/new", 40)
		for _, want := range []string{"INPUT#upload-file", "INPUT#upload-key", "BUTTON#upload-start", "INPUT#object_key",
			"INPUT#downloads", "INPUT#expires_value", "SELECT#expires_unit", "INPUT#delivery-stream", "INPUT#retries"} {
			if !slices.ContainsFunc(seen, func(s string) bool { return strings.HasPrefix(s, want) }) {
				t.Errorf("Tab never reached %s on the new-link form: %v", want, seen)
			}
		}
	})

	t.Run("ObjectDeletion", func(t *testing.T) {
		obj := admin.MustUpload(t, "console-pinned.bin", 8<<10)
		stream := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 3})
		session := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 2, Delivery: "session"})
		s := MustMintSession(t, g.PublicBase(), session)
		b.open(t, "/console/objects")
		del := eval[string](t, b, `[...document.querySelectorAll("#objects a.danger")].map(a => a.getAttribute("href"))
			.find(h => h.includes("key=console-pinned.bin"))`)
		if del == "" {
			t.Fatal("the objects page offers no deletion of the pinned object")
		}
		b.open(t, del)
		listed := eval[[]string](t, b, `[...document.querySelectorAll("main li a")].map(a => a.textContent.trim())`)
		slices.Sort(listed)
		want := []string{stream.ID, session.ID}
		slices.Sort(want)
		if !slices.Equal(listed, want) {
			t.Errorf("the deletion page names the live links %v, want %v", listed, want)
		}
		if n := eval[int](t, b, `document.querySelectorAll("#force").length`); n != 1 {
			t.Fatal("the deletion page of a pinned version has no force checkbox")
		}
		b.inspect(t, "object-delete-pinned")

		// Without force: refused, with the core's words; nothing changed.
		b.run(t, 60*time.Second, chromedp.Click(chromedp.ID("confirm-delete")), chromedp.WaitVisible(chromedp.CSS(`main .error`)))
		if msg := b.text(t, "#force-error"); !strings.Contains(msg, "2 live links and 1 live session pin this version") {
			t.Errorf("the refused deletion says %q", msg)
		}
		if by := eval[string](t, b, `document.getElementById("force").getAttribute("aria-describedby")`); by != "force-error" {
			t.Errorf("the force checkbox is described by %q, want the refusal", by)
		}
		b.inspect(t, "object-delete-refused")
		if l := admin.MustLink(t, stream.ID); l.RevokedAt != nil {
			t.Fatal("a refused deletion revoked a link")
		}
		if r := MustFetch(t, http.MethodGet, stream.URL); r.Status != http.StatusOK {
			t.Fatalf("after the refused deletion the link answers %v", r)
		}

		// With force: both links revoked, the session refused, the
		// version gone, each step audited as the console's key.
		b.run(t, 60*time.Second,
			chromedp.Click(chromedp.ID("force")),
			chromedp.Click(chromedp.ID("confirm-delete")),
			chromedp.WaitVisible(chromedp.ID("objects")),
		)
		if loc := b.location(t); loc != base+"/console/objects" {
			t.Errorf("the forced deletion ended at %s", loc)
		}
		for _, l := range []*Link{stream, session} {
			if got := admin.MustLink(t, l.ID); got.RevokedAt == nil {
				t.Errorf("link %s pinning the deleted version is not revoked", l.ID)
			}
			admin.checkAuditedBy(t, "link.revoked", l.ID, op.ID)
		}
		if r := MustFetch(t, http.MethodGet, stream.URL); r.Status == http.StatusOK {
			t.Errorf("the deleted version's link still answers %v", r)
		}
		checkProblem(t, MustFetch(t, http.MethodGet, s.SessionURL, "Range", "bytes=0-1023"), http.StatusNotFound, "session-unavailable")
		admin.call(t, http.MethodDelete, "/v1/objects/console-pinned.bin?version_id="+url.QueryEscape(obj.VersionID), nil, http.StatusNotFound, nil)
		deleted := 0
		for _, e := range admin.mustAudit(t, url.Values{"action": {"object.deleted"}, "actor": {op.ID}}.Encode()) {
			if strings.Contains(string(e.Details), obj.VersionID) {
				deleted++
			}
		}
		if deleted != 1 {
			t.Errorf("%d object.deleted entries by the operator name the version, want 1", deleted)
		}

		// An unpinned version: nothing to revoke, deleted at once.
		free := admin.MustUpload(t, "console-free.bin", 4<<10)
		b.open(t, "/console/objects")
		del = eval[string](t, b, `[...document.querySelectorAll("#objects a.danger")].map(a => a.getAttribute("href"))
			.find(h => h.includes("key=console-free.bin"))`)
		b.open(t, del)
		if n := eval[int](t, b, `document.querySelectorAll("#force").length`); n != 0 {
			t.Error("the deletion page of an unpinned version offers force")
		}
		b.run(t, 60*time.Second, chromedp.Click(chromedp.ID("confirm-delete")), chromedp.WaitVisible(chromedp.ID("objects")))
		if rows := b.text(t, "#objects tbody"); strings.Contains(rows, "console-free.bin") {
			t.Errorf("the stored objects still list the deleted version: %s", rows)
		}
		admin.call(t, http.MethodDelete, "/v1/objects/console-free.bin?version_id="+url.QueryEscape(free.VersionID), nil, http.StatusNotFound, nil)
		b.open(t, "/console/objects?state=deleted")
		if rows := b.text(t, "#objects tbody"); !strings.Contains(rows, "console-free.bin") || !strings.Contains(rows, "console-pinned.bin") {
			t.Errorf("the deleted objects are %q, want both versions", rows)
		}
	})

	t.Run("KeyRevocation", func(t *testing.T) {
		k := admin.MustCreateKey(t, "contractor", 0, "links:read")
		kc := consoleSignIn(t, base, k.Key)
		if r := consolePage(t, base, "/console/links", kc); r.Status != http.StatusOK {
			t.Fatalf("the contractor's console session answers %v", r)
		}
		MustOK(t, as(g, k), "/v1/links")
		b.open(t, "/console/keys")
		b.run(t, 60*time.Second,
			chromedp.Click(chromedp.CSS(`a[href="/console/keys/`+k.ID+`/revoke"]`)),
			chromedp.WaitVisible(chromedp.ID("confirm-key-revoke")),
		)
		if h := b.text(t, "h1"); h != "Revoke the key “contractor”?" {
			t.Errorf("the confirmation's heading is %q", h)
		}
		b.inspect(t, "key-revoke")
		b.run(t, 60*time.Second, chromedp.Click(chromedp.ID("confirm-key-revoke")), chromedp.WaitVisible(chromedp.ID("keys")))
		// The revoking process refuses the key at once: as a bearer, and
		// its console session.
		checkAdminProblem(t, MustFetch(t, http.MethodGet, base+"/v1/links", "Authorization", "Bearer "+k.Key), http.StatusUnauthorized, "unauthorized")
		if r := consolePage(t, base, "/console/links", kc); r.Status != http.StatusSeeOther ||
			!strings.HasPrefix(r.Header.Get("Location"), "/console/sign-in?next=") {
			t.Errorf("the revoked key's console session answers %v (%s), want the sign-in page", r, r.Header.Get("Location"))
		}
		admin.checkAuditedBy(t, "key.revoked", k.ID, op.ID)
	})

	t.Run("KeysThatMayNotReadLinks", func(t *testing.T) {
		auditor := admin.MustCreateKey(t, "auditor", 0, "audit:read")
		b.run(t, 60*time.Second, chromedp.Click(chromedp.CSS(`.signout button`)), chromedp.WaitVisible(chromedp.ID("key")))
		b.signIn(t, auditor.Key)
		if loc := b.location(t); loc != base+"/console/audit" {
			t.Errorf("an audit:read key landed on %s, want the audit", loc)
		}
		if nav := eval[[]string](t, b, `[...document.querySelectorAll("nav a")].map(a => a.getAttribute("href"))`); !slices.Equal(nav, []string{"/console/audit"}) {
			t.Errorf("an audit:read key's navigation is %v, want the audit alone", nav)
		}
		if st := b.open(t, "/console/links"); st != http.StatusForbidden {
			t.Errorf("the links page for an audit:read key answers %d, want 403", st)
		}
		if got := b.text(t, ".problem-type"); !strings.HasSuffix(got, "/insufficient-scope") {
			t.Errorf("the 403 page names %q", got)
		}
		b.inspect(t, "error-403")

		nothing := admin.MustCreateKey(t, "revoker", 0, "sessions:write")
		b.run(t, 60*time.Second, chromedp.Click(chromedp.CSS(`.signout button`)), chromedp.WaitVisible(chromedp.ID("key")))
		b.signIn(t, nothing.Key)
		if loc := b.location(t); loc != base+"/console/" {
			t.Errorf("a sessions:write key landed on %s, want the console's home", loc)
		}
		if h := b.text(t, "h1"); h != "No page for this key" {
			t.Errorf("its page says %q", h)
		}
		b.inspect(t, "home-no-page")
	})

	if want := 2 * 11; b.shot != want {
		t.Errorf("%d screenshots, want %d", b.shot, want)
	}
	checkNotLogged(t, "console key", []string{op.Key}, g)
}

// MustOK asks path of a's admin API and demands 200.
func MustOK(t *testing.T, a *Admin, path string) {
	t.Helper()
	a.call(t, http.MethodGet, path, nil, http.StatusOK, nil)
}

// TestConsoleBootstrapSessionsEndWithTheirToken: a console session
// opened with GATEWAY_ADMIN_TOKEN is refused once the gateway restarts
// with another token (sent to sign in, 401 for a form, nothing changed),
// while a key's session goes on; the new token signs in.
func TestConsoleBootstrapSessionsEndWithTheirToken(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "gateway-data")
	spec := func(name, token string) GatewaySpec {
		return GatewaySpec{Name: name, Env: map[string]string{"GATEWAY_DATA_DIR": dir, "GATEWAY_ADMIN_TOKEN": token,
			"GATEWAY_SHUTDOWN_GRACE": "2s", "GATEWAY_LOG_LEVEL": "debug"}}
	}
	before, after := randomHex(24), randomHex(24)
	g := MustStartGateways(t, spec("token-before", before))[0]
	admin := g.Admin()
	obj := admin.MustUpload(t, "console/rotated.txt", 1<<10)
	l := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1})
	reader := admin.MustCreateKey(t, "reader", 0, "links:read")
	base := "http://" + g.AdminAddr
	boot, key := consoleSignIn(t, base, before), consoleSignIn(t, base, reader.Key)
	for _, c := range []string{boot, key} {
		if r := consolePage(t, base, "/console/links/"+l.ID, c); r.Status != http.StatusOK {
			t.Fatalf("before the restart a session answers %v", r)
		}
	}

	g.Stop(15 * time.Second)
	g = MustStartGateways(t, spec("token-after", after))[0]
	base = "http://" + g.AdminAddr
	r := consolePage(t, base, "/console/links/"+l.ID, boot)
	if r.Status != http.StatusSeeOther || !strings.HasPrefix(r.Header.Get("Location"), "/console/sign-in?next=") {
		t.Errorf("the old token's session after the restart answers %v (%s), want the sign-in page", r, r.Header.Get("Location"))
	}
	if r := consoleForm(t, base, "/console/links/"+l.ID+"/revoke", boot, url.Values{}); r.Status != http.StatusUnauthorized {
		t.Errorf("the old token's session posts a revocation: %v, want 401", r)
	}
	if lk := g.Admin().MustLink(t, l.ID); lk.RevokedAt != nil {
		t.Error("the old token's session revoked the link")
	}
	if r := consolePage(t, base, "/console/links/"+l.ID, key); r.Status != http.StatusOK {
		t.Errorf("a key's session after the restart answers %v, want 200", r)
	}
	checkAdminProblem(t, MustFetch(t, http.MethodGet, base+"/v1/links", "Authorization", "Bearer "+before), http.StatusUnauthorized, "unauthorized")
	if r := consolePage(t, base, "/console/links/"+l.ID, consoleSignIn(t, base, after)); r.Status != http.StatusOK {
		t.Errorf("the new token's session answers %v", r)
	}
}
