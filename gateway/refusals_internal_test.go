package gateway

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dlgate/dlgate/internal/refusal"
	"github.com/dlgate/dlgate/token"
)

// pathTokenOf must read the token pathVar reads, on every public route,
// routed by fastRoutes or by mux.
func TestPathTokenOfIsPathVar(t *testing.T) {
	tok := strings.Repeat("T", token.Len)
	for _, fast := range []bool{true, false} {
		for _, path := range []string{"/d/" + tok, "/d/" + tok + "/f.bin", "/d/" + tok + "/a/b", "/d/" + tok + "/sessions",
			"/s/" + tok, "/s/" + tok + "/f.bin", "/d/short", "/s/x/y"} {
			for _, method := range []string{http.MethodGet, http.MethodPost} {
				s := routingServer(t, slog.DiscardHandler)
				routes := s.publicRoutes()
				var got, want string
				for i := range routes {
					routes[i].h = http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
						got, want = pathTokenOf(r), pathVar(r, "token")
					})
				}
				s.router(true, fast, routes).ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(method, path, nil))
				if got != want {
					t.Errorf("fast %v, %s %s: pathTokenOf = %q, pathVar = %q", fast, method, path, got, want)
				}
			}
		}
	}
}

// BenchmarkRefusalBound is what the refusal limit adds to a request of
// the public router, without it (bare: the route table's handlers
// unwrapped) and with it: on "404", the cheapest refusal (a forged link
// token, no lookup); on "ok", a request its handler answers 200 at once
// (standing in for a download). "penalty elsewhere" has another client
// under penalty, so every request also looks itself up.
func BenchmarkRefusalBound(b *testing.B) {
	req := httptest.NewRequest(http.MethodGet, "/d/"+strings.Repeat("A", token.Len), nil)
	for _, answer := range []string{"404", "ok"} {
		for _, variant := range []string{"bare", "bounded", "bounded/penalty elsewhere"} {
			b.Run(answer+"/"+variant, func(b *testing.B) {
				s := routingServer(b, slog.DiscardHandler)
				handlers := map[string]http.HandlerFunc{"mint": s.handleMint, "link": s.handleLink, "session": s.handleSession}
				if answer == "ok" {
					ok := func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }
					handlers = map[string]http.HandlerFunc{"mint": ok, "link": ok, "session": ok}
				}
				routes := s.publicRoutes()
				for i := range routes {
					routes[i].h = handlers[routes[i].name]
					if variant != "bare" {
						kind := token.Link
						if routes[i].name == "session" {
							kind = token.Session
						}
						routes[i].h = s.boundRefusals(kind, routes[i].h)
					}
				}
				if strings.HasSuffix(variant, "elsewhere") {
					k := s.refusals.lim.Key(netip.MustParseAddr("198.51.100.9"), string(token.Link), "x")
					for range refusal.DefaultBurst {
						s.refusals.lim.Refused(k, time.Now().Add(time.Hour), 1) // a penalty for the next hour
					}
				}
				h := s.router(true, true, routes)
				w := discardWriter{http.Header{}}
				b.ReportAllocs()
				for b.Loop() {
					h.ServeHTTP(w, req)
				}
			})
		}
	}
}
