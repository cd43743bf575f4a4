package s3

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"syscall"
	"time"
)

// Limits of connClient's own connections, after net/http's Transport
// defaults: an idle connection older than idleConnTimeout is closed rather
// than reused, and at most maxIdlePerHost wait per server (enough for the
// gateway's concurrent range requests to reuse theirs).
const (
	idleConnTimeout = 90 * time.Second
	maxIdlePerHost  = 64
)

// connBodyKey marks the context of a GetObject whose response body should
// arrive on one of connClient's own connections.
type connBodyKey struct{}

// withConnBody marks ctx for connClient.
func withConnBody(ctx context.Context) context.Context {
	return context.WithValue(ctx, connBodyKey{}, true)
}

// doer is the SDK's HTTP client interface (aws.HTTPClient).
type doer interface {
	Do(*http.Request) (*http.Response, error)
}

// connClient is the HTTP client of a Store made by New. A GetObject over
// plain HTTP (its context marked by withConnBody) goes out on a TCP
// connection that connClient keeps itself, and its response body is a
// *connBody: one that can hand that connection to a net/http response's
// ReadFrom, so the kernel splices the object from the store's socket to
// the client's without copying it through the process (WriteNTo). Every
// other request, HTTPS, and anything going through a proxy, goes to next,
// the SDK's own client; so does a GetObject answered by a 307 or 308,
// which next follows.
//
// The connections behave like net/http's Transport's where the SDK can
// see it: request and response are HTTP/1.1 written and parsed by
// net/http; a connection is reused only after its body was read to the
// end without error; a reused one that fails before any answer is retried
// once on a new one (GET is idempotent); no answer within stall (headers)
// and no byte of the body for stall (each read) are timeouts; and errors
// come back as *url.Error, as from http.Client, so the SDK's retries and
// translate treat them the same.
type connClient struct {
	next  doer
	stall time.Duration
	dial  func(ctx context.Context, network, addr string) (net.Conn, error)
	proxy func(*http.Request) (*url.URL, error)

	mu   sync.Mutex
	idle map[string][]*conn // by host:port, most recently used last
}

func newConnClient(next doer, stall time.Duration) *connClient {
	d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	return &connClient{next: next, stall: stall, dial: d.DialContext, proxy: http.ProxyFromEnvironment, idle: map[string][]*conn{}}
}

// Do implements the SDK's HTTPClient.
func (c *connClient) Do(req *http.Request) (*http.Response, error) {
	if !c.ours(req) {
		return c.next.Do(req)
	}
	resp, err := c.roundTrip(req)
	if err != nil {
		return nil, &url.Error{Op: "Get", URL: req.URL.String(), Err: err}
	}
	if resp.StatusCode == http.StatusTemporaryRedirect || resp.StatusCode == http.StatusPermanentRedirect {
		// Rare on S3 (a bucket in another region); the SDK's client
		// knows how to follow it.
		resp.Body.Close()
		return c.next.Do(req)
	}
	return resp, nil
}

func (c *connClient) ours(req *http.Request) bool {
	if req.Method != http.MethodGet || req.URL.Scheme != "http" || req.Context().Value(connBodyKey{}) == nil {
		return false
	}
	if req.Body != nil && req.Body != http.NoBody {
		return false
	}
	p, err := c.proxy(req)
	return err == nil && p == nil
}

// hostPort is u's host with the port HTTP implies when it names none.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

func (c *connClient) roundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	addr := hostPort(req.URL)
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		pc, reused, err := c.get(ctx, addr)
		if err != nil {
			return nil, err
		}
		resp, err := c.exchange(ctx, pc, req)
		if err == nil {
			return resp, nil
		}
		pc.close()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if reused && attempt == 1 && closedByPeer(err) {
			// The server closed the idle connection; a new one will do.
			continue
		}
		return nil, err
	}
}

