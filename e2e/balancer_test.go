package e2e

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Balancer is the deployment's load balancer: it hands each TCP connection
// to the next gateway process in turn, as an L4 balancer would. It is the
// public URL of a Cluster, so that download tools that open several
// connections (aria2c) spread them over the processes.
//
// With a rate, it is also a slow network: answers reach the client at that
// many bytes per second and connection. Tests that need a download to be
// in flight for a while use that rather than the client's own throttle:
// curl 7.88's --limit-rate takes in megabytes at full speed and sleeps
// afterwards, so its file is whole long before curl ends.
type Balancer struct {
	ln   net.Listener
	wg   sync.WaitGroup
	rate atomic.Int64 // bytes per second from backend to client; 0 is unlimited
	// carried counts the bytes passed from backends to clients.
	carried atomic.Int64

	mu       sync.Mutex
	backends []string
	next     int
	conns    map[net.Conn]struct{}
	closed   bool
}

// MustStartBalancer listens on a free port of 127.0.0.1, spreading
// connections over backends (SetBackends may set them later) at rate
// bytes per second (0: unlimited). It stops in Cleanup, closing every
// connection it carries.
func MustStartBalancer(tb testing.TB, rate int64, backends ...string) *Balancer {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("balancer: %v", err)
	}
	b := &Balancer{ln: ln, backends: backends, conns: map[net.Conn]struct{}{}}
	b.rate.Store(rate)
	b.wg.Go(b.serve)
	tb.Cleanup(b.close)
	return b
}

// Addr is the balancer's host:port.
func (b *Balancer) Addr() string { return b.ln.Addr().String() }

// On returns rawURL with the balancer as its host.
func (b *Balancer) On(rawURL string) string { return withHost(rawURL, b.Addr()) }

// SetRate sets the rate of the connections accepted from now on (0:
// unlimited); those already carried keep theirs.
func (b *Balancer) SetRate(rate int64) { b.rate.Store(rate) }

// Carried is how many bytes the balancer has passed from backends to
// clients: a tool's progress whatever it does with its file.
func (b *Balancer) Carried() int64 { return b.carried.Load() }

// SetBackends sets the addresses connections are spread over.
func (b *Balancer) SetBackends(addrs ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.backends = append([]string(nil), addrs...)
}

func (b *Balancer) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return
		}
		b.wg.Go(func() { b.carry(c) })
	}
}

// pick returns the backends in the order to try them: the next one in
// turn first, the others after it (a process that died is skipped).
// Backends returns the addresses connections are spread over.
func (b *Balancer) Backends() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.backends...)
}

func (b *Balancer) pick() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.backends)
	order := make([]string, 0, n)
	for i := range n {
		order = append(order, b.backends[(b.next+i)%n])
	}
	b.next++
	return order
}

func (b *Balancer) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *Balancer) untrack(c net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.conns, c)
}

// carry connects the client to a backend and copies both ways, passing a
// half-close on, until both directions are done.
func (b *Balancer) carry(client net.Conn) {
	defer client.Close()
	if !b.track(client) {
		return
	}
	defer b.untrack(client)
	var up net.Conn
	for _, addr := range b.pick() {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err == nil {
			up = c
			break
		}
	}
	if up == nil {
		return
	}
	defer up.Close()
	if !b.track(up) {
		return
	}
	defer b.untrack(up)
	rate := b.rate.Load()
	if rate > 0 {
		// Small fixed socket buffers keep a slow network from soaking up
		// megabytes that the backend then counts as sent.
		for _, c := range []net.Conn{up, client} {
			if tc, ok := c.(*net.TCPConn); ok {
				tc.SetReadBuffer(64 << 10)  //nolint:errcheck // a hint
				tc.SetWriteBuffer(64 << 10) //nolint:errcheck // a hint
			}
		}
	}
	var wg sync.WaitGroup
	pipe := func(dst, src net.Conn, rate int64, count *atomic.Int64) {
		copyAt(countingWriter{dst, count}, src, rate)
		if tc, ok := dst.(*net.TCPConn); ok {
			tc.CloseWrite() //nolint:errcheck // the peer may be gone
		}
	}
	wg.Go(func() { pipe(up, client, 0, nil) })
	wg.Go(func() { pipe(client, up, rate, &b.carried) })
	wg.Wait()
}

// countingWriter adds what it writes to n (when not nil).
type countingWriter struct {
	w io.Writer
	n *atomic.Int64
}

func (c countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if c.n != nil {
		c.n.Add(int64(n))
	}
	return n, err
}

// copyAt copies src to dst at rate bytes per second (0: as fast as
// possible) until either side ends; a reset ends it like EOF.
func copyAt(dst io.Writer, src io.Reader, rate int64) {
	if rate <= 0 {
		io.Copy(dst, src) //nolint:errcheck // see above
		return
	}
	buf := make([]byte, max(rate/20, 1024)) // about 50 ms worth
	start := time.Now()
	var sent int64
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, err := dst.Write(buf[:n]); err != nil {
				return
			}
			sent += int64(n)
			time.Sleep(time.Until(start.Add(time.Duration(sent * int64(time.Second) / rate))))
		}
		if err != nil {
			return
		}
	}
}

func (b *Balancer) close() {
	b.ln.Close()
	b.mu.Lock()
	b.closed = true
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	b.wg.Wait()
}
