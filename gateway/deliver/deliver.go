// Package deliver is the one pipeline that sends an object version's
// bytes, for link URLs and session URLs alike, the way net/http's
// serveContent is one linear function (Serve):
//
//	preconditions (RFC 9110 §13.2.2: 304, 412)
//	→ representation headers (type, length, ETag, Last-Modified, digests, disposition)
//	→ range decision (If-Range, Range: 200, 206, multipart, 416)
//	→ the meter begins (a session's slot and budget; nothing for a link's stream)
//	→ the store opened once (open and idle timeouts, first bytes peeked)
//	→ WriteHeader
//	→ the copy (sendfile from a file, splice from an S3 connection, else a
//	  pooled buffer), each slice taken from the meter, a whole file checked
//	  against its SHA-256
//	→ the end: what the connection carried and what the client
//	  acknowledged (acked.go, carried.go), told to the meter and the
//	  access line.
//
// Nothing else writes an object's body.
package deliver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/metrics"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/sessions"
	"github.com/dlgate/dlgate/storage"
)

// Config is what the pipeline needs; every field is required (the
// gateway applies the defaults of its Options once, in gateway.New).
type Config struct {
	Store   storage.Store
	Log     *slog.Logger
	Metrics *metrics.Metrics
	// WriteTimeout bounds how long one write of a response may stall
	// before the client is considered gone; slow but moving clients are
	// never cut.
	WriteTimeout time.Duration
	// OpenTimeout bounds opening an object until its first bytes arrive;
	// IdleTimeout the wait for each next byte (storeWatch).
	OpenTimeout, IdleTimeout time.Duration
	// Now is the clock conditional requests are judged by.
	Now func() time.Time
}

// Pipeline sends object versions.
type Pipeline struct {
	Config
	verifier verifier
	fixed    fixedCache
}

// New returns a pipeline over c.
func New(c Config) *Pipeline { return &Pipeline{Config: c} }

// Object is what a URL serves: a pinned version, the file name it is
// sent as, and whether the URL serves byte ranges (a session URL:
// Accept-Ranges: bytes) or only the whole object (a link URL:
// Accept-Ranges: none; a Range there never reaches the pipeline, SPEC §3
// step 2).
type Object struct {
	Version  storage.Version
	Filename string
	Ranges   bool
}

// ObjectOf is the Object of a link's or session's pinned version.
func ObjectOf(o ledger.Object, filename string, ranges bool) Object {
	return Object{Version: o, Filename: filename, Ranges: ranges}
}

// Meter is what a response's body bytes cost: a session's budget and
// concurrency slot; nothing for a link's stream, whose claim was made
// before. Serve calls Begin once a GET's status is known and before
// anything is opened, Take before each slice it sends, and End once, at
// the end, whatever happened (after Begin succeeded, or before it when the
// store could not be opened).
type Meter interface {
	// Begin starts a response that will send need body bytes. An error
	// is answered instead (Request.NotFound for a refusal). The context
	// it returns is the response's: when it ends, the response is cut.
	Begin(ctx context.Context, need int64) (context.Context, error)
	// Take grants up to n of the next body bytes, at least 1; an error
	// ends the response there.
	Take(ctx context.Context, n int64) (int64, error)
	// End reports how the response ended.
	End(ctx context.Context, res Result)
}

// Result is how a response ended.
type Result struct {
	// Status is the status line sent, 0 when none was: the store failed
	// (Err) or the client left before it.
	Status int
	// Err is why the response ended before its last byte, nil when it
	// was sent whole.
	Err error
	// Granted is what Take granted, Sent the object bytes written, Unsent
	// those of them that never left this host (the connection was reset
	// with them still queued: acked.go).
	Granted, Sent, Unsent int64
	// Acked counts the object bytes of the body the client's TCP stack
	// acknowledged (SPEC §1, "Delivery evidence"; multipart framing
	// excluded), read from the socket's counters at the end of the
	// response, and Covered says which byte ranges of the object they are:
	// the acknowledged prefix of the body mapped onto its ranges. Where
	// the counters cannot tell (HTTP/2, whose streams share one
	// connection; another platform) they are what was written, and
	// Measured is false.
	Acked    int64
	Covered  sessions.Coverage
	Measured bool
}

