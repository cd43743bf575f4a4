package gateway

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlgate/dlgate/gateway/deliver"
	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/problem"
)

// Limits on what a client may make the gateway wait for (Options'
// BodyTimeout and UploadIdleTimeout, config.Timeouts). A request that
// cannot be answered must cost nothing: no claim, and no descriptor held
// for longer than these.

// maxPublicBody bounds a public request body: a confirm form or a mint
// request carries no more than a few bytes.
const maxPublicBody = 64 << 10

// hasBody reports whether r carries a body: a positive Content-Length, or
// a chunked one (ContentLength -1 on a server request).
func hasBody(r *http.Request) bool { return r.ContentLength != 0 }

// limitPublicBodies runs before routing, so before any lookup or claim.
// GET and HEAD with a body are refused (400): no public route reads one,
// and net/http would otherwise drain up to 256 KiB of it, however slowly
// it arrives, before freeing the connection. A POST body is read whole,
// within BodyTimeout and maxPublicBody, before the handler runs: a body
// that never finishes must not hold a spent claim. Other methods with a
// body are answered (404 or 405) on a connection that then closes.
func (s *Server) limitPublicBodies(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case !hasBody(r):
			h.ServeHTTP(w, r)
		case r.Method == http.MethodGet || r.Method == http.MethodHead:
			s.refuseBody(w, r, problem.BodyNotAllowed, "GET and HEAD requests must not carry a body.")
		case r.Method == http.MethodPost:
			body, p, ok := s.readPublicBody(w, r)
			if !ok {
				s.refuseBody(w, r, p, "")
				return
			}
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
			h.ServeHTTP(w, r)
		default:
			dropBody(w)
			h.ServeHTTP(w, r)
		}
	})
}

// readPublicBody reads r's body whole under a read deadline. On failure
// it returns the problem to answer.
func (s *Server) readPublicBody(w http.ResponseWriter, r *http.Request) ([]byte, problem.Problem, bool) {
	if r.ContentLength > maxPublicBody {
		return nil, problem.BodyTooLarge, false
	}
	rc := http.NewResponseController(w)
	// Without a deadline a body dripped a byte a second holds the
	// connection for days; net/http's ReadTimeout would also cut slow
	// downloads, so the deadline is set here, for the body alone.
	if err := rc.SetReadDeadline(time.Now().Add(s.BodyTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return nil, problem.BadRequest, false
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxPublicBody+1))
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, problem.RequestTimeout, false
	case err != nil:
		return nil, problem.BadRequest, false
	case len(body) > maxPublicBody:
		return nil, problem.BodyTooLarge, false
	}
	// The handler may stream a large response to a slow reader.
	rc.SetReadDeadline(time.Time{}) //nolint:errcheck // set above, so supported
	return body, problem.Problem{}, true
}

// refuseBody answers p for a request whose body the gateway will not
// read, and closes the connection after the answer.
func (s *Server) refuseBody(w http.ResponseWriter, r *http.Request, p problem.Problem, detail string) {
	s.log.InfoContext(r.Context(), "request body refused", "status", p.Status, "content_length", r.ContentLength)
	dropBody(w)
	problem.Write(w, r, p, detail)
}

// dropBody makes net/http close the connection after the answer instead
// of reading what is left of the request body first: "Connection: close"
// skips the drain before the response, and an expired read deadline ends
// the one net/http still attempts after the handler returns.
func dropBody(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	http.NewResponseController(w).SetReadDeadline(time.Now()) //nolint:errcheck // unsupported writers have no connection to hold
}

// idleUpload bounds the wait for each read of an upload's body to
// UploadIdleTimeout, so an upload whose body stops arriving fails with
// httpx.ErrBodyStalled (408) and the store abandons it, instead of holding the
// connection and a half-written object forever. A slow body that keeps
// moving is never cut. It sits outside the admin check, so a refused
// upload's body is not drained either.
func (s *Server) idleUpload(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hasBody(r) {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		b := &idleBody{ReadCloser: r.Body, rc: rc, idle: s.UploadIdleTimeout}
		r.Body = b
		h.ServeHTTP(&closeUnlessRead{ResponseWriter: w, b: b}, r)
		if b.eof.Load() {
			rc.SetReadDeadline(time.Time{}) //nolint:errcheck // as in idleBody.Read
		} else {
			dropBody(w)
		}
	})
}

// idleBody renews a read deadline before each read of a request body.
type idleBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	idle time.Duration
	eof  atomic.Bool
}

func (b *idleBody) Read(p []byte) (int, error) {
	b.rc.SetReadDeadline(time.Now().Add(b.idle)) //nolint:errcheck // unsupported: no deadline, as before
	n, err := b.ReadCloser.Read(p)
	switch {
	case err == io.EOF:
		b.eof.Store(true)
	case err != nil && errors.Is(err, os.ErrDeadlineExceeded):
		err = fmt.Errorf("%w: no byte for %v", httpx.ErrBodyStalled, b.idle)
	}
	return n, err
}

// closeUnlessRead closes the connection after an answer given before the
// request's body was read to its end (refused, stalled, broken off): what
// is left of it must be neither waited for nor read as a next request.
// The header is set on the handler's goroutine, never on a reader's.
type closeUnlessRead struct {
	http.ResponseWriter
	b     *idleBody
	wrote bool
}

func (w *closeUnlessRead) WriteHeader(code int) {
	if !w.wrote && !w.b.eof.Load() {
		w.Header().Set("Connection", "close")
	}
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *closeUnlessRead) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(p)
}

func (w *closeUnlessRead) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// LimitListener returns a listener that holds at most n accepted
// connections open at once (GATEWAY_MAX_CONNECTIONS). Past n, Accept waits
// for one to close, and new connections queue in the kernel's backlog,
// which costs the process no descriptor. Like golang.org/x/net/netutil's,
// but its connections keep *net.TCPConn's ReadFrom, so net/http's
// sendfile path for files from the fs store survives the wrapping; and it
// needs no new module.
func LimitListener(l net.Listener, n int) net.Listener {
	return &limitListener{Listener: l, sem: make(chan struct{}, n), done: make(chan struct{})}
}

type limitListener struct {
	net.Listener
	sem       chan struct{}
	closeOnce sync.Once
	done      chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	select {
	case l.sem <- struct{}{}:
	case <-l.done:
		// Closed while waiting: the inner Accept fails at once.
		return l.Listener.Accept()
	}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

func (l *limitListener) Close() error {
	err := l.Listener.Close()
	l.closeOnce.Do(func() { close(l.done) })
	return err
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
	written atomic.Int64
}

// A response reads where its body begins from the count of bytes written
// (deliver.WriteCounter).
var _ deliver.WriteCounter = (*limitConn)(nil)

// NetConn lets a response see through the limit's wrapper to the TCP
// socket (deliver.ConnContext).
func (c *limitConn) NetConn() net.Conn { return c.Conn }

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}

func (c *limitConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.written.Add(int64(n))
	return n, err
}

// ReadFrom keeps the inner connection's sendfile and splice paths.
func (c *limitConn) ReadFrom(r io.Reader) (n int64, err error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		n, err = rf.ReadFrom(r)
	} else {
		n, err = io.Copy(struct{ io.Writer }{c.Conn}, r)
	}
	c.written.Add(n)
	return n, err
}

// BytesWritten is every byte handed to the socket since it was accepted:
// what the kernel took of each Write and ReadFrom.
func (c *limitConn) BytesWritten() int64 { return c.written.Load() }
