package gateway

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/gorilla/mux"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/token"
)

// routeLog keeps the route label of each access line.
type routeLog struct {
	mu     sync.Mutex
	routes []string
}

func (l *routeLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *routeLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *routeLog) WithGroup(string) slog.Handler            { return l }
func (l *routeLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "http" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "route" {
			l.mu.Lock()
			l.routes = append(l.routes, a.Value.String())
			l.mu.Unlock()
		}
		return true
	})
	return nil
}

func (l *routeLog) last() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.routes) == 0 {
		return ""
	}
	return l.routes[len(l.routes)-1]
}

// routingServer is a Server without ledger or store, for routing alone.
func routingServer(tb testing.TB, logger slog.Handler) *Server {
	tb.Helper()
	s, err := New(Options{Ledger: struct{ ledger.Ledger }{}, Store: struct{ storage.Store }{},
		Secret: []byte("0123456789abcdef0123456789abcdef"), PublicURL: "http://gateway.test", Logger: slog.New(logger)})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// echoRoutes is the public table with handlers that answer the route
// variables they see.
func echoRoutes(s *Server) []route {
	routes := s.publicRoutes()
	for i := range routes {
		routes[i].h = echo
	}
	return routes
}

var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	route := ""
	if info := httpx.InfoOf(r); info != nil {
		route = info.Route
	}
	json.NewEncoder(w).Encode(map[string]string{ //nolint:errcheck // a recorder
		"token": mux.Vars(r)["token"], "name": mux.Vars(r)["name"], "route": route,
	})
})

type routingAnswer struct {
	Status                       int
	Allow, Location, ContentType string
	CacheControl, Route, Body    string
}

func serveRouting(h http.Handler, log *routeLog, method, target, rawPath string) routingAnswer {
	req := httptest.NewRequest(method, target, nil)
	if rawPath != "" {
		req.URL.Path, req.URL.RawPath = rawPath, ""
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := rec.Result()
	body, _ := io.ReadAll(res.Body)
	return routingAnswer{Status: res.StatusCode, Allow: res.Header.Get("Allow"), Location: res.Header.Get("Location"),
		ContentType: res.Header.Get("Content-Type"), CacheControl: res.Header.Get("Cache-Control"), Route: log.last(),
		Body: strings.ReplaceAll(string(body), res.Header.Get("X-Request-Id"), "ID")}
}

// templateRouter is the public table routed by mux's own path templates
// (regular expressions), for the router to be held against: the same
// wrapper, the same cleaning, the same 404 and 405.
func templateRouter(s *Server, routes []route) http.Handler {
	r := mux.NewRouter().SkipClean(true)
	for _, rt := range routes {
		r.Handle(rt.pattern, httpx.Named(rt.name, rt.h)).Methods(rt.methods...)
	}
	r.NotFoundHandler = httpx.Named("unknown", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		problem.Write(w, req, problem.NotFound, "")
	}))
	r.MethodNotAllowedHandler = httpx.Named("method_not_allowed", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", allowed(r, req))
		problem.Write(w, req, problem.MethodNotAllowed, "")
	}))
	return s.wrap(true, s.limitPublicBodies(cleanPaths(r, r, nil, false, tableMethods(routes))))
}

// routers returns the public router and mux's template router of the same
// table, and their access-line routes.
func routers(t *testing.T) (plain, templates http.Handler, plainLog, templateLog *routeLog) {
	plainLog, templateLog = &routeLog{}, &routeLog{}
	p, m := routingServer(t, plainLog), routingServer(t, templateLog)
	return p.router(true, echoRoutes(p)), templateRouter(m, echoRoutes(m)), plainLog, templateLog
}

