package gateway_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/gateway/console"
	"github.com/dlgate/dlgate/internal/refusal"
)

// matrixID stands for every {id} of the admin routes: a UUID no row has,
// so that an allowed request is answered by its handler (404), not by the
// check in front of it.
const matrixID = "01a226c5-36c5-7cc5-9846-1e57c78d008f"

// samplePath fills a route pattern's variables.
func samplePath(pattern string) string {
	r := strings.NewReplacer("{id}", matrixID, "{key:.+}", "matrix/a.txt", "{profile:.*}", "goroutine", "{file:.+}", "console.css")
	return r.Replace(pattern)
}

// TestEveryAdminRouteDeclaresAKnownScope walks the admin route table: every
// route declares one scope of SPEC §6 or one of the two markers (open,
// bootstrap), so a route added without one fails here (and gateway.New
// refuses to start, TestNewRefusesAnAdminRouteWithoutAScope). It then
// walks the served router: each route of the table, asked without a
// credential, is reached (its access line names it) and answers 401,
// unless it is open; a console page sends the browser to the sign-in
// page instead (303), and the console's sign-in, being the check itself,
// answers 401 to a missing key.
func TestEveryAdminRouteDeclaresAKnownScope(t *testing.T) {
	h := MustHarness(t)
	routes := h.Server.AdminRoutes()
	if len(routes) == 0 {
		t.Fatal("the admin route table is empty")
	}
	for _, rt := range routes {
		switch rt.Scope {
		case gateway.ScopeOpen, gateway.ScopeBootstrap:
		case "":
			t.Errorf("%s %s (%s) declares no scope", rt.Method, rt.Pattern, rt.Name)
		default:
			if _, err := apikey.ParseScope(rt.Scope); err != nil {
				t.Errorf("%s %s (%s) declares scope %q: %v", rt.Method, rt.Pattern, rt.Name, rt.Scope, err)
			}
		}
	}
	for _, rt := range routes {
		// One failure per window: this test is not about the throttle.
		h.Clock.Advance(refusal.AuthWindow)
		var (
			resp *http.Response
			body []byte
		)
		if rt.Console {
			resp, body = h.ConsoleDo(t, "", rt.Method, samplePath(rt.Pattern), "", nil)
		} else {
			resp, body = h.AdminDoAs(t, "", rt.Method, samplePath(rt.Pattern), nil, nil)
		}
		if got := routeOf(t, h, resp); got != rt.Name {
			t.Errorf("%s %s reached route %q, want %q", rt.Method, samplePath(rt.Pattern), got, rt.Name)
		}
		open := rt.Scope == gateway.ScopeOpen
		refused := resp.StatusCode == http.StatusUnauthorized
		switch {
		case rt.Console && !open && (rt.Method == http.MethodGet || rt.Method == http.MethodHead):
			refused = resp.StatusCode == http.StatusSeeOther && strings.HasPrefix(resp.Header.Get("Location"), "/console/sign-in?next=")
		case rt.Name == "console_sign_in" && rt.Method == http.MethodPost:
			open = false
		}
		if refused == open {
			t.Errorf("%s %s (scope %s) without a credential = %d %s", rt.Method, rt.Pattern, rt.Scope, resp.StatusCode, body)
		}
	}
}

// TestTheNavigationNeedsTheScopesOfItsRoutes holds the console's
// navigation against the route table: the entry of each page is shown to
// a key holding the scope that the page's GET route demands, no other, so
// that a key never sees an entry that leads to a 403, nor misses one it
// may open.
func TestTheNavigationNeedsTheScopesOfItsRoutes(t *testing.T) {
	h := MustHarness(t)
	routes := map[string]string{}
	for _, rt := range h.Server.AdminRoutes() {
		if rt.Console && rt.Method == http.MethodGet {
			routes[rt.Pattern] = rt.Scope
		}
	}
	nav := console.NavScopes()
	if len(nav) == 0 {
		t.Fatal("the console's navigation is empty")
	}
	for path, scope := range nav {
		got, ok := routes[path]
		switch {
		case !ok:
			t.Errorf("the navigation's %s is no console GET route", path)
		case got != string(scope):
			t.Errorf("the navigation shows %s to keys with %s; its route demands %s", path, scope, got)
		}
	}
}

