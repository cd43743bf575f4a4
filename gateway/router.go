package gateway

import (
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/gorilla/mux"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/gateway/public"
	"github.com/dlgate/dlgate/token"
)

// The one router: gorilla/mux for both listeners, built from a route
// table (routes.go). Each pattern is matched by a plain segment matcher
// (pathMatcher) instead of mux's regular expressions, with the variables
// mux.Vars reads; methods, the 404 and the 405 with its Allow header are
// mux's, derived from the table. In front of it stand two checks that
// answer before any route is tried: cleanPaths (a path not in clean form)
// and, on the public listener, forgedTokens (a token this gateway did not
// mint is the generic 404 without a lookup, SPEC §2, and without
// routing).

// router builds the router of a route table and wraps all of it, so that
// even mux's own answers (404, 405) and those of cleanPaths carry the
// listener's headers and request id and are logged and counted.
func (s *Server) router(public bool, routes []route) http.Handler {
	// mux's own cleaning answers every method with a 301; cleanPaths
	// cleans instead, without ever changing a method or a target.
	r := mux.NewRouter().SkipClean(true)
	// Object keys may contain encoded characters: the admin listener
	// matches on the raw path and unescapes the variable itself.
	encoded := !public
	owners := map[*mux.Route]bool{}
	for _, rt := range routes {
		mr := r.NewRoute().MatcherFunc(pathMatcher(rt.pattern, encoded)).Methods(rt.methods...).
			Handler(httpx.Named(rt.name, rt.h))
		if rt.ownPath {
			owners[mr] = true
		}
	}
	r.NotFoundHandler = httpx.Named("unknown", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		problem.Write(w, req, problem.NotFound, "")
	}))
	r.MethodNotAllowedHandler = httpx.Named("method_not_allowed", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// RFC 9110 §15.5.6: a 405 names the methods the target allows.
		w.Header().Set("Allow", allowed(r, req))
		problem.Write(w, req, problem.MethodNotAllowed, "")
	}))
	var h http.Handler = r
	if public {
		h = s.forgedTokens(h)
	}
	h = cleanPaths(h, r, owners, encoded, tableMethods(routes))
	if public {
		// Bodies are settled before routing, so before any lookup or
		// claim (limits.go).
		return s.wrap(public, s.limitPublicBodies(h))
	}
	return s.wrap(public, h)
}

// pathMatcher matches pattern as mux's path template would, without a
// regular expression: each segment is a literal or a {var} (mux's [^/]+),
// and the last may be {var:.+}, the non-empty rest of the path. It
// matches the decoded path, or with encoded the escaped one
// (UseEncodedPath). A match sets the variables mux.Vars returns.
func pathMatcher(pattern string, encoded bool) mux.MatcherFunc {
	if !plainPattern(pattern) {
		panic("gateway: route pattern " + pattern + " is not a plain template")
	}
	return func(r *http.Request, m *mux.RouteMatch) bool {
		p := r.URL.Path
		if encoded {
			p = r.URL.EscapedPath()
		}
		vars, ok := matchPattern(pattern, p)
		if ok {
			m.Vars = vars
		}
		return ok
	}
}

// maxPatternVars is the most variables a plain pattern has.
const maxPatternVars = 4

// plainPattern reports whether matchPattern understands pattern.
func plainPattern(pattern string) bool {
	if pattern == "" || pattern[0] != '/' {
		return false
	}
	vars := map[string]bool{}
	for segs := strings.Split(pattern[1:], "/"); len(segs) > 0; segs = segs[1:] {
		seg := segs[0]
		if !strings.ContainsAny(seg, "{}") {
			if seg == "" && len(segs) > 1 || seg == "." || seg == ".." {
				return false
			}
			continue
		}
		if len(seg) < 3 || seg[0] != '{' || seg[len(seg)-1] != '}' || strings.ContainsAny(seg[1:len(seg)-1], "{}") {
			return false
		}
		name, re, hasRE := strings.Cut(seg[1:len(seg)-1], ":")
		if name == "" || vars[name] || hasRE && (re != ".+" && re != ".*" || len(segs) > 1) {
			return false
		}
		vars[name] = true
	}
	return len(vars) <= maxPatternVars
}

