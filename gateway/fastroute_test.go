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

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/storage"
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
		routes[i].h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Mux", map[bool]string{true: "yes", false: "no"}[mux.Vars(r) != nil])
			json.NewEncoder(w).Encode(map[string]string{ //nolint:errcheck // a recorder
				"token": pathVar(r, "token"), "name": pathVar(r, "name"), "route": infoOf(r).route,
			})
		})
	}
	return routes
}

type routingAnswer struct {
	Status                       int
	Allow, Location, ContentType string
	CacheControl, Route, Body    string
	viaMux                       bool
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
		Body:   strings.ReplaceAll(string(body), res.Header.Get("X-Request-Id"), "ID"),
		viaMux: res.Header.Get("X-Mux") == "yes"}
}

// routers returns the public router with and without fastRoutes, and
// their access-line routes.
func routers(t *testing.T) (fast, slow http.Handler, fastLog, slowLog *routeLog) {
	fastLog, slowLog = &routeLog{}, &routeLog{}
	fsrv, ssrv := routingServer(t, fastLog), routingServer(t, slowLog)
	return fsrv.router(true, true, echoRoutes(fsrv)), ssrv.router(true, false, echoRoutes(ssrv)), fastLog, slowLog
}

// fastRoutes answers exactly as mux alone does: same status, headers,
// route label and variables.
func TestFastRoutesAnswerAsMux(t *testing.T) {
	fast, slow, fastLog, slowLog := routers(t)
	tok := strings.Repeat("A", 43)
	for _, c := range []struct {
		method, target string
		viaFast        bool // fastRoutes serves it, not mux
	}{
		{"GET", "/d/" + tok, true},
		{"HEAD", "/d/" + tok, true},
		{"POST", "/d/" + tok, true},
		{"GET", "/d/T/name.pdf", true},
		{"HEAD", "/d/T/name.pdf", true},
		{"GET", "/d/T/a/b/c.txt", true},
		{"GET", "/d/T/sessions", true},
		{"HEAD", "/d/T/sessions", true},
		{"POST", "/d/T/sessions", true},
		{"POST", "/d/T/sessions/x", true},
		{"POST", "/d/T/x", true},
		{"GET", "/d/T/sessions?x=1", true},
		{"GET", "/s/T", true},
		{"HEAD", "/s/T", true},
		{"GET", "/s/T/x", true},
		{"GET", "/s/T/sessions", true},
		{"GET", "/d/T/R%C3%A9sum%C3%A9%202026.pdf", true},
		{"GET", "/d/T/a%2Fb", true},
		{"GET", "/d/a%2Fb", true},
		{"GET", "/d/T/%FF%FE", true},
		{"GET", "/d/%0A/x", true},
		{"GET", "/d/T/a%0Db", true},
		{"GET", "/d/T/x/", true},
		{"GET", "/d/T/...", true},
		{"GET", "/d/T/a%0Ab", false},
		{"POST", "/s/T", false},
		{"POST", "/s/T/x", false},
		{"PUT", "/d/T", false},
		{"PUT", "/d/T/sessions", false},
		{"DELETE", "/d/T/x", false},
		{"get", "/d/T", false},
		{"GET", "/d/", false},
		{"GET", "/d", false},
		{"GET", "/d/T/", false},
		{"GET", "/d//x", false},
		{"GET", "//d/T", false},
		{"GET", "/d/./T", false},
		{"GET", "/d/T/../x", false},
		{"GET", "/d/T/.", false},
		{"GET", "/d/T//x", false},
		{"GET", "/d/T/%2E%2E", false},
		{"GET", "/d/T/../x?q=1", false},
		{"POST", "//d/T/sessions", false},
		{"POST", "/d/T//sessions", false},
		{"POST", "/d/T/x/../sessions", false},
		{"PUT", "/d/./T", false},
		{"DELETE", "/d/T/.", false},
		{"GET", "/D/T", false},
		{"GET", "/x", false},
		{"GET", "/", false},
		{"OPTIONS", "*", false},
	} {
		name := c.method + " " + c.target
		got := serveRouting(fast, fastLog, c.method, c.target, "")
		want := serveRouting(slow, slowLog, c.method, c.target, "")
		if c.viaFast && (got.viaMux || !want.viaMux) || !c.viaFast && want.Status == http.StatusOK {
			t.Errorf("%s: %d, handler saw mux vars: %v (fast router), %v (mux router)", name, want.Status, got.viaMux, want.viaMux)
		}
		got.viaMux, want.viaMux = false, false
		if got != want {
			t.Errorf("%s:\nfast %+v\nmux  %+v", name, got, want)
		}
	}
}

