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
)

type ctxKey int

const requestIDKey ctxKey = 0

func requestID(r *http.Request) string {
	id, _ := r.Context().Value(requestIDKey).(string)
	return id
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
		n, err = io.Copy(struct{ io.Writer }{w.ResponseWriter}, src)
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

// instrument gives every request an id, common headers (public routes),
// a log line and metrics.
func (s *Server) instrument(route string, public bool, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := newRequestID()
		r = r.WithContext(context.WithValue(r.Context(), requestIDKey, id))
		rec := &recorder{ResponseWriter: w}
		hd := w.Header()
		hd.Set("X-Request-Id", id)
		if public {
			// SPEC §3: on every public response, errors included.
			hd.Set("Cache-Control", "no-store")
			hd.Set("X-Content-Type-Options", "nosniff")
			hd.Set("Referrer-Policy", "no-referrer")
		}
		defer func() {
			status := rec.status
			if status == 0 {
				status = http.StatusOK
			}
			s.metrics.observe(route, r.Method, status, time.Since(start), rec.bytes)
			level := slog.LevelInfo
			if status == http.StatusNotFound || status == http.StatusRequestedRangeNotSatisfiable || route == "healthz" || route == "metrics" {
				level = slog.LevelDebug
			}
			s.log.Log(r.Context(), level, "http", "request_id", id, "route", route, "method", r.Method,
				"status", status, "bytes", rec.bytes, "duration_ms", strconv.FormatFloat(float64(time.Since(start).Microseconds())/1000, 'f', 1, 64))
		}()
		h(rec, r)
	})
}
