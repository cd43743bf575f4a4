package console_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/ledger"
)

// TestABootstrapSessionEndsWhenTheTokenIsReplaced: two gateways on one
// ledger, the second configured with another GATEWAY_ADMIN_TOKEN, as
// after the token was replaced and the process restarted. A console
// session opened with the first token serves the first gateway and is
// refused by the second (sent to sign in, 401 for a form, cleared), and
// the other way round; a key's session serves both; a bootstrap session
// opened before sessions were bound to the token (a random secret) is
// refused by both.
func TestABootstrapSessionEndsWhenTheTokenIsReplaced(t *testing.T) {
	const newToken = "console-replaced-token-fedcba9876543210"
	n := 0
	h := mustHarness(t, 2, func(o *gateway.Options) {
		if n == 1 {
			o.AdminToken = newToken
		}
		n++
	})
	l := h.mustObjectAndLink(t, "bound.txt")
	old, other := h.client(0), h.client(1)
	old.signIn(t, adminToken)
	old.get(t, "/console/links/"+l.ID, http.StatusOK)
	other.cookie = old.cookie
	r := other.get(t, "/console/links/"+l.ID, http.StatusSeeOther)
	if loc := r.Header.Get("Location"); !strings.HasPrefix(loc, "/console/sign-in?next=") {
		t.Errorf("the old token's session on the new token's gateway goes to %q, want the sign-in page", loc)
	}
	if c := r.Cookies(); len(c) != 1 || c[0].MaxAge >= 0 {
		t.Errorf("the refused cookie was not cleared: %v", c)
	}
	other.post(t, "/console/links/"+l.ID+"/revoke", url.Values{}, http.StatusUnauthorized)
	var st struct {
		RevokedAt *string `json:"revoked_at"`
	}
	api(t, h.Admin[1].URL, newToken, http.MethodGet, "/v1/links/"+l.ID, nil, http.StatusOK, &st)
	if st.RevokedAt != nil {
		t.Fatal("a session of the replaced token revoked a link")
	}
	old.get(t, "/console/links/"+l.ID, http.StatusOK) // the old token's gateway still takes it

	// Signed in again with the new token: the other way round.
	other.cookie = ""
	other.signIn(t, newToken)
	other.get(t, "/console/links/"+l.ID, http.StatusOK)
	old.cookie = other.cookie
	old.get(t, "/console/links/"+l.ID, http.StatusSeeOther)

	// A key's session is the key's, whatever the token.
	k := h.client(0)
	k.signIn(t, h.mustKey(t, "reader", "links:read"))
	for i := range h.Admin {
		c := h.client(i)
		c.cookie = k.cookie
		c.get(t, "/console/links/"+l.ID, http.StatusOK)
	}

	// A bootstrap session whose secret carries no binding (as opened
	// before it did) opens nothing anywhere.
	secret, hash := apikey.NewSession()
	if _, err := h.DB.ConsoleSessionCreate(context.Background(), ledger.BootstrapKeyID, hash); err != nil {
		t.Fatal(err)
	}
	for i := range h.Admin {
		c := h.client(i)
		c.cookie = "dlgate_console=" + secret
		c.get(t, "/console/links", http.StatusSeeOther)
	}
	if strings.Contains(h.Logs.String(), adminToken) || strings.Contains(h.Logs.String(), newToken) {
		t.Error("a token is in the log")
	}
}

// TestConsoleRequestsCountAsUsesOfTheKey: a key used only through the
// console shows when it was last used, not when it signed in, moved at
// most once a minute as a bearer's is.
func TestConsoleRequestsCountAsUsesOfTheKey(t *testing.T) {
	h := mustHarness(t, 1)
	c := h.client(0)
	signedIn := h.Clock.Now()
	c.signIn(t, h.mustKey(t, "browser", "links:read"))
	lastUsed := func() time.Time {
		t.Helper()
		var keys struct {
			Keys []struct {
				Name       string  `json:"name"`
				LastUsedAt *string `json:"last_used_at"`
			} `json:"keys"`
		}
		api(t, h.Admin[0].URL, adminToken, http.MethodGet, "/v1/keys", nil, http.StatusOK, &keys)
		for _, k := range keys.Keys {
			if k.Name == "browser" && k.LastUsedAt != nil {
				at, err := time.Parse(time.RFC3339Nano, *k.LastUsedAt)
				if err != nil {
					t.Fatal(err)
				}
				return at
			}
		}
		t.Fatalf("the key has no last_used_at: %+v", keys.Keys)
		return time.Time{}
	}
	if got := lastUsed(); !got.Equal(signedIn) {
		t.Errorf("after the sign-in last_used_at = %v, want %v", got, signedIn)
	}
	h.Clock.Advance(2 * time.Minute)
	used := h.Clock.Now()
	c.get(t, "/console/links", http.StatusOK)
	if got := lastUsed(); !got.Equal(used) {
		t.Errorf("after a page 2 min later last_used_at = %v, want %v", got, used)
	}
	h.Clock.Advance(30 * time.Second)
	c.get(t, "/console/links", http.StatusOK)
	if got := lastUsed(); !got.Equal(used) {
		t.Errorf("30 s later last_used_at = %v, want it unmoved at %v (at most once a minute)", got, used)
	}
	h.Clock.Advance(40 * time.Second)
	c.get(t, "/console/links", http.StatusOK)
	if got := lastUsed(); !got.Equal(h.Clock.Now()) {
		t.Errorf("70 s after the last write last_used_at = %v, want %v", got, h.Clock.Now())
	}
}