// Every path of a few segments, clean or not, in every method: the same
// answers with and without fastRoutes.
func TestFastRoutesAnswerAsMuxOnEveryShortPath(t *testing.T) {
	fast, slow, fastLog, slowLog := routers(t)
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
			got := serveRouting(fast, fastLog, m, "/", p)
			want := serveRouting(slow, slowLog, m, "/", p)
			if got.viaMux && want.Status == http.StatusOK {
				t.Errorf("%s %q: mux served what fastRoutes should", m, p)
			}
			got.viaMux, want.viaMux = false, false
			if got != want {
				t.Errorf("%s %q:\nfast %+v\nmux  %+v", m, p, got, want)
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

// A pattern fastRoutes does not understand stops it there: the routes
// after it are left to mux, which tries them in order.
func TestFastRoutesStopAtAPatternTheyDoNotUnderstand(t *testing.T) {
	for p, ok := range map[string]bool{
		"/d/{token}": true, "/d/{token}/sessions": true, "/d/{token}/{name:.+}": true, "/x": true,
		"/d/{token:[a-z]+}": false, "/d/{name:.+}/x": false, "/d/pre{token}": false, "/d/{a}/{a}": false,
		"/": false, "/d/": false, "/d//x": false, "d/{token}": false, "/debug/pprof/{profile:.*}": false,
	} {
		if fastPattern(p) != ok {
			t.Errorf("fastPattern(%q) = %v", p, !ok)
		}
	}
	s := routingServer(t, slog.DiscardHandler)
	f := newFastRoutes([]route{{pattern: "/a/{x}", methods: getHead}, {pattern: "/a/{x:[0-9]+}", methods: getHead},
		{pattern: "/b/{x}", methods: getHead}}, make([]http.Handler, 3), s.PublicHandler())
	if len(f.routes) != 1 || f.routes[0].pattern != "/a/{x}" {
		t.Errorf("fast routes = %+v", f.routes)
	}
}

// Routing a request and reading its variables back allocate nothing.
func TestFastRoutesDoNotAllocate(t *testing.T) {
	var tok, name string
	h := http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { tok, name = pathVar(r, "token"), pathVar(r, "name") })
	s := routingServer(t, slog.DiscardHandler)
	routes := s.publicRoutes()
	hs := make([]http.Handler, len(routes))
	for i := range hs {
		hs[i] = h
	}
	f := newFastRoutes(routes, hs, nil)
	req := httptest.NewRequest(http.MethodGet, "/s/T/a/b.txt", nil)
	if n := testing.AllocsPerRun(100, func() { f.ServeHTTP(nil, req) }); n != 0 {
		t.Errorf("%v allocations per request", n)
	}
	if tok != "T" || name != "a/b.txt" {
		t.Errorf("token %q, name %q", tok, name)
	}
}

// BenchmarkPublicRouting is GET /d/<43 characters> with and without
// fastRoutes: "noop" answers 200 from an empty handler, "404" runs the
// real handler on a token this gateway did not mint.
func BenchmarkPublicRouting(b *testing.B) {
	req := httptest.NewRequest(http.MethodGet, "/d/"+strings.Repeat("A", 43), nil)
	for _, handler := range []string{"noop", "404"} {
		for _, fast := range []bool{false, true} {
			name := handler + "/mux"
			if fast {
				name = handler + "/fast"
			}
			b.Run(name, func(b *testing.B) {
				s := routingServer(b, slog.DiscardHandler)
				routes := s.publicRoutes()
				if handler == "noop" {
					for i := range routes {
						routes[i].h = http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
					}
				}
				h := s.router(true, fast, routes)
				w := discardWriter{http.Header{}}
				b.ReportAllocs()
				for b.Loop() {
					h.ServeHTTP(w, req)
				}
			})
		}
	}
}

type discardWriter struct{ h http.Header }

func (w discardWriter) Header() http.Header         { return w.h }
func (w discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w discardWriter) WriteHeader(int)             {}