// Request is one response to send: the object, its meter, the URL's
// generic 404 (SPEC §3) and the log attributes that name it.
type Request struct {
	Object   Object
	Meter    Meter
	NotFound problem.Problem
	Attrs    []any
	// Refundable says the response's cost is given back when no body
	// byte left (a stream's claim, SPEC §1): the first bytes (a copy
	// buffer's worth) are then awaited before the status line, so that a
	// store failing on its first reads still ends in a refund. Otherwise
	// the first byte is enough: the store is alive.
	Refundable bool
}

// Serve answers r with req.Object (module doc). A HEAD gets the headers a
// GET would, and the meter is not begun.
func (p *Pipeline) Serve(w http.ResponseWriter, r *http.Request, req Request) {
	o := req.Object
	if p.Preconditions(w, r, o) {
		return
	}
	p.headers(w, r, o)
	ranges, mp, status, ok := p.plan(w, r, o)
	if !ok {
		return
	}
	h := w.Header()
	switch {
	case status == http.StatusOK:
	case mp != nil:
		h.Set("Content-Type", mp.ContentType())
		h.Set("Content-Length", strconv.FormatInt(mp.ContentLength(), 10))
	default:
		h.Set("Content-Range", ranges[0].ContentRange(o.Version.Size))
		h.Set("Content-Length", strconv.FormatInt(ranges[0].Length, 10))
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return
	}
	var need int64
	for _, rg := range ranges {
		need += rg.Length
	}
	ctx, err := req.Meter.Begin(r.Context(), need)
	if err != nil {
		if errors.Is(err, ledger.ErrNoSlot) {
			// SPEC §3: over the cap, 429 with Retry-After: 1.
			h.Set("Retry-After", "1")
		}
		problem.Fail(p.Log, w, r, err, req.NotFound, req.Attrs...)
		return
	}
	p.send(ctx, w, r, req, ranges, mp, status)
}

// send opens the store once, writes the status line and copies the
// ranges through the meter.
func (p *Pipeline) send(ctx context.Context, w http.ResponseWriter, r *http.Request, req Request,
	ranges []sessions.Range, mp *sessions.Multipart, status int) {
	v := req.Object.Version
	watch := p.watch(ctx)
	defer watch.stop()
	body, err := watch.openFirst(p.Store, v, ranges[0].Start, ranges[0].Length, req.Refundable)
	if err != nil {
		req.Meter.End(r.Context(), Result{Err: err})
		if r.Context().Err() != nil {
			// The client hung up before a byte left: a client
			// disconnect, not a server error (499, as nginx logs it;
			// nobody reads the answer).
			w.WriteHeader(StatusClientClosed)
			return
		}
		problem.Fail(p.Log, w, r, err, req.NotFound, req.Attrs...)
		return
	}
	if len(ranges) == 1 && ranges[0].Start == 0 && ranges[0].Length == v.Size {
		// The whole version: checked against its digest (verify.go).
		body = p.checkWhole(ctx, body, v, req.Attrs)
	}
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	defer clearWriteDeadline(rc)
	// The status line and headers leave on their own, and the mark is
	// taken after them: what the connection carries from there on is the
	// body's (acked.go). A sendfile or splice copy flushes them first
	// anyway; a buffered one loses only their sharing its first segment.
	rc.Flush() //nolint:errcheck // a broken connection shows in the copy
	mark := markStream(r)
	p.Metrics.Streaming.Inc()
	defer p.Metrics.Streaming.Dec()
	res := Result{Status: status}
	// written counts the body bytes handed to w: the object's and the
	// multipart framing.
	var written int64
	for i, rg := range ranges {
		if i > 0 {
			if body, err = watch.openNext(p.Store, v, rg.Start, rg.Length); err != nil {
				break
			}
		}
		if mp != nil {
			var k int
			k, err = w.Write(mp.PartHeader(i))
			written += int64(k)
			if err != nil {
				body.Close()
				break
			}
		}
		sent := res.Sent
		err = p.copyRange(ctx, w, rc, body, rg.Length, req.Meter, &res)
		written += res.Sent - sent
		body.Close()
		if err != nil {
			break
		}
	}
	if err == nil && mp != nil {
		var k int
		k, err = w.Write(mp.Closing())
		written += int64(k)
	}
	if err == nil {
		// The last bytes out of net/http's buffers, so that their
		// acknowledgement can be awaited.
		rc.Flush() //nolint:errcheck // the counters tell what left
	}
	// Written is not yet carried: the bytes still queued in the socket
	// when the client resets the connection never reach it. A whole
	// response waits for its queue to be acknowledged, as its last write
	// would have waited for the queue with a smaller send buffer.
	c := mark.settle(written, err != nil, time.Now().Add(p.WriteTimeout))
	bodyLayout{ranges: ranges, mp: mp}.settle(&res, written, c, r.TLS != nil, err != nil)
	if err == nil && res.Unsent > 0 {
		err = errResetWhileQueued
	}
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			err = cause
		}
	}
	res.Err = err
	var need int64
	for _, rg := range ranges {
		need += rg.Length
	}
	note(r, res, need)
	req.Meter.End(r.Context(), res)
}

