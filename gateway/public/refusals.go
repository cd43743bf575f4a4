package public

import (
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/metrics"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/internal/refusal"
	"github.com/dlgate/dlgate/token"
)

// Refusals that spend nothing are bounded per client and token
// (internal/refusal): a client that draws refusal.DefaultBurst of them on
// one token within refusal.DefaultWindow is answered 429
// too-many-refusals, with a Retry-After that doubles from 5 s to 5 min,
// until it stops; the check runs before any lookup, so a throttled
// request never reaches the database.
//
// A 429 alone does not bound a client that ignores Retry-After: wget2
// --chunk-size retries one at once, thousands of times a second (measured
// with wget2 1.99.1, docs/api.md). So the 429 is held for up to
// RefusalHold before it is sent: such a client waits for its answer
// instead. Holding costs a connection and a goroutine, so at most
// maxHeldRefusals requests are held at once, and refusal.DefaultHeldPerKey
// of one client and token; any other throttled request is answered at
// once with Connection: close.

// maxHeldRefusals bounds the throttled requests held at once, over all
// clients.
const maxHeldRefusals = 256

// refusalGuard is the server's refusal limiter and its holding room.
type refusalGuard struct {
	tokens *refusal.Tokens
	lim    *refusal.Limiter
	hold   time.Duration // <= 0: never hold
	slots  chan struct{} // one per held request

	keys       *token.Keys
	clientAddr func(*http.Request) netip.Addr
	now        func() time.Time
	log        *slog.Logger
	metrics    *metrics.Metrics
}

func newRefusalGuard(c Config) *refusalGuard {
	g := &refusalGuard{tokens: refusal.NewTokens(0), lim: refusal.New(refusal.Config{}), hold: c.RefusalHold,
		slots: make(chan struct{}, maxHeldRefusals), keys: c.Keys, clientAddr: c.ClientAddr, now: c.Now, log: c.Log, metrics: c.Metrics}
	c.Metrics.Reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gateway_refusal_keys", Help: "Client and token pairs the refusal limiter remembers (bounded).",
	}, func() float64 { return float64(g.lim.Len()) }))
	return g
}

// spendsNothing reports whether status is a refusal the limiter counts:
// the generic 404, 409 (a Range on a link URL, an idempotency conflict)
// and 416. Not 401 (a credential to fix), not 403 (a spent budget), not
// the concurrency cap's 429: each of those tells the client something it
// can act on, and its own rules bound it.
func spendsNothing(status int) bool {
	return status == http.StatusNotFound || status == http.StatusConflict || status == http.StatusRequestedRangeNotSatisfiable
}

// Bound wraps the handler of a public route whose {token} is a
// token of kind: a client and token under penalty are answered 429 before
// h runs, and h's refusals are counted after it. While no client is under
// penalty, a request that is not refused pays one atomic load.
func (h *Handler) Bound(kind token.Kind, next http.Handler) http.Handler {
	g := h.refusals
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !g.lim.Quiet() {
			if now, tok := g.now(), tokenOf(r); g.lim.AnyPenalty(now) && tok != "" {
				k := g.lim.Key(g.clientAddr(r), string(kind), tok)
				if p, ok := g.lim.Throttled(k, now); ok {
					g.refuseThrottled(w, r, k, p)
					return
				}
			}
		}
		rec := httpx.RecorderOf(w)
		if rec == nil {
			rec = &httpx.Recorder{ResponseWriter: w}
			w = rec
		}
		next.ServeHTTP(w, r)
		if spendsNothing(rec.Status) {
			g.countRefusal(r, kind)
		}
	})
}

// tokenOf is the {token} of a request on a public route, "" when it does
// not have a token's length (no lookup is ever asked about it).
func tokenOf(r *http.Request) string {
	if tok := mux.Vars(r)["token"]; len(tok) == token.Len {
		return tok
	}
	return ""
}

// countRefusal counts a refusal of r's token for r's client and logs the
// penalty it starts, once per penalty. Only the refusals of genuine
// tokens count (refusal.Tokens), and whether a token is genuine is asked
// only when it is refused a second time: a malformed or forged token's
// 404 costs no lookup, no more than a 429 would, so it is never
// penalised, and a spray of such tokens must not crowd the table.
func (g *refusalGuard) countRefusal(r *http.Request, kind token.Kind) {
	tok := tokenOf(r)
	if tok == "" {
		return
	}
	n := g.tokens.Refused(string(kind), tok, func() bool { return minted(r, kind, tok) || g.keys.Check(kind, tok) })
	if n == 0 {
		return
	}
	addr := g.clientAddr(r)
	p, started := g.lim.Refused(g.lim.Key(addr, string(kind), tok), g.now(), n)
	if !started {
		return
	}
	route := "unknown"
	if info := httpx.InfoOf(r); info != nil {
		route = info.Route
	}
	g.metrics.RefusalPenalties.WithLabelValues(route).Inc()
	// The link or session id is not known without a lookup; a prefix of
	// the token's SHA-256 (what the database stores) names it instead.
	g.log.LogAttrs(r.Context(), slog.LevelWarn, "refusals throttled", slog.String("client", addr.String()),
		slog.String("token_hash", hex.EncodeToString(token.Hash(tok)[:6])), slog.Int("strike", p.Strike),
		slog.Int("retry_after", retryAfter(p.Left)), slog.String("user_agent", UserAgent(r, 80)))
}

// refuseThrottled answers a request of a client and token under penalty:
// 429 too-many-refusals with the penalty's Retry-After, held first when a
// holding slot is free.
func (g *refusalGuard) refuseThrottled(w http.ResponseWriter, r *http.Request, k refusal.Key, p refusal.Penalty) {
	answer := "closed"
	if d := min(g.hold, p.Left); d > 0 && g.take(k) {
		answer = "held"
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
		}
		g.release(k)
		p.Left -= d
	} else {
		// Nothing else slows a client that retries at once: it must at
		// least open a new connection.
		w.Header().Set("Connection", "close")
	}
	route := "unknown"
	if info := httpx.InfoOf(r); info != nil {
		route = info.Route
	}
	g.metrics.RefusalsThrottled.WithLabelValues(route, answer).Inc()
	// RFC 9110 §10.2.3: counted from when the answer is sent.
	w.Header().Set("Retry-After", strconv.Itoa(retryAfter(p.Left)))
	problem.Write(w, r, problem.TooManyRefusals, "")
}

// take reserves a holding slot for k, globally and per key.
func (g *refusalGuard) take(k refusal.Key) bool {
	select {
	case g.slots <- struct{}{}:
	default:
		return false
	}
	if !g.lim.Hold(k) {
		<-g.slots
		return false
	}
	return true
}

func (g *refusalGuard) release(k refusal.Key) {
	g.lim.Release(k)
	<-g.slots
}

// retryAfter is d in whole seconds, rounded up, at least 1.
func retryAfter(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}
