package gateway

import (
	"net/http"
	"slices"
	"strings"

	"github.com/gorilla/mux"
)

// fastRoutes sits in front of the public mux router and serves the
// requests that mux would hand to a route's handler, with the same
// handler and the same variables, but without mux's regexps or its
// per-request allocations. Everything else (paths mux would clean with a
// 301, unknown paths, wrong methods) goes on to mux unchanged.
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

func (f *fastRoutes) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if p := r.URL.Path; cleanPath(p) {
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

// cleanPath reports whether mux leaves p as it is, rather than
// redirecting to its cleaned form: p starts with "/" and has no empty,
// "." or ".." segment, a trailing slash aside.
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