// copyRange copies n bytes of body to w, as the meter grants them.
func (p *Pipeline) copyRange(ctx context.Context, w http.ResponseWriter, rc *http.ResponseController, body io.Reader, n int64, m Meter, res *Result) error {
	for n > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		k, err := m.Take(ctx, n)
		if err != nil {
			return err
		}
		res.Granted += k
		c, err := p.copyN(w, rc, body, k)
		res.Sent += c
		n -= c
		if err != nil {
			return err
		}
	}
	return nil
}

// Preconditions answers r when its preconditions decide it (RFC 9110
// §13.2.2): 412 problem, or 304 with the validators, the digests and no
// body (§15.4.5); it reports whether it answered. Nothing is spent for
// either. A link URL asks it before its claim, Serve again after.
func (p *Pipeline) Preconditions(w http.ResponseWriter, r *http.Request, o Object) bool {
	v := o.Version
	switch httpx.Preconditions(r, httpx.Validators{ETag: v.ETag, LastModified: v.LastModified}, p.Now()) {
	case httpx.NotModified:
		h := w.Header()
		if v.ETag != "" && !strings.ContainsAny(v.ETag, "\r\n") {
			h.Set("ETag", v.ETag)
		}
		if !v.LastModified.IsZero() {
			h.Set("Last-Modified", v.LastModified.UTC().Format(http.TimeFormat))
		}
		httpx.SetDigests(h, r, v.SHA256)
		w.WriteHeader(http.StatusNotModified)
		return true
	case httpx.PreconditionFailed:
		problem.Write(w, r, problem.PreconditionFailed, "")
		return true
	}
	return false
}

// headers sets the representation headers of o (SPEC §3 step 5), its
// digests among them as r accepts them, from the values the pipeline
// keeps for o (fixed).
func (p *Pipeline) headers(w http.ResponseWriter, r *http.Request, o Object) {
	h := w.Header()
	f := p.fixed.of(o)
	h["Content-Type"] = f.contentType
	h["Content-Length"] = f.contentLength
	if f.etag != nil {
		h["Etag"] = f.etag
	}
	if f.lastModified != nil {
		h["Last-Modified"] = f.lastModified
	}
	h["Content-Disposition"] = f.disposition
	if f.repr != nil {
		httpx.SetDigestFields(h, r, f.repr, f.legacy)
	}
	if o.Ranges {
		h["Accept-Ranges"] = acceptBytes
	} else {
		h["Accept-Ranges"] = acceptNone
	}
}

var (
	acceptBytes = []string{"bytes"}
	acceptNone  = []string{"none"}
)

// fixedHeaders are the values of an object's representation headers,
// which depend on the object alone. They are formatted once and shared
// by the responses that send them, as header values nothing writes into
// (Set and Del replace a value, Add outgrows its capacity of one, and
// WriteHeader copies them).
type fixedHeaders struct {
	contentType, contentLength, etag, lastModified, disposition, repr, legacy []string
}

// fixedKey is everything fixedHeaders are made of.
type fixedKey struct {
	contentType, etag, sha256, key, filename string
	size, lastModified                       int64
}