// The router's plain segment matching answers exactly as mux's path
// templates do: same status, headers, route label and variables.
func TestTheRouterAnswersAsMuxTemplatesDo(t *testing.T) {
	plain, templates, plainLog, templateLog := routers(t)
	s := routingServer(t, slog.DiscardHandler)
	link, session := s.keys.Derive(token.Link, "l1"), s.keys.Derive(token.Session, "s1")
	for _, c := range []struct{ method, target string }{
		{"GET", "/d/" + link}, {"HEAD", "/d/" + link}, {"POST", "/d/" + link},
		{"GET", "/d/" + link + "/name.pdf"}, {"POST", "/d/" + link + "/sessions"},
		{"GET", "/s/" + session}, {"GET", "/s/" + session + "/a/b.txt"},
		{"GET", "/d/T/name.pdf"}, {"HEAD", "/d/T/name.pdf"}, {"GET", "/d/T/a/b/c.txt"},
		{"GET", "/d/T/sessions"}, {"HEAD", "/d/T/sessions"}, {"POST", "/d/T/sessions"},
		{"POST", "/d/T/sessions/x"}, {"POST", "/d/T/x"}, {"GET", "/d/T/sessions?x=1"},
		{"GET", "/s/T"}, {"HEAD", "/s/T"}, {"GET", "/s/T/x"}, {"GET", "/s/T/sessions"},
		{"GET", "/d/T/R%C3%A9sum%C3%A9%202026.pdf"}, {"GET", "/d/T/a%2Fb"}, {"GET", "/d/a%2Fb"},
		{"GET", "/d/T/%FF%FE"}, {"GET", "/d/%0A/x"}, {"GET", "/d/T/a%0Db"}, {"GET", "/d/T/x/"},
		{"GET", "/d/T/..."}, {"GET", "/d/T/a%0Ab"}, {"POST", "/s/T"}, {"POST", "/s/T/x"},
		{"PUT", "/d/T"}, {"PUT", "/d/T/sessions"}, {"DELETE", "/d/T/x"}, {"get", "/d/T"},
		{"GET", "/d/"}, {"GET", "/d"}, {"GET", "/d/T/"}, {"GET", "/d//x"}, {"GET", "//d/T"},
		{"GET", "/d/./T"}, {"GET", "/d/T/../x"}, {"GET", "/d/T/."}, {"GET", "/d/T//x"},
		{"GET", "/d/T/%2E%2E"}, {"GET", "/d/T/../x?q=1"}, {"POST", "//d/T/sessions"},
		{"POST", "/d/T//sessions"}, {"POST", "/d/T/x/../sessions"}, {"PUT", "/d/./T"},
		{"DELETE", "/d/T/."}, {"GET", "/D/T"}, {"GET", "/x"}, {"GET", "/"}, {"OPTIONS", "*"},
	} {
		got := serveRouting(plain, plainLog, c.method, c.target, "")
		want := serveRouting(templates, templateLog, c.method, c.target, "")
		if got != want {
			t.Errorf("%s %s:\nplain     %+v\ntemplates %+v", c.method, c.target, got, want)
		}
	}
}

// Every path of a few segments, clean or not, in every method: the same
// answers from the router and from mux's templates.
func TestTheRouterAnswersAsMuxTemplatesDoOnEveryShortPath(t *testing.T) {
	plain, templates, plainLog, templateLog := routers(t)
	segs := []string{"d", "s", "T", "sessions", ".", "..", "", "a\nb", "\xff"}
	paths := []string{""}
	for n, from := 0, 0; n < 4; n++ {
		to := len(paths)
		for _, p := range paths[from:to] {
			for _, s := range segs {
				paths = append(paths, p+"/"+s)
			}
		}
		from = to
	}
	for _, p := range paths[1:] {
		if cleanPath(p) != (muxCleanPath(p) == p) {
			t.Errorf("cleanPath(%q) = %v, mux cleans it to %q", p, cleanPath(p), muxCleanPath(p))
		}
		for _, m := range []string{"GET", "HEAD", "POST", "PUT"} {
			got := serveRouting(plain, plainLog, m, "/", p)
			want := serveRouting(templates, templateLog, m, "/", p)
			if got != want {
				t.Errorf("%s %q:\nplain     %+v\ntemplates %+v", m, p, got, want)
			}
		}
	}
}

// muxCleanPath is gorilla/mux's cleanPath (v1.8.1).
func muxCleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if p[len(p)-1] == '/' && np != "/" {
		np += "/"
	}
	return np
}

// A route table holds plain templates only: the router refuses anything
// else when it is built, rather than match it differently from mux.
func TestRoutePatternsArePlainTemplates(t *testing.T) {
	for p, ok := range map[string]bool{
		"/d/{token}": true, "/d/{token}/sessions": true, "/d/{token}/{name:.+}": true, "/x": true,
		"/debug/pprof/{profile:.*}": true, "/v1/links": true,
		"/d/{token:[a-z]+}": false, "/d/{name:.+}/x": false, "/d/pre{token}": false, "/d/{a}/{a}": false,
		"/d//x": false, "d/{token}": false, "": false,
		"/{a}/{b}/{c}/{d}": true, "/{a}/{b}/{c}/{d}/{e}": false,
	} {
		if plainPattern(p) != ok {
			t.Errorf("plainPattern(%q) = %v", p, !ok)
		}
	}
	s := routingServer(t, slog.DiscardHandler)
	for _, rt := range append(s.publicRoutes(), s.adminRoutes()...) {
		if !plainPattern(rt.pattern) {
			t.Errorf("route %s has pattern %q, not a plain template", rt.name, rt.pattern)
		}
	}
}