// TestEachAdminRouteNeedsItsScope is generated from the route table: for
// every route and method, a key holding exactly the route's scope gets
// past the check (neither 401 nor 403), and a key holding every other
// scope gets 403 insufficient-scope naming it. A bootstrap route refuses
// even a key with every scope; an open route needs no key. A console
// route is asked the same with a console session signed in with each key
// (its cookie instead of a bearer).
func TestEachAdminRouteNeedsItsScope(t *testing.T) {
	h := MustHarness(t)
	only := map[string]string{}   // scope → a key holding just it
	others := map[string]string{} // scope → a key holding all but it
	for _, sc := range apikey.All().List() {
		only[string(sc)] = h.MustKey(t, "only "+string(sc), string(sc)).Key
		others[string(sc)] = h.MustKey(t, "all but "+string(sc), (apikey.All() &^ apikey.Of(sc)).Strings()...).Key
	}
	every := h.MustKey(t, "every scope", apikey.All().Strings()...).Key
	cookies := map[string]string{} // key → its console session's cookie
	do := func(rt gateway.AdminRoute, key string) (*http.Response, []byte) {
		t.Helper()
		switch {
		case !rt.Console:
			return h.AdminDoAs(t, key, rt.Method, samplePath(rt.Pattern), nil, nil)
		case key == "":
			return h.ConsoleDo(t, "", rt.Method, samplePath(rt.Pattern), "", nil)
		}
		c, ok := cookies[key]
		if !ok {
			c = h.MustConsoleSignIn(t, key)
			cookies[key] = c
		}
		return h.ConsoleDo(t, c, rt.Method, samplePath(rt.Pattern), "", nil)
	}
	passes := func(rt gateway.AdminRoute, who, key string) {
		t.Helper()
		resp, body := do(rt, key)
		if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
			t.Errorf("%s %s (scope %s) with %s = %d %s, want past the check", rt.Method, rt.Pattern, rt.Scope, who, resp.StatusCode, body)
		}
		if got := routeOf(t, h, resp); got != rt.Name {
			t.Errorf("%s %s reached route %q, want %q", rt.Method, rt.Pattern, got, rt.Name)
		}
	}
	refused := func(rt gateway.AdminRoute, who, key, naming string) {
		t.Helper()
		resp, body := do(rt, key)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s %s (scope %s) with %s = %d %s, want 403", rt.Method, rt.Pattern, rt.Scope, who, resp.StatusCode, body)
			return
		}
		if rt.Method != http.MethodHead { // a HEAD's 403 has no body, its challenge names the scope
			p := mustProblem(t, resp, body, http.StatusForbidden, "insufficient-scope")
			if !strings.Contains(p.Detail, naming) {
				t.Errorf("%s %s with %s: the 403's detail %q does not name %s", rt.Method, rt.Pattern, who, p.Detail, naming)
			}
		}
		// A cookie is no bearer: the console's 403 has no RFC 6750 challenge.
		if ch := resp.Header.Get("WWW-Authenticate"); !rt.Console && !strings.Contains(ch, `error="insufficient_scope"`) {
			t.Errorf("%s %s with %s: WWW-Authenticate = %q, want error=\"insufficient_scope\" (RFC 6750 §3.1)", rt.Method, rt.Pattern, who, ch)
		}
	}
	counts := map[string]int{}
	for _, rt := range h.Server.AdminRoutes() {
		counts[rt.Scope]++
		switch rt.Scope {
		case gateway.ScopeOpen:
			if rt.Name == "console_sign_in" && rt.Method == http.MethodPost {
				continue // the check itself: TestConsole* sign in with every kind of key
			}
			passes(rt, "no key", "")
		case gateway.ScopeBootstrap:
			passes(rt, "the bootstrap token", testAdminToken)
			refused(rt, "a key with every scope", every, "GATEWAY_ADMIN_TOKEN")
		default:
			passes(rt, "a key of just "+rt.Scope, only[rt.Scope])
			passes(rt, "the bootstrap token", testAdminToken)
			refused(rt, "a key of every other scope", others[rt.Scope], rt.Scope)
		}
	}
	t.Logf("routes by scope: %v", counts)
}
