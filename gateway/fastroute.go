package gateway

import (
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"

	"github.com/gorilla/mux"
)

// fastRoutes sits in front of the public mux router and serves the
// requests that mux would hand to a route's handler, with the same
// handler and the same variables, but without mux's regexps or its
// per-request allocations. Everything else (unknown paths, wrong
// methods) goes on to mux unchanged. Paths that are not clean never
// reach it: cleanPaths answers them first.
//
// It understands the patterns "/lit/{var}/…", where each segment is a
// literal or a {var} (mux's [^/]+), and the last may be {var:.+}. It
// matches the decoded path, as mux does without UseEncodedPath.
type fastRoutes struct {
	routes []fastRoute // the table's leading routes whose pattern is understood
	mux    http.Handler
}

type fastRoute struct {
	pattern string
	methods []string
	h       http.Handler
}

// newFastRoutes takes routes, each with its handler hs[i], until the
// first pattern it does not understand: mux tries routes in table order,
// so a later route may not be tried before one only mux can match.
func newFastRoutes(routes []route, hs []http.Handler, next http.Handler) *fastRoutes {
	f := &fastRoutes{mux: next}
	for i, rt := range routes {
		if !fastPattern(rt.pattern) {
			break
		}
		methods := make([]string, len(rt.methods))
		for j, m := range rt.methods {
			methods[j] = strings.ToUpper(m) // as mux's Methods
		}
		f.routes = append(f.routes, fastRoute{pattern: rt.pattern, methods: methods, h: hs[i]})
	}
	return f
}

// ServeHTTP expects a clean path (cleanPaths runs before it).
func (f *fastRoutes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	for i := range f.routes {
		rt := &f.routes[i]
		if !slices.Contains(rt.methods, r.Method) {
			continue
		}
		if _, ok := patternVar(rt.pattern, p, ""); ok {
			// As ServeMux does, the request records its pattern;
			// pathVar reads the variables back from it: no context
			// value, no copy of the request.
			r.Pattern = rt.pattern
			rt.h.ServeHTTP(w, r)
			return
		}
	}
	// pathVar must not take an outer ServeMux's pattern for ours.
	r.Pattern = ""
	f.mux.ServeHTTP(w, r)
}

// pathVar returns the route variable name of a public request, whether
// fastRoutes or mux routed it.
func pathVar(r *http.Request, name string) string {
	if r.Pattern == "" {
		return mux.Vars(r)[name]
	}
	v, _ := patternVar(r.Pattern, r.URL.Path, name)
	return v
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
//     whose handler checks its own path variable (checksOwnPath: object
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
		info := infoOf(r)
		label := func(route string) {
			if info != nil {
				info.route = route
			}
		}
		switch {
		case r.Method == http.MethodOptions && r.URL.Path == "*":
			label("options")
			w.Header().Set("Allow", methods)
			w.WriteHeader(http.StatusNoContent)
		case p == "" || p[0] != '/':
			writeProblem(w, r, probBadRequest, "The request target must be a path.")
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
			writeProblem(w, r, probNonCanonicalPath,
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

// fastPattern reports whether patternVar understands pattern.
func fastPattern(pattern string) bool {
	if pattern == "" || pattern[0] != '/' {
		return false
	}
	vars := map[string]bool{}
	for segs := strings.Split(pattern[1:], "/"); len(segs) > 0; segs = segs[1:] {
		seg := segs[0]
		if !strings.ContainsAny(seg, "{}") {
			if seg == "" || seg == "." || seg == ".." {
				return false
			}
			continue
		}
		if len(seg) < 3 || seg[0] != '{' || seg[len(seg)-1] != '}' || strings.ContainsAny(seg[1:len(seg)-1], "{}") {
			return false
		}
		name, re, hasRE := strings.Cut(seg[1:len(seg)-1], ":")
		if name == "" || vars[name] || hasRE && (re != ".+" || len(segs) > 1) {
			return false
		}
		vars[name] = true
	}
	return true
}

// patternVar matches path against a pattern of fastPattern and returns
// the value of variable name, as mux would: {var} is a non-empty segment
// and {var:.+} the non-empty rest of the path, without a newline (the
// regexp "." does not match one).
func patternVar(pattern, path, name string) (string, bool) {
	var val string
	for pattern != "" {
		if path == "" || path[0] != '/' {
			return "", false
		}
		pattern, path = pattern[1:], path[1:]
		pseg, prest := pattern, ""
		if i := strings.IndexByte(pattern, '/'); i >= 0 {
			pseg, prest = pattern[:i], pattern[i:]
		}
		if strings.HasSuffix(pseg, ":.+}") {
			if path == "" || strings.IndexByte(path, '\n') >= 0 {
				return "", false
			}
			if pseg[1:len(pseg)-4] == name {
				val = path
			}
			return val, true
		}
		seg, rest := path, ""
		if i := strings.IndexByte(path, '/'); i >= 0 {
			seg, rest = path[:i], path[i:]
		}
		if pseg != "" && pseg[0] == '{' {
			if seg == "" {
				return "", false
			}
			if pseg[1:len(pseg)-1] == name {
				val = seg
			}
		} else if seg != pseg {
			return "", false
		}
		pattern, path = prest, rest
	}
	return val, path == ""
}

// pathChecker marks a route handler that checks its own path variable
// (an object key), so that cleanPaths hands it requests whose path is not
// clean instead of refusing them.
type pathChecker struct{ http.Handler }

// checksOwnPath marks h as a pathChecker.
func checksOwnPath(h http.Handler) http.Handler { return pathChecker{h} }

// tableMethods lists the methods of a route table, for OPTIONS *.
func tableMethods(routes []route) string {
	var list []string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete} {
		if slices.ContainsFunc(routes, func(rt route) bool { return slices.Contains(rt.methods, m) }) {
			list = append(list, m)
		}
	}
	return strings.Join(list, ", ")
}
