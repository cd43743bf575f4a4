package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// checkFieldErrors checks a form's page: each input named in want
// (its id → the error text) has aria-invalid="true" and
// aria-describedby naming the paragraph that says want's text; no other
// input is marked invalid.
func checkFieldErrors(t *testing.T, doc *html.Node, want map[string]string) {
	t.Helper()
	for _, in := range find(doc, func(n *html.Node) bool { return n.Data == "input" || n.Data == "select" }) {
		id, _ := attr(in, "id")
		inv, marked := attr(in, "aria-invalid")
		msg, wanted := want[id]
		switch {
		case wanted && (inv != "true" || !marked):
			t.Errorf("#%s has aria-invalid %q, want true", id, inv)
		case !wanted && marked:
			t.Errorf("#%s is marked invalid (%q) without an error", id, inv)
		}
		if !wanted {
			continue
		}
		by, _ := attr(in, "aria-describedby")
		e := byID(doc, by)
		if by == "" || e == nil || text(e) != msg {
			t.Errorf("#%s: aria-describedby %q names %v, want the paragraph saying %q", id, by, e, msg)
		}
	}
}

// TestFieldErrorsAreTiedToTheirFields: the new-link form, the links'
// filters, the key form and the top-up form name the field each of the
// API's refusals is about: the input says it is invalid and is described
// by the error's text.
func TestFieldErrorsAreTiedToTheirFields(t *testing.T) {
	h := mustHarness(t, 1)
	l := h.mustObjectAndLink(t, "fields.txt")
	c := h.client(0)
	c.signIn(t, adminToken)

	form := url.Values{"object_key": {"fields.txt"}, "downloads": {"0"}, "expires_value": {"2"}, "expires_unit": {"hours"}, "delivery": {"stream"}}
	doc := parse(t, c.post(t, "/console/links/new", form, http.StatusBadRequest))
	checkFieldErrors(t, doc, map[string]string{"downloads": "downloads must be between 1 and 1000000."})
	form.Set("downloads", "1")
	form.Set("expires_value", "9999999")
	form.Set("expires_unit", "days")
	doc = parse(t, c.post(t, "/console/links/new", form, http.StatusBadRequest))
	checkFieldErrors(t, doc, map[string]string{"expires_value": "expires_in must be between 1 second and 10 years.",
		"expires_unit": "expires_in must be between 1 second and 10 years."})
	form.Set("expires_value", "1")
	form.Set("delivery", "carrier pigeon")
	doc = parse(t, c.post(t, "/console/links/new", form, http.StatusBadRequest))
	checkFieldErrors(t, doc, nil)
	for _, id := range []string{"delivery-stream", "delivery-session"} {
		if by, _ := attr(byID(doc, id), "aria-describedby"); by != "delivery-error" || text(byID(doc, by)) != `delivery must be "stream" or "session".` {
			t.Errorf("#%s is described by %q", id, by)
		}
	}
	form.Set("delivery", "stream")
	form.Set("object_key", "not/there.txt")
	doc = parse(t, c.post(t, "/console/links/new", form, http.StatusUnprocessableEntity))
	checkFieldErrors(t, doc, map[string]string{"object_key": "No object (or no such version) at that key."})

	doc = parse(t, c.get(t, "/console/links?state=lost&account=x", http.StatusBadRequest))
	checkFieldErrors(t, doc, map[string]string{"state": "state must be one of active, exhausted, expired, revoked."})
	doc = parse(t, c.get(t, "/console/links?created_after=yesterday", http.StatusBadRequest))
	checkFieldErrors(t, doc, map[string]string{"created_after": "created_after must be an RFC 3339 time, like 2030-01-02T03:04:05Z."})
	doc = parse(t, c.get(t, "/console/links?cursor=forged", http.StatusBadRequest))
	checkFieldErrors(t, doc, nil)
	if alert := find(doc, func(n *html.Node) bool { v, _ := attr(n, "role"); return v == "alert" }); len(alert) != 1 ||
		!strings.Contains(text(alert[0]), "cursor") {
		t.Errorf("a forged cursor's page says %v, want one alert about the cursor", alert)
	}

	doc = parse(t, c.post(t, "/console/keys", url.Values{"name": {"no scope"}}, http.StatusBadRequest))
	checkFieldErrors(t, doc, nil)
	fs := find(doc, func(n *html.Node) bool { return n.Data == "fieldset" })
	if len(fs) != 1 {
		t.Fatalf("the keys page has %d fieldsets", len(fs))
	}
	if by, _ := attr(fs[0], "aria-describedby"); by != "scopes-error" || !strings.HasPrefix(text(byID(doc, by)), "scopes must name at least one scope") {
		t.Errorf("the scopes are described by %q", by)
	}
	doc = parse(t, c.post(t, "/console/keys", url.Values{"name": {strings.Repeat("n", 101)}, "scope": {"links:read"}}, http.StatusBadRequest))
	checkFieldErrors(t, doc, map[string]string{"name": "name must be 1 to 100 characters, without control characters or spaces at either end."})

	doc = parse(t, c.post(t, "/console/links/"+l.ID+"/allowance", url.Values{"add": {"0"}}, http.StatusBadRequest))
	checkFieldErrors(t, doc, map[string]string{"add": "add must be between 1 and 1000000; reason at most 1024 bytes."})
	doc = parse(t, c.post(t, "/console/links/"+l.ID+"/allowance", url.Values{"add": {"two"}}, http.StatusBadRequest))
	checkFieldErrors(t, doc, map[string]string{"add": "add must be a whole number."})
}

// TestTheKeyRevocationPageNamesTheKey: the confirmation says which key
// it revokes (name, scopes); an unknown key, or the bootstrap token, is
// 404.
func TestTheKeyRevocationPageNamesTheKey(t *testing.T) {
	h := mustHarness(t, 1)
	h.mustKey(t, "release pipeline", "links:write", "objects:write")
	var keys struct {
		Keys []struct {
			ID string `json:"id"`
		} `json:"keys"`
	}
	api(t, h.Admin[0].URL, adminToken, http.MethodGet, "/v1/keys", nil, http.StatusOK, &keys)
	c := h.client(0)
	c.signIn(t, adminToken)
	page := text(parse(t, c.get(t, "/console/keys/"+keys.Keys[0].ID+"/revoke", http.StatusOK)))
	for _, want := range []string{"Revoke the key “release pipeline”?", "links:write, objects:write", keys.Keys[0].ID} {
		if !strings.Contains(page, want) {
			t.Errorf("the confirmation lacks %q: %s", want, page)
		}
	}
	for _, id := range []string{"01912345-6789-7abc-8def-0123456789ab", "bootstrap"} {
		c.get(t, "/console/keys/"+id+"/revoke", http.StatusNotFound)
	}
}
