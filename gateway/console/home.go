package console

import (
	"context"
	"net/http"
	"strings"

	"github.com/dlgate/dlgate/apikey"
)

// navPage is an entry of the console's navigation: a page and the scope
// its route needs. The scopes are those of the gateway's route table
// (gateway/routes.go), where the routes declare them;
// TestTheNavigationNeedsTheScopesOfItsRoutes checks that they agree.
type navPage struct {
	Path  string
	Label string
	Scope apikey.Scope
	// Pages are the templates shown under this entry (aria-current).
	Pages []string
}

// navPages are the console's pages in the order of its navigation; a
// signed-in key lands on the first one its scopes open.
var navPages = []navPage{
	{Base + "links", "Links", apikey.LinksRead, []string{"links", "link", "link_revoke", "link_allowance"}},
	{Base + "links/new", "New link", apikey.LinksWrite, []string{"link_new"}},
	{Base + "objects", "Objects", apikey.ObjectsRead, []string{"objects", "object_delete"}},
	{Base + "keys", "Keys", apikey.KeysWrite, []string{"keys", "key_revoke"}},
	{Base + "audit", "Audit", apikey.AuditRead, []string{"audit"}},
}

// NavScopes are the console's navigation pages and the scope each shows
// its entry for, by path: what TestTheNavigationNeedsTheScopesOfItsRoutes
// holds against the route table.
func NavScopes() map[string]apikey.Scope {
	out := make(map[string]apikey.Scope, len(navPages))
	for _, p := range navPages {
		out[p.Path] = p.Scope
	}
	return out
}

// navEntry is a navigation entry as the layout shows it.
type navEntry struct {
	Path, Label string
	Current     bool
}

// NavPages are the navigation entries of the signed-in key: only the
// pages its scopes open, the page shown marked current.
func (v view) NavPages() []navEntry {
	if v.Session == nil {
		return nil
	}
	var out []navEntry
	for _, p := range navPages {
		if v.Session.Key.Scopes.Has(p.Scope) {
			out = append(out, navEntry{Path: p.Path, Label: p.Label, Current: contains(p.Pages, v.Nav)})
		}
	}
	return out
}

// landing is the first page scopes open, "" when they open none.
func landing(scopes apikey.Scopes) string {
	for _, p := range navPages {
		if scopes.Has(p.Scope) {
			return p.Path
		}
	}
	return ""
}

// pageScope is the scope of the navigation page path is under (its
// longest prefix among navPages), false when it is under none.
func pageScope(path string) (apikey.Scope, bool) {
	path, _, _ = strings.Cut(path, "?")
	best := -1
	for i, p := range navPages {
		if (path == p.Path || strings.HasPrefix(path, p.Path+"/")) && (best < 0 || len(p.Path) > len(navPages[best].Path)) {
			best = i
		}
	}
	if best < 0 {
		return "", false
	}
	return navPages[best].Scope, true
}

// afterSignIn is where a sign-in with scopes goes on to: next (a console
// path, see localNext) unless it is a page those scopes do not open, else
// the first page they open; the home page when they open none. A key
// without links:read never lands on a 403.
func afterSignIn(scopes apikey.Scopes, next string) string {
	if n := localNext(next); n != "" && n != Base {
		if sc, ok := pageScope(n); !ok || scopes.Has(sc) {
			return n
		}
	}
	if p := landing(scopes); p != "" {
		return p
	}
	return Base
}

// homePage is the data of templates/home.html: a key whose scopes open
// no page.
type homePage struct {
	Scopes []string
	Needed []string
}

func (homePage) title() string { return "No page for this key" }

// Home serves GET /console/: without a session cookie the sign-in page;
// with a session, the first page its key's scopes open, or, when they
// open none (a key of sessions:write or objects:write only), a page
// saying so.
func (h *Handler) Home(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	if _, err := r.Cookie(CookieName); err != nil {
		http.Redirect(w, r, SignInPath, http.StatusSeeOther)
		return
	}
	s, ok := h.session(w, r)
	if !ok {
		return
	}
	if p := landing(s.Key.Scopes); p != "" {
		http.Redirect(w, r, p, http.StatusSeeOther)
		return
	}
	var needed []string
	for _, p := range navPages {
		if !contains(needed, string(p.Scope)) {
			needed = append(needed, string(p.Scope))
		}
	}
	r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, s))
	h.render(w, r, http.StatusOK, "home", homePage{Scopes: s.Key.Scopes.Strings(), Needed: needed})
}
