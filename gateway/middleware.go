package gateway

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/public"
	"github.com/dlgate/dlgate/ledger"
)

// wrap gives every request of a listener an id, the listener's common
// headers, an access line and metrics. It sits around the whole router so
// that nothing the router answers on its own escapes it.
func (s *Server) wrap(public bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := &httpx.Info{ID: httpx.NewRequestID(), Route: "unknown", Public: public, HTML: public && httpx.WantsHTML(r)}
		// One wait for the database per request (ledger.Wait): however
		// many ledger calls it makes, together they wait at most
		// GATEWAY_DB_TIMEOUT.
		r = r.WithContext(httpx.WithInfo(ledger.WithWait(r.Context()), info))
		rec := &httpx.Recorder{ResponseWriter: w}
		hd := w.Header()
		hd.Set("X-Request-Id", info.ID)
		if public {
			// SPEC §3: on every public response, errors included.
			hd.Set("Cache-Control", "no-store")
			hd.Set("X-Content-Type-Options", "nosniff")
			hd.Set("Referrer-Policy", "no-referrer")
			if s.HSTS != "" {
				hd.Set("Strict-Transport-Security", s.HSTS)
			}
		}
		defer s.accessLog(r, info, rec, start)
		h.ServeHTTP(rec, r)
	})
}

// accessLog writes the request's one access line and its metrics.
// Refusals (404, 409, 416, 429) are at info like everything else: an
// operator asking "who tried this link" needs them. Only health checks
// and scrapes are at debug.
func (s *Server) accessLog(r *http.Request, info *httpx.Info, rec *httpx.Recorder, start time.Time) {
	status := rec.Status
	if status == 0 {
		status = http.StatusOK
	}
	d := time.Since(start)
	s.metrics.Observe(info.Route, r.Method, status, d, rec.Bytes)
	level := slog.LevelInfo
	if info.Route == "healthz" || info.Route == "readyz" || info.Route == "metrics" {
		level = slog.LevelDebug
	}
	if !s.log.Enabled(r.Context(), level) {
		return
	}
	client := info.Client
	if client == "" {
		if a := s.ClientAddr(r); a.IsValid() {
			client = a.String()
		}
	}
	// The record goes to the handler as Logger.LogAttrs would hand it,
	// without the caller's PC it takes (runtime.Callers, a sixth of an
	// access line's cost; no source is logged).
	line := slog.NewRecord(time.Now(), level, accessMessage, 0)
	line.AddAttrs(slog.String("method", r.Method), slog.Int("status", status),
		slog.Int64("bytes", rec.Bytes), slog.String("duration_ms", strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64)),
		slog.String("client", client), slog.String("user_agent", public.UserAgent(r, 80)), affinityAttr(info), actorAttr(info),
		claimBatchAttr(r), deliveryAttr(info))
	s.log.Handler().Handle(r.Context(), line) //nolint:errcheck // as Logger.LogAttrs: nowhere to report it
}

// claimBatchAttr says how many claims shared the transaction that decided
// the request's claim (1: it went alone), when it made one.
func claimBatchAttr(r *http.Request) slog.Attr {
	n := ledger.WaitOf(r.Context()).ClaimBatch()
	if n == 0 {
		return slog.Attr{}
	}
	return slog.Int("claim_batch", n)
}

// actorAttr names the admin key of an authenticated admin request.
func actorAttr(info *httpx.Info) slog.Attr {
	if info.Actor == "" {
		return slog.Attr{}
	}
	return slog.String("key_id", info.Actor)
}

// deliveryAttr is the access line's record of what the client of a
// response of object bytes acknowledged (SPEC §1), when it sent any:
// delivery=complete bytes_acked=N, and measured=false when the number is
// only what was written (HTTP/2, no TCP counters).
func deliveryAttr(info *httpx.Info) slog.Attr {
	if info.Delivery == "" {
		return slog.Attr{}
	}
	attrs := []slog.Attr{slog.String("delivery", info.Delivery), slog.Int64("bytes_acked", info.BytesAcked)}
	if !info.AckMeasured {
		attrs = append(attrs, slog.Bool("measured", false))
	}
	return slog.Attr{Key: "", Value: slog.GroupValue(attrs...)}
}

// affinityAttr is the access line's record of session affinity, when the
// request had any.
func affinityAttr(info *httpx.Info) slog.Attr {
	if info.Affinity == "" {
		return slog.Attr{}
	}
	return slog.String("affinity", info.Affinity)
}

// accessMessage is the message of access lines.
const accessMessage = "http"
