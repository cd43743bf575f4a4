package public

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dlgate/dlgate/gateway/metrics"
	"github.com/dlgate/dlgate/internal/refusal"
	"github.com/dlgate/dlgate/token"
)

// BenchmarkRefusalBound is what the refusal limit adds to a request,
// without it (bare) and with it: "404" answers the generic 404 (a refusal
// that counts), "ok" answers 200 at once (standing in for a download).
// "penalty elsewhere" has another client under penalty, so every request
// also looks itself up.
func BenchmarkRefusalBound(b *testing.B) {
	keys := token.NewKeys([]byte("0123456789abcdef0123456789abcdef"))
	req := httptest.NewRequest(http.MethodGet, "/d/"+keys.Derive(token.Link, "l1"), nil)
	for _, answer := range []string{"404", "ok"} {
		for _, variant := range []string{"bare", "bounded", "bounded/penalty elsewhere"} {
			b.Run(answer+"/"+variant, func(b *testing.B) {
				h := New(Config{Keys: keys, Log: slog.New(slog.DiscardHandler), Metrics: metrics.New("test"),
					ClientAddr: func(*http.Request) netip.Addr { return netip.MustParseAddr("192.0.2.1") }, Now: time.Now})
				var handler http.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
					if answer == "404" {
						w.WriteHeader(http.StatusNotFound)
						return
					}
					w.WriteHeader(http.StatusOK)
				})
				if variant != "bare" {
					handler = h.Bound(token.Link, handler)
				}
				if strings.HasSuffix(variant, "elsewhere") {
					k := h.refusals.lim.Key(netip.MustParseAddr("198.51.100.9"), string(token.Link), "x")
					for range refusal.DefaultBurst {
						h.refusals.lim.Refused(k, time.Now().Add(time.Hour), 1) // a penalty for the next hour
					}
				}
				w := discardWriter{http.Header{}}
				b.ReportAllocs()
				for b.Loop() {
					handler.ServeHTTP(w, req)
				}
			})
		}
	}
}

type discardWriter struct{ h http.Header }

func (w discardWriter) Header() http.Header         { return w.h }
func (w discardWriter) Write(p []byte) (int, error) { return len(p), nil }
func (w discardWriter) WriteHeader(int)             {}