// closedByPeer reports the errors of a kept-alive connection that the
// server closed while it sat idle.
func closedByPeer(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// exchange writes req on pc and reads the answer's headers, all within
// the stall timeout; cancelling ctx, now or while the body is read,
// interrupts whatever waits on the connection.
func (c *connClient) exchange(ctx context.Context, pc *conn, req *http.Request) (*http.Response, error) {
	pc.tcp.SetDeadline(time.Now().Add(c.stall)) //nolint:errcheck // fails only on a closed connection, which the write reports
	// After the deadline, so that a cancellation already there wins.
	stop := context.AfterFunc(ctx, pc.interrupt)
	resp, err := pc.send(req)
	if err != nil {
		stop()
		if isTimeout(err) && ctx.Err() == nil {
			return nil, &headerTimeoutError{stall: c.stall}
		}
		return nil, err
	}
	b := &connBody{c: c, pc: pc, ctx: ctx, stop: stop, left: resp.ContentLength, stall: c.stall,
		reusable: !resp.Close && !req.Close}
	if resp.ContentLength < 0 || len(resp.TransferEncoding) > 0 {
		// Chunked or until close: net/http's reader knows the framing;
		// the connection is not kept.
		b.framed = resp.Body
		b.reusable = false
	}
	pc.tcp.SetWriteDeadline(time.Time{}) //nolint:errcheck // as above
	b.renew()
	resp.Body = b
	if b.left == 0 && b.framed == nil {
		b.release()
	}
	return resp, nil
}

// headerTimeoutError is a server that accepted a request and answered
// nothing within the stall timeout, like net/http's "timeout awaiting
// response headers".
type headerTimeoutError struct{ stall time.Duration }

func (e *headerTimeoutError) Error() string {
	return "s3: no response headers within " + e.stall.String()
}
func (e *headerTimeoutError) Timeout() bool { return true }

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.Is(err, os.ErrDeadlineExceeded) || (errors.As(err, &t) && t.Timeout())
}

// get returns an idle connection to addr, or a new one.
func (c *connClient) get(ctx context.Context, addr string) (pc *conn, reused bool, err error) {
	c.mu.Lock()
	for list := c.idle[addr]; len(list) > 0; list = c.idle[addr] {
		pc = list[len(list)-1]
		c.idle[addr] = list[:len(list)-1]
		if time.Since(pc.since) < idleConnTimeout {
			c.mu.Unlock()
			return pc, true, nil
		}
		pc.close()
	}
	c.mu.Unlock()
	nc, err := c.dial(ctx, "tcp", addr)
	if err != nil {
		return nil, false, err
	}
	tcp, ok := nc.(*net.TCPConn)
	if !ok {
		nc.Close()
		return nil, false, errors.New("s3: dialled connection is not TCP")
	}
	return &conn{tcp: tcp, addr: addr, br: bufio.NewReaderSize(tcp, 4<<10), bw: bufio.NewWriterSize(tcp, 4<<10)}, false, nil
}

// put keeps pc for the next request to its server.
func (c *connClient) put(pc *conn) {
	pc.tcp.SetDeadline(time.Time{}) //nolint:errcheck // a broken connection fails its next use, and is retried
	pc.since = time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.idle[pc.addr]) >= maxIdlePerHost {
		pc.close()
		return
	}
	c.idle[pc.addr] = append(c.idle[pc.addr], pc)
}

// conn is one of connClient's connections.
type conn struct {
	tcp   *net.TCPConn
	addr  string
	br    *bufio.Reader
	bw    *bufio.Writer
	since time.Time // when it went idle
}

func (pc *conn) send(req *http.Request) (*http.Response, error) {
	if err := req.Write(pc.bw); err != nil {
		return nil, err
	}
	if err := pc.bw.Flush(); err != nil {
		return nil, err
	}
	for {
		resp, err := http.ReadResponse(pc.br, req)
		if err != nil {
			return nil, err
		}
		// 1xx answers (103 Early Hints) come before the real one.
		if resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			return resp, nil
		}
	}
}

// interrupt makes whatever waits on the connection return at once: a
// cancelled request. The connection is not reused afterwards.
func (pc *conn) interrupt() {
	pc.tcp.SetDeadline(aLongTimeAgo) //nolint:errcheck // a closed connection needs no interrupting
}

func (pc *conn) close() { pc.tcp.Close() }

// aLongTimeAgo is a deadline that has passed.
var aLongTimeAgo = time.Unix(1, 0)