// fixedCache keeps the fixedHeaders of the objects served lately: a
// 64 KiB range spent about 5 % of the gateway's CPU formatting them.
type fixedCache struct {
	mu sync.Mutex
	m  map[fixedKey]*fixedHeaders
}

// fixedCacheSize bounds the objects kept; past it the cache starts over.
const fixedCacheSize = 1024

func (c *fixedCache) of(o Object) *fixedHeaders {
	v := o.Version
	k := fixedKey{contentType: v.ContentType, etag: v.ETag, sha256: v.SHA256, key: v.Key, filename: o.Filename, size: v.Size}
	if !v.LastModified.IsZero() {
		k.lastModified = v.LastModified.UnixNano()
	}
	c.mu.Lock()
	f, ok := c.m[k]
	c.mu.Unlock()
	if ok {
		return f
	}
	f = newFixedHeaders(o)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= fixedCacheSize {
		c.m = make(map[fixedKey]*fixedHeaders)
	}
	c.m[k] = f
	c.mu.Unlock()
	return f
}

func newFixedHeaders(o Object) *fixedHeaders {
	v := o.Version
	ct := v.ContentType
	if ct == "" || strings.ContainsAny(ct, "\r\n") {
		ct = "application/octet-stream"
	}
	f := &fixedHeaders{contentType: []string{ct}, contentLength: []string{strconv.FormatInt(v.Size, 10)},
		disposition: []string{httpx.ContentDisposition(httpx.FileName(o.Filename, v.Key))}}
	if v.ETag != "" && !strings.ContainsAny(v.ETag, "\r\n") {
		f.etag = []string{v.ETag}
	}
	if !v.LastModified.IsZero() {
		f.lastModified = []string{v.LastModified.UTC().Format(http.TimeFormat)}
	}
	if repr, legacy, ok := httpx.DigestFields(v.SHA256); ok {
		f.repr, f.legacy = []string{repr}, []string{legacy}
	}
	return f
}

// plan decides the ranges to send (RFC 9110 §14) and the status, or
// answers 416 itself (ok=false). Only a URL that serves ranges looks at
// Range; If-Range only matters alongside it (§13.1.5).
func (p *Pipeline) plan(w http.ResponseWriter, r *http.Request, o Object) (ranges []sessions.Range, mp *sessions.Multipart, status int, ok bool) {
	size := o.Version.Size
	whole := []sessions.Range{{Start: 0, Length: size}}
	rh := r.Header.Get("Range")
	if !o.Ranges || rh == "" || !httpx.IfRange(r.Header.Values("If-Range"), httpx.Validators{ETag: o.Version.ETag, LastModified: o.Version.LastModified}) {
		return whole, nil, http.StatusOK, true
	}
	ranges, err := sessions.ParseRange(rh, size)
	switch {
	case errors.Is(err, sessions.ErrMalformed):
		// §14.2: a server MUST ignore a Range with a unit it does not
		// understand; we serve 200.
		return whole, nil, http.StatusOK, true
	case err != nil:
		// ErrInvalid (§14.2 lets us reject it), ErrUnsatisfiable or
		// ErrTooManyRanges: 416, drawing nothing.
		w.Header().Set("Content-Range", sessions.UnsatisfiableContentRange(size))
		problem.Write(w, r, problem.RangeNotSatisfiable, "")
		return nil, nil, 0, false
	case len(ranges) == 0:
		return whole, nil, http.StatusOK, true
	case len(ranges) == 1:
		return ranges, nil, http.StatusPartialContent, true
	}
	mp = sessions.NewMultipart(ranges, size, o.Version.ContentType, sessions.RandomBoundary())
	return ranges, mp, http.StatusPartialContent, true
}

// StatusClientClosed is nginx's 499: the client closed the request before
// the answer. It only ever reaches the access log and metrics.
const StatusClientClosed = 499

var (
	// errShortBody is a store breaking its promise of the pinned size: a
	// storage failure (502), not an internal error.
	errShortBody = fmt.Errorf("gateway: object shorter than its recorded size: %w", storage.ErrChanged)
	// errResetWhileQueued ends a response whose connection was reset
	// while bytes were still queued in its socket.
	errResetWhileQueued = errors.New("gateway: connection reset before the whole response left the host")
)