// A GET, HEAD or POST of a link or session URL whose token this gateway
// did not mint is the generic 404 of its kind, labelled with its route,
// before any route is tried and without the ledger (which this server
// does not have: any call would panic).
func TestForgedTokensAreRefusedBeforeRouting(t *testing.T) {
	log := &routeLog{}
	s := routingServer(t, log)
	h := s.PublicHandler()
	forged := strings.Repeat("A", token.Len)
	sessionAsLink := s.keys.Derive(token.Session, "s1") // minted, but for another kind
	for _, c := range []struct {
		method, target, route, problem string
		status                         int
	}{
		{"GET", "/d/" + forged, "link", "link-unavailable", 404},
		{"HEAD", "/d/" + forged + "/file.bin", "link", "link-unavailable", 404},
		{"POST", "/d/" + forged, "link", "link-unavailable", 404},
		{"POST", "/d/" + forged + "/sessions", "mint", "link-unavailable", 404},
		{"GET", "/d/" + forged + "/sessions", "link", "link-unavailable", 404},
		{"GET", "/d/" + sessionAsLink, "link", "link-unavailable", 404},
		{"GET", "/s/" + forged, "session", "session-unavailable", 404},
		{"GET", "/s/" + forged + "/x", "session", "session-unavailable", 404},
		{"POST", "/s/" + forged, "method_not_allowed", "method-not-allowed", 405},
		{"PUT", "/d/" + forged, "method_not_allowed", "method-not-allowed", 405},
	} {
		got := serveRouting(h, log, c.method, c.target, "")
		if got.Status != c.status || got.Route != c.route || c.method != "HEAD" && !strings.Contains(got.Body, "/"+c.problem+`"`) {
			t.Errorf("%s %s = %d, route %q, body %s; want %d, route %q, problem %s", c.method, c.target, got.Status, got.Route, got.Body, c.status, c.route, c.problem)
		}
	}
}

// BenchmarkPublicRouting is GET /d/<43 characters> through the router:
// "noop" answers 200 from an empty handler (a minted token), "forged" the
// 404 of a token this gateway did not mint.
func BenchmarkPublicRouting(b *testing.B) {
	for _, handler := range []string{"noop", "forged"} {
		b.Run(handler, func(b *testing.B) {
			s := routingServer(b, slog.DiscardHandler)
			tok := strings.Repeat("A", token.Len)
			routes := s.publicRoutes()
			if handler == "noop" {
				tok = s.keys.Derive(token.Link, "l1")
				for i := range routes {
					routes[i].h = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
				}
			}
			req := httptest.NewRequest(http.MethodGet, "/d/"+tok, nil)
			h := s.router(true, routes)
			w := discardWriter{http.Header{}}
			b.ReportAllocs()
			for b.Loop() {
				h.ServeHTTP(w, req)
			}
		})
	}
}

type discardWriter struct{ h http.Header }

func (w discardWriter) Header() http.Header         { return w.h }
func (w discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w discardWriter) WriteHeader(int)             {}

// The refusal limit reads a request's token from its path without
// routing (httpx.TokenPath): on every public route it is the token the
// route matched.
func TestTheTokenOfAPathIsTheRoutesToken(t *testing.T) {
	tok := strings.Repeat("T", token.Len)
	s := routingServer(t, slog.DiscardHandler)
	for _, path := range []string{"/d/" + tok, "/d/" + tok + "/f.bin", "/d/" + tok + "/a/b", "/d/" + tok + "/sessions",
		"/s/" + tok, "/s/" + tok + "/f.bin", "/d/short", "/s/x/y"} {
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			routes := s.publicRoutes()
			var got, want string
			matched := false
			for i := range routes {
				routes[i].h = http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
					_, got, _, _ = httpx.TokenPath(r.URL.Path)
					want, matched = mux.Vars(r)["token"], true
				})
			}
			// The router in front of forgedTokens: these are not minted.
			r := mux.NewRouter()
			for _, rt := range routes {
				r.NewRoute().Methods(rt.methods...).MatcherFunc(pathMatcher(rt.pattern, false)).Handler(rt.h)
			}
			r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(method, path, nil))
			if matched && len(want) == token.Len && got != want {
				t.Errorf("%s %s: TokenPath = %q, the route's token = %q", method, path, got, want)
			}
		}
	}
}
