package tlsserve

import (
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Batched writes beneath TLS on HTTP/2 connections.
//
// net/http's HTTP/2 server writes every DATA frame through a 4 KiB
// buffer, from a goroutine of its own, and crypto/tls writes every record
// to the socket with a system call of its own: a 16 KiB frame costs two
// write calls (a 4 KiB record and the rest), and on a fast path the
// system calls are half the CPU a download costs (pprof of `make
// bench-compare` row tls-h2: 52 % in syscall writes). A batchConn under
// the tls.Conn of an HTTP/2 connection takes each record into a buffer
// and returns; one goroutine writes what gathered while its previous
// write was in the kernel. Nothing waits for a timer: a lone record goes
// out at once, and records only gather while the socket is busy.
//
// What stays as it was:
//   - order: the tls.Conn writes one record at a time, and the buffer is
//     written in order by one goroutine;
//   - backpressure: a Write waits while batchMax bytes are pending, so a
//     connection holds at most that much more than its socket buffer;
//   - write deadlines: a Write's deadline bounds the write of its bytes,
//     extended while bytes still move, as net/http's WriteByteTimeout
//     does (a peer that reads nothing fails the connection within the
//     deadline's span, one that reads slowly does not);
//   - errors: a failed write, or a Write that timed out waiting for room,
//     fails every later Write: the tls.Conn numbered the record it could
//     not write, so a record after it (the close_notify of its Close)
//     would only reach the peer as a bad record MAC;
//   - Close writes what is pending first, within its write deadline (and
//     at most closeFlush), so the last frames and the close_notify reach
//     the peer.
//
// HTTP/1.1 connections are left unbatched: a session response there is
// charged what its socket carried (gateway/acked.go), which bytes still
// in a batch would hide from the kernel's counters.

// batchMax is the most a batchConn holds unwritten: four 16 KiB records.
const batchMax = 64 << 10

// closeFlush bounds how long Close waits for pending bytes when no write
// deadline does.
const closeFlush = 5 * time.Second

// batchBufs recycles the buffers of connections that went quiet.
// They hold batchMax and one more record (16 KiB and its overhead).
var batchBufs = sync.Pool{New: func() any { b := make([]byte, 0, batchBufCap); return &b }}

const batchBufCap = batchMax + 20<<10

// batchConn is a net.Conn whose writes, once enabled, go through a buffer
// written by one goroutine.
type batchConn struct {
	net.Conn
	mu   sync.Mutex
	cond *sync.Cond // pending shrank, or err or closed changed
	on   bool
	// pending is written by the flusher; next gathers Writes meanwhile.
	next []byte
	// deadline is the earliest write deadline of the bytes in next, and
	// span the time it gave them (for extending it while bytes move).
	deadline time.Time
	span     time.Duration
	wd       time.Time // the write deadline last set
	writing  bool      // a flusher goroutine runs
	drained  chan struct{}
	err      error
	closed   bool
}

func newBatchConn(c net.Conn) *batchConn {
	b := &batchConn{Conn: c}
	b.cond = sync.NewCond(&b.mu)
	return b
}

// NetConn is the connection beneath (for the gateway's TCP counters).
func (b *batchConn) NetConn() net.Conn { return b.Conn }

// enable makes the following Writes batched.
func (b *batchConn) enable() {
	b.mu.Lock()
	b.on = true
	b.mu.Unlock()
}

func (b *batchConn) Write(p []byte) (int, error) {
	b.mu.Lock()
	if !b.on {
		b.mu.Unlock()
		return b.Conn.Write(p)
	}
	defer b.mu.Unlock()
	if len(b.next) >= batchMax && !b.wd.IsZero() {
		// Waiting for room is writing too: it ends at the deadline.
		t := time.AfterFunc(time.Until(b.wd), func() {
			b.mu.Lock()
			b.cond.Broadcast()
			b.mu.Unlock()
		})
		defer t.Stop()
	}
	for len(b.next) >= batchMax && b.err == nil && !b.closed && !b.passed() {
		b.cond.Wait()
	}
	switch {
	case b.err != nil:
		return 0, b.err
	case b.closed:
		return 0, net.ErrClosed
	case b.passed():
		// As for a failed write: the tls.Conn already counted the
		// record, so nothing after it may go out either.
		b.err = os.ErrDeadlineExceeded
		return 0, b.err
	}
	if b.next == nil {
		b.next = (*batchBufs.Get().(*[]byte))[:0]
	}
	if !b.wd.IsZero() && (b.deadline.IsZero() || b.wd.Before(b.deadline)) {
		b.deadline, b.span = b.wd, time.Until(b.wd)
	}
	b.next = append(b.next, p...)
	if !b.writing {
		b.writing = true
		b.drained = make(chan struct{})
		go b.flush()
	}
	return len(p), nil
}

// passed reports whether the write deadline is set and past; the caller
// holds b.mu.
func (b *batchConn) passed() bool { return !b.wd.IsZero() && !b.wd.After(time.Now()) }

// flush writes what Writes gathered until nothing is left, then ends.
func (b *batchConn) flush() {
	var spare []byte
	b.mu.Lock()
	for len(b.next) > 0 && b.err == nil {
		out, deadline, span := b.next, b.deadline, b.span
		b.next, b.deadline, b.span = spare, time.Time{}, 0
		b.mu.Unlock()
		err := b.writeOut(out, deadline, span)
		b.mu.Lock()
		spare = out[:0]
		if err != nil && b.err == nil {
			b.err = err
		}
		b.cond.Broadcast()
	}
	b.writing = false
	if b.err != nil {
		b.next = b.next[:0] // never to be written: the connection is broken
	}
	for _, buf := range [][]byte{spare, b.next} {
		if cap(buf) == batchBufCap {
			batchBufs.Put(&buf)
		}
	}
	b.next = nil
	close(b.drained)
	b.cond.Broadcast()
	b.mu.Unlock()
}

// writeOut writes out by deadline, extended by span each time bytes
// moved before it passed (net/http's writeWithByteTimeout).
func (b *batchConn) writeOut(out []byte, deadline time.Time, span time.Duration) error {
	for {
		b.Conn.SetWriteDeadline(deadline) //nolint:errcheck // a closed conn fails the write below
		n, err := b.Conn.Write(out)
		out = out[n:]
		if err == nil || n == 0 || span <= 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
		deadline = time.Now().Add(span)
	}
}

// SetWriteDeadline bounds the writes of the bytes written after it. A
// deadline already past also stops the write under way, as it would on
// the socket.
func (b *batchConn) SetWriteDeadline(t time.Time) error {
	b.mu.Lock()
	if !b.on {
		b.mu.Unlock()
		return b.Conn.SetWriteDeadline(t)
	}
	b.wd = t
	writing := b.writing
	b.mu.Unlock()
	if writing && !t.IsZero() && !t.After(time.Now()) {
		return b.Conn.SetWriteDeadline(t)
	}
	return nil
}

func (b *batchConn) SetDeadline(t time.Time) error {
	if err := b.Conn.SetReadDeadline(t); err != nil {
		return err
	}
	return b.SetWriteDeadline(t)
}

// Close writes what is pending (within its deadline, at most closeFlush)
// and closes the connection; a Write waiting for room fails.
func (b *batchConn) Close() error {
	b.mu.Lock()
	b.closed = true
	b.cond.Broadcast()
	drained := b.drained
	writing := b.writing
	b.mu.Unlock()
	if writing {
		t := time.NewTimer(closeFlush)
		select {
		case <-drained:
		case <-t.C:
		}
		t.Stop()
	}
	return b.Conn.Close()
}

// batchListener wraps every accepted connection in a batchConn, not yet
// enabled: EnableHTTP2Batching enables it once the connection speaks h2.
type batchListener struct{ net.Listener }

// BatchListener prepares the connections of a TLS listener for batched
// writes on HTTP/2: its server needs EnableHTTP2Batching as (part of)
// its ConnState hook.
func BatchListener(l net.Listener) net.Listener { return batchListener{l} }

func (l batchListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return newBatchConn(c), nil
}

// EnableHTTP2Batching is an http.Server ConnState hook: when a TLS
// connection accepted by a BatchListener becomes active speaking HTTP/2,
// its writes are batched from then on. HTTP/2's first ConnState change
// comes once the client preface was read, before any stream.
func EnableHTTP2Batching(c net.Conn, state http.ConnState) {
	if state != http.StateActive {
		return
	}
	tc, ok := c.(*tls.Conn)
	if !ok {
		return
	}
	b, ok := tc.NetConn().(*batchConn)
	if !ok {
		return
	}
	b.mu.Lock()
	on := b.on
	b.mu.Unlock()
	if !on && tc.ConnectionState().NegotiatedProtocol == "h2" {
		b.enable()
	}
}
