package gateway

import (
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/public"
	"github.com/dlgate/dlgate/internal/logbuf"
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
		hd["X-Request-Id"] = []string{info.ID}
		if public {
			// SPEC §3: on every public response, errors included. The
			// keys are canonical and the values shared: nothing writes
			// into a header's value slice (Set and Del replace it, Add
			// outgrows its capacity of one), and WriteHeader copies them.
			hd["Cache-Control"] = noStore
			hd["X-Content-Type-Options"] = noSniff
			hd["Referrer-Policy"] = noReferrer
			if s.HSTS != "" {
				hd.Set("Strict-Transport-Security", s.HSTS)
			}
		}
		defer s.accessLog(r, info, rec, start)
		h.ServeHTTP(rec, r)
	})
}

// The values of the headers every public response carries.
var (
	noStore    = []string{"no-store"}
	noSniff    = []string{"nosniff"}
	noReferrer = []string{"no-referrer"}
)

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
	line := accessLine{method: r.Method, status: status, bytes: rec.Bytes,
		ms:     strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64),
		client: client, ua: public.UserAgent(r, 80), info: info, claimBatch: ledger.WaitOf(r.Context()).ClaimBatch()}
	now := time.Now()
	if s.lines != nil && line.write(s.lines, level, now) {
		return
	}
	s.log.Handler().Handle(r.Context(), line.record(level, now)) //nolint:errcheck // as Logger.LogAttrs: nowhere to report it
}

// accessLine is what a request's access line says.
type accessLine struct {
	method         string
	status         int
	bytes          int64
	ms, client, ua string
	info           *httpx.Info
	claimBatch     int
}

// record is the line as a record, as Logger.LogAttrs would hand it to the
// handler, without the caller's PC it takes (runtime.Callers, a sixth of
// an access line's cost; no source is logged). The context handler
// (httpx.LogHandler) adds the request id and route.
func (a accessLine) record(level slog.Level, now time.Time) slog.Record {
	r := slog.NewRecord(now, level, accessMessage, 0)
	r.AddAttrs(slog.String("method", a.method), slog.Int("status", a.status),
		slog.Int64("bytes", a.bytes), slog.String("duration_ms", a.ms),
		slog.String("client", a.client), slog.String("user_agent", a.ua), affinityAttr(a.info), actorAttr(a.info),
		claimBatchAttr(a.claimBatch), deliveryAttr(a.info))
	return r
}

// write writes the line through h's own encoder (logbuf.Line): the bytes
// record's would make through the context handler and h, without
// building the record. It reports false, having written nothing, when h
// does not write lines itself or a value needs slog's (a User-Agent
// outside ASCII). It lists the attributes record lists, in its order;
// TestTheAccessLineIsItsRecordsLine keeps the two in step.
func (a accessLine) write(h *logbuf.Handler, level slog.Level, now time.Time) bool {
	var l logbuf.Line
	if !h.Begin(&l, now, level, accessMessage) {
		return false
	}
	l.String("method", a.method)
	l.Int("status", int64(a.status))
	l.Int("bytes", a.bytes)
	l.String("duration_ms", a.ms)
	l.String("client", a.client)
	l.String("user_agent", a.ua)
	if a.info.Affinity != "" {
		l.String("affinity", a.info.Affinity)
	}
	if a.info.Actor != "" {
		l.String("key_id", a.info.Actor)
	}
	if a.claimBatch != 0 {
		l.Int("claim_batch", int64(a.claimBatch))
	}
	if a.info.Delivery != "" {
		l.String("delivery", a.info.Delivery)
		l.Int("bytes_acked", a.info.BytesAcked)
		if !a.info.AckMeasured {
			l.Bool("measured", false)
		}
	}
	l.String("request_id", a.info.ID)
	l.String("route", a.info.Route)
	ok, _ := l.Write(level) // as Logger.LogAttrs: nowhere to report an error
	return ok
}

// claimBatchAttr says how many claims shared the transaction that decided
// the request's claim (1: it went alone), when it made one.
func claimBatchAttr(n int) slog.Attr {
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