// matchPattern matches path against a plain pattern and returns its
// variables as mux would: {var} is a non-empty segment, {var:.+} the
// non-empty rest of the path and {var:.*} the rest, empty or not, neither
// with a newline (the regexp "." does not match one).
func matchPattern(pattern, path string) (map[string]string, bool) {
	// The variables wait here until the whole path matched: most routes
	// tried fail after a variable, and a map each was most of the
	// router's allocation.
	var (
		found [maxPatternVars][2]string
		n     int
	)
	set := func(name, val string) bool {
		if n == len(found) {
			return false // plainPattern refuses more
		}
		found[n] = [2]string{name, val}
		n++
		return true
	}
	vars := func() map[string]string {
		m := make(map[string]string, n)
		for _, v := range found[:n] {
			m[v[0]] = v[1]
		}
		return m
	}
	for pattern != "" {
		if path == "" || path[0] != '/' {
			return nil, false
		}
		pattern, path = pattern[1:], path[1:]
		pseg, prest := pattern, ""
		if i := strings.IndexByte(pattern, '/'); i >= 0 {
			pseg, prest = pattern[:i], pattern[i:]
		}
		if rest, ok := strings.CutSuffix(pseg, ":.+}"); ok || strings.HasSuffix(pseg, ":.*}") {
			if ok && path == "" || strings.IndexByte(path, '\n') >= 0 {
				return nil, false
			}
			if !set(strings.TrimSuffix(rest, ":.*}")[1:], path) {
				return nil, false
			}
			return vars(), true
		}
		seg, rest := path, ""
		if i := strings.IndexByte(path, '/'); i >= 0 {
			seg, rest = path[:i], path[i:]
		}
		if pseg != "" && pseg[0] == '{' {
			if seg == "" || !set(pseg[1:len(pseg)-1], seg) {
				return nil, false
			}
		} else if seg != pseg {
			return nil, false
		}
		pattern, path = prest, rest
	}
	if path != "" {
		return nil, false
	}
	return vars(), true
}

// forgedTokens answers, before any route is tried, a GET, HEAD or POST of
// a link or session URL whose token this gateway did not mint (a forged
// or mistyped one: token.Keys.Check): the generic 404 of its kind,
// without routing and without a database query (SPEC §2). The answer is
// the one the route's handler would give, labelled with its route.
// A token found minted goes on marked so (public.WithMinted), and its
// handler does not check its MAC again; everything else goes on to the
// router unmarked, and the handlers check the token themselves.
func (s *Server) forgedTokens(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodPost {
			next.ServeHTTP(w, r)
			return
		}
		kind, tok, rest, ok := httpx.TokenPath(r.URL.Path)
		if !ok {
			next.ServeHTTP(w, r)
			return
		}
		if s.keys.Check(kind, tok) {
			next.ServeHTTP(w, public.WithMinted(r, kind, tok))
			return
		}
		route, notFound := "link", problem.LinkUnavailable
		switch {
		case kind == token.Session:
			if r.Method == http.MethodPost {
				next.ServeHTTP(w, r) // no such route: mux's 405
				return
			}
			route, notFound = "session", problem.SessionUnavailable
		case r.Method == http.MethodPost && rest == "/sessions":
			route = "mint"
		}
		if info := httpx.InfoOf(r); info != nil {
			info.Route = route
		}
		s.log.DebugContext(r.Context(), "refused", "reason", "invalid_token")
		problem.Write(w, r, notFound, "")
	})
}

// allowed lists the methods some route of r accepts for req's path.
func allowed(r *mux.Router, req *http.Request) string {
	var list string
	for _, m := range allMethods {
		probe := req.Clone(req.Context())
		probe.Method = m
		var match mux.RouteMatch
		if r.Match(probe, &match) && match.MatchErr == nil {
			if list != "" {
				list += ", "
			}
			list += m
		}
	}
	return list
}

