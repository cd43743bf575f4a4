package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

type ctxKey int

const reqInfoKey ctxKey = 0

// reqInfo is what the wrapper knows of a request: its id, the listener,
// and the route label the router fills in once it has matched.
type reqInfo struct {
	id     string
	route  string
	public bool
	client string // the client address once the caller was authenticated
	// affinity says how session affinity answered a link URL (SPEC §5):
	// "reused" when the request was sent to the client's existing
	// session instead of claiming, "minted" when it claimed one.
	affinity string
}

func infoOf(r *http.Request) *reqInfo {
	info, _ := r.Context().Value(reqInfoKey).(*reqInfo)
	return info
}

func requestID(r *http.Request) string {
	if info := infoOf(r); info != nil {
		return info.id
	}
	return ""
}

func newRequestID() string {
	var b [12]byte
	rand.Read(b[:]) //nolint:errcheck // never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// recorder remembers the status and counts body bytes. It forwards
// ReadFrom so that copying from an *os.File still reaches the connection's
// sendfile path, and Unwrap so http.ResponseController finds deadlines.
type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *recorder) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

func (w *recorder) ReadFrom(src io.Reader) (int64, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	var (
		n   int64
		err error
	)
	if rf, ok := w.ResponseWriter.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(src)
	} else {
		// HTTP/2: no sendfile; a pooled buffer instead of the 32 KiB one
		// io.Copy would allocate for every slice.
		buf := getBuf()
		n, err = io.CopyBuffer(struct{ io.Writer }{w.ResponseWriter}, src, buf)
		putBuf(buf)
	}
	w.bytes += n
	return n, err
}

func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *recorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// named labels the request with its route for logs and metrics.
func named(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if info := infoOf(r); info != nil {
			info.route = route
		}
		h.ServeHTTP(w, r)
	})
}

// wrap gives every request of a listener an id, the listener's common
// headers, an access line and metrics. It sits around the whole router so
// that nothing the router answers on its own escapes it.
func (s *Server) wrap(public bool, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := &reqInfo{id: newRequestID(), route: "unknown", public: public}
		// One wait for the database per request (ledger.Wait): however
		// many ledger calls it makes, together they wait at most
		// GATEWAY_DB_TIMEOUT.
		r = r.WithContext(context.WithValue(ledger.WithWait(r.Context()), reqInfoKey, info))
		rec := &recorder{ResponseWriter: w}
		hd := w.Header()
		hd.Set("X-Request-Id", info.id)
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
func (s *Server) accessLog(r *http.Request, info *reqInfo, rec *recorder, start time.Time) {
	status := rec.status
	if status == 0 {
		status = http.StatusOK
	}
	d := time.Since(start)
	s.metrics.observe(info.route, r.Method, status, d, rec.bytes)
	level := slog.LevelInfo
	if info.route == "healthz" || info.route == "readyz" || info.route == "metrics" {
		level = slog.LevelDebug
	}
	if !s.log.Enabled(r.Context(), level) {
		return
	}
	client := info.client
	if client == "" {
		if a := s.ClientAddr(r); a.IsValid() {
			client = a.String()
		}
	}
	s.log.LogAttrs(r.Context(), level, accessMessage, slog.String("method", r.Method), slog.Int("status", status),
		slog.Int64("bytes", rec.bytes), slog.String("duration_ms", strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64)),
		slog.String("client", client), slog.String("user_agent", userAgent(r, 80)), affinityAttr(info))
}

// affinityAttr is the access line's record of session affinity, when the
// request had any.
func affinityAttr(info *reqInfo) slog.Attr {
	if info.affinity == "" {
		return slog.Attr{}
	}
	return slog.String("affinity", info.affinity)
}

// accessMessage is the message of access lines.
const accessMessage = "http"