// TestAKeyLandsOnTheFirstPageItsScopesOpen: after sign-in a key goes to
// the first page of the navigation it may open (never to a 403), even
// when the sign-in page was asked for another; the navigation shows
// only pages it may open, each of which answers 200; a key whose scopes
// open no page lands on a page saying so.
func TestAKeyLandsOnTheFirstPageItsScopesOpen(t *testing.T) {
	h := mustHarness(t, 1)
	for _, c := range []struct {
		scopes []string
		land   string
	}{
		{[]string{"links:read"}, "/console/links"},
		{[]string{"links:write"}, "/console/links/new"},
		{[]string{"audit:read"}, "/console/audit"},
		{[]string{"keys:write"}, "/console/keys"},
		{[]string{"objects:read", "audit:read"}, "/console/objects"},
		{[]string{"objects:delete"}, "/console/"},
		{[]string{"sessions:write", "objects:write"}, "/console/"},
	} {
		key := h.mustKey(t, strings.Join(c.scopes, "+"), c.scopes...)
		cl := h.client(0)
		for _, next := range []string{"", "/console/", "/console/links", "/console/links/new?object_key=x"} {
			cl.cookie = ""
			r := cl.post(t, "/console/sign-in", url.Values{"key": {key}, "next": {next}}, http.StatusSeeOther)
			want := c.land
			if next == "/console/links" && contains(c.scopes, "links:read") {
				want = next
			}
			if next == "/console/links/new?object_key=x" && contains(c.scopes, "links:write") {
				want = next
			}
			if loc := r.Header.Get("Location"); loc != want {
				t.Errorf("%v signed in with next %q goes to %q, want %q", c.scopes, next, loc, want)
			}
			cl.signIn(t, key)
		}
		home := cl.get(t, "/console/", map[bool]int{true: http.StatusOK, false: http.StatusSeeOther}[c.land == "/console/"])
		if c.land == "/console/" {
			if !strings.Contains(text(parse(t, home)), "so there is none to show it") {
				t.Errorf("%v: the home page says %q", c.scopes, text(parse(t, home)))
			}
		} else if loc := home.Header.Get("Location"); loc != c.land {
			t.Errorf("%v: GET /console/ goes to %q, want %q", c.scopes, loc, c.land)
		}
		var nav []string
		page := home
		if c.land != "/console/" {
			page = cl.get(t, c.land, http.StatusOK)
		}
		doc := parse(t, page)
		for _, a := range find(doc, func(n *html.Node) bool { return n.Data == "a" && hasAncestor(n, "nav") }) {
			href, _ := attr(a, "href")
			nav = append(nav, href)
			cl.get(t, href, http.StatusOK)
		}
		if (len(nav) == 0) != (c.land == "/console/") || (len(nav) > 0 && nav[0] != c.land) {
			t.Errorf("%v: the navigation is %v, want it to begin with %s", c.scopes, nav, c.land)
		}
		if !contains(c.scopes, "links:read") && contains(nav, "/console/links") {
			t.Errorf("%v: the navigation shows Links", c.scopes)
		}
	}
	// An error page leads back to the console, not to a page the key may
	// not open.
	cl := h.client(0)
	cl.signIn(t, h.mustKey(t, "auditor", "audit:read"))
	doc := parse(t, cl.get(t, "/console/links", http.StatusForbidden))
	for _, ctl := range controls(doc) {
		if ctl == "GET /console/links" {
			t.Errorf("the 403 page of an audit:read key links to the links page")
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// hasAncestor reports whether an element named tag encloses n.
func hasAncestor(n *html.Node, tag string) bool {
	for p := n.Parent; p != nil; p = p.Parent {
		if p.Type == html.ElementNode && p.Data == tag {
			return true
		}
	}
	return false
}