// cleanPaths answers, before any route sees them, the requests whose
// path is not clean (cleanPath); the others go on to next. It replaces
// gorilla/mux's own cleaning (the router has SkipClean), which answered
// every method with a 301 to the cleaned path: clients repeat a 301 of a
// POST as a GET (RFC 9110 §15.4.2 allows it, and every client does it),
// so POST //d/{token}/sessions claimed the link as the named URL of a
// file called "sessions", and Node's fetch repeats a PUT at the cleaned
// path, storing an upload under another key. A cleaned path must never
// change a request's method or target, so:
//
//   - GET and HEAD get 308 to the cleaned path, query kept (308 keeps the
//     method, RFC 9110 §15.4.9; both are safe, so the redirect can do no
//     harm);
//   - any other method gets 400 non-canonical-path: nothing is claimed,
//     stored or deleted, and no route is tried. The exception is a route
//     whose handler checks its own path variable (route.ownPath: object
//     keys): the request reaches it unchanged, so that "a//b" or "a/../b"
//     are refused as the keys they are (400 invalid-key, after the admin
//     token check), exactly as their percent-encoded forms are;
//   - OPTIONS * (RFC 9110 §9.3.7, the server as a whole) gets 204 with
//     the listener's methods in Allow;
//   - any other target that is not a path (CONNECT's authority, a "*"
//     with another method) is 400 bad-request.
//
// encoded is mux's UseEncodedPath: the path checked and cleaned is the
// one the router matches, the escaped path on the admin listener and the
// decoded one on the public listener.
func cleanPaths(next http.Handler, router *mux.Router, owners map[*mux.Route]bool, encoded bool, methods string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		if encoded {
			p = r.URL.EscapedPath()
		}
		if cleanPath(p) {
			next.ServeHTTP(w, r)
			return
		}
		info := httpx.InfoOf(r)
		label := func(route string) {
			if info != nil {
				info.Route = route
			}
		}
		switch {
		case r.Method == http.MethodOptions && r.URL.Path == "*":
			label("options")
			w.Header().Set("Allow", methods)
			w.WriteHeader(http.StatusNoContent)
		case p == "" || p[0] != '/':
			problem.Write(w, r, problem.BadRequest, "The request target must be a path.")
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
			label("clean_redirect")
			loc := cleanedPath(p)
			if !encoded {
				loc = (&url.URL{Path: loc}).EscapedPath()
			}
			if r.URL.RawQuery != "" {
				loc += "?" + r.URL.RawQuery
			}
			w.Header().Set("Location", loc)
			w.WriteHeader(http.StatusPermanentRedirect)
		case ownsPath(router, owners, r):
			router.ServeHTTP(w, r)
		default:
			label("non_canonical_path")
			problem.Write(w, r, problem.NonCanonicalPath,
				`Only GET and HEAD are redirected to the clean path; send this request to the path without empty, "." or ".." segments.`)
		}
	})
}

// ownsPath reports whether r is for a route whose handler checks its own
// path variable.
func ownsPath(router *mux.Router, owners map[*mux.Route]bool, r *http.Request) bool {
	if len(owners) == 0 {
		return false
	}
	var m mux.RouteMatch
	return router.Match(r, &m) && m.MatchErr == nil && owners[m.Route]
}

// cleanedPath is p, which starts with "/", without empty, "." and ".."
// segments, a trailing slash kept (as gorilla/mux cleaned it). It never
// starts with "//", so a Location of it is never another host's.
func cleanedPath(p string) string {
	np := path.Clean(p)
	if strings.HasSuffix(p, "/") && np != "/" {
		np += "/"
	}
	return np
}

// cleanPath reports whether p is in clean form, so that cleanPaths lets
// it through: p starts with "/" and has no empty, "." or ".." segment, a
// trailing slash aside. It is true exactly when cleanedPath(p) == p.
func cleanPath(p string) bool {
	if p == "" || p[0] != '/' {
		return false
	}
	for p != "" {
		p = p[1:]
		seg := p
		if i := strings.IndexByte(p, '/'); i >= 0 {
			seg, p = p[:i], p[i:]
			if seg == "" {
				return false
			}
		} else {
			p = ""
		}
		if seg == "." || seg == ".." {
			return false
		}
	}
	return true
}

// allMethods are the methods some route may take, in the order Allow
// lists them.
var allMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions}

// tableMethods lists the methods of a route table, for OPTIONS *.
func tableMethods(routes []route) string {
	var list []string
	for _, m := range allMethods {
		if slices.ContainsFunc(routes, func(rt route) bool { return slices.Contains(rt.methods, m) }) {
			list = append(list, m)
		}
	}
	return strings.Join(list, ", ")
}
