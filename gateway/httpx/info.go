// Package httpx is the gateway's HTTP grammar and per-request plumbing,
// with nothing of the gateway's own rules: what a request carries through
// the layers (its id, route and client: Info), the log handler that
// stamps it on every line, the response recorder, content negotiation
// (WantsHTML), Content-Disposition, representation digests (RFC 9530,
// RFC 3230), conditional requests (RFC 9110 §13) and JSON answers.
package httpx

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"

	"github.com/dlgate/dlgate/token"
)

// Info is what the listener's wrapper knows of a request, filled in as
// the request goes down the layers and read by its access line.
type Info struct {
	ID     string // the request id (X-Request-Id)
	Route  string // the route label of logs and metrics, once routed
	Public bool   // on the public listener
	// HTML: the request is a person's browser navigating (WantsHTML),
	// whose error answers are pages (SPEC §3); decided once, by the
	// public listener's wrapper.
	HTML bool
	// Client is the client address once the caller was authenticated
	// (trusted proxies applied, SPEC §8).
	Client string
	// Actor is the admin API key the request authenticated with (its id,
	// or "bootstrap" for the admin token), once it did.
	Actor string
	// Affinity says how session affinity answered a link URL (SPEC §5):
	// "reused" when the request was sent to the client's existing
	// session instead of claiming, "minted" when it claimed one.
	Affinity string
	// Delivery says how much of what a response of object bytes was to
	// send its client acknowledged (SPEC §1): "complete", "partial" or
	// "none"; "" for a response that sent no object bytes. BytesAcked
	// counts those bytes; AckMeasured says they are the client's TCP
	// acknowledgements, not only what was written.
	Delivery    string
	BytesAcked  int64
	AckMeasured bool
	// MintedKind and Minted: the router found Minted, a token of
	// MintedKind, minted by this gateway (public.WithMinted).
	MintedKind token.Kind
	Minted     string
}

type infoKey struct{}

// WithInfo returns ctx carrying info.
func WithInfo(ctx context.Context, info *Info) context.Context {
	return context.WithValue(ctx, infoKey{}, info)
}

// InfoOf returns r's Info, nil outside the listeners' wrapper.
func InfoOf(r *http.Request) *Info {
	info, _ := r.Context().Value(infoKey{}).(*Info)
	return info
}

// RequestID returns r's request id, "" outside the wrapper.
func RequestID(r *http.Request) string {
	if info := InfoOf(r); info != nil {
		return info.ID
	}
	return ""
}

// NewRequestID returns a fresh random request id.
func NewRequestID() string {
	var b [12]byte
	rand.Read(b[:]) //nolint:errcheck // never fails (Go 1.24+)
	return hex.EncodeToString(b[:])
}

// Named labels the request with its route for logs and metrics.
func Named(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if info := InfoOf(r); info != nil {
			info.Route = route
		}
		h.ServeHTTP(w, r)
	})
}

// LogHandler adds the request's id and route to every record logged with
// the request's context, so that "streamed", "session minted" and every
// error line can be matched to the access line of its request.
func LogHandler(h slog.Handler) slog.Handler { return contextHandler{h} }

type contextHandler struct{ slog.Handler }

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if info, _ := ctx.Value(infoKey{}).(*Info); info != nil {
		r.AddAttrs(slog.String("request_id", info.ID), slog.String("route", info.Route))
	}
	return h.Handler.Handle(ctx, r)
}

func (h contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(attrs)}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name)}
}

// Recorder remembers a response's status and counts its body bytes. It
// forwards ReadFrom so that copying from an *os.File still reaches the
// connection's sendfile path, and Unwrap so http.ResponseController finds
// deadlines.
type Recorder struct {
	http.ResponseWriter
	Status int
	Bytes  int64
}

func (w *Recorder) WriteHeader(code int) {
	if w.Status == 0 {
		w.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *Recorder) Write(p []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	w.Bytes += int64(n)
	return n, err
}

func (w *Recorder) ReadFrom(src io.Reader) (int64, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
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
		buf := GetBuf()
		n, err = io.CopyBuffer(struct{ io.Writer }{w.ResponseWriter}, src, buf)
		PutBuf(buf)
	}
	w.Bytes += n
	return n, err
}

func (w *Recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *Recorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// RecorderOf returns the Recorder under w, nil when there is none.
func RecorderOf(w http.ResponseWriter) *Recorder {
	for {
		switch x := w.(type) {
		case *Recorder:
			return x
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return nil
		}
	}
}

// ErrBodyStalled is a request body that stopped arriving: the answer is
// 408, and whatever the body was feeding (an upload) is abandoned.
var ErrBodyStalled = errors.New("gateway: request body stalled")
