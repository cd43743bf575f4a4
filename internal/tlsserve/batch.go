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
// charged what its socket carried (gateway/deliver/acked.go), which bytes still
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
	// decided: EnableHTTP2Batching looked at the protocol already.
	decided bool
	// pending is written by the flusher; next gathers Writes meanwhile.
	next []byte
	// span is the shortest time a write deadline gave the bytes in next
	// (0: none had one). Their write must move a byte within it, counted
	// from when the flusher starts it, as net/http's WriteByteTimeout
	// counts from each write.
	span    time.Duration
	wd      time.Time     // the write deadline last set
	wdSpan  time.Duration // the time it gave, when it was set
	abort   bool          // wd was already past when set: stop the write under way
	bounded bool          // the batch being written has a deadline
	writing bool          // a flusher goroutine runs
	drained chan struct{}
	err     error
	closed  bool
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
	if err := b.waitRoom(); err != nil {
		return 0, err
	}
	if b.next == nil {
		b.next = (*batchBufs.Get().(*[]byte))[:0]
	}
	if !b.wd.IsZero() && (b.span == 0 || b.wdSpan < b.span) {
		b.span = b.wdSpan
	}
	b.next = append(b.next, p...)
	if !b.writing {
		b.writing = true
		b.drained = make(chan struct{})
		go b.flush()
	}
	return len(p), nil
}

// waitRoom waits while batchMax bytes are pending; the caller holds b.mu.
// Waiting for room is writing. A deadline already past fails at once. A
// batch being written with a deadline of its own bounds the wait (its
// write fails when no byte moves for the deadline's span, and the wait
// with it; a slow peer that reads is waited for, as on the socket);
// otherwise the Write's own deadline does. A failure, as a failed write,
// fails every later Write: the tls.Conn already numbered the record, so
// nothing after it may go out.
func (b *batchConn) waitRoom() error {
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	// own: the Write's deadline applies (at once, and while the batch
	// being written has none of its own to bound the wait).
	own := true
	for {
		switch {
		case b.err != nil:
			return b.err
		case b.closed:
			return net.ErrClosed
		case own && !b.wd.IsZero() && !b.wd.After(time.Now()):
			b.err = os.ErrDeadlineExceeded
			return b.err
		case len(b.next) < batchMax:
			return nil
		}
		own = !b.bounded
		if own && !b.wd.IsZero() {
			if t == nil {
				t = time.AfterFunc(time.Until(b.wd), b.wake)
			} else {
				t.Reset(time.Until(b.wd))
			}
		}
		b.cond.Wait()
	}
}

func (b *batchConn) wake() {
	b.mu.Lock()
	b.cond.Broadcast()
	b.mu.Unlock()
}

// flush writes what Writes gathered until nothing is left, then ends.
func (b *batchConn) flush() {
	var spare []byte
	b.mu.Lock()
	for len(b.next) > 0 && b.err == nil {
		out, span := b.next, b.span
		b.next, b.span = spare, 0
		b.bounded = span > 0
		b.cond.Broadcast() // room, and whether the write is bounded
		b.mu.Unlock()
		err := b.writeOut(out, span)
		b.mu.Lock()
		b.bounded = false
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

// writeOut writes out, failing when no byte moves for span (none: no
// deadline), as net/http's writeWithByteTimeout does. A deadline set in
// the past (abort) stops it, as on the socket.
func (b *batchConn) writeOut(out []byte, span time.Duration) error {
	for {
		var deadline time.Time
		if span > 0 {
			deadline = time.Now().Add(span)
		}
		b.mu.Lock()
		if b.abort {
			b.mu.Unlock()
			return os.ErrDeadlineExceeded
		}
		// Under b.mu: an abort either comes after (and overrides it on
		// the socket) or was seen above.
		b.Conn.SetWriteDeadline(deadline) //nolint:errcheck // a closed conn fails the write below
		b.mu.Unlock()
		n, err := b.Conn.Write(out)
		out = out[n:]
		if err == nil || n == 0 || span <= 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			return err
		}
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
	defer b.mu.Unlock()
	b.wd, b.wdSpan = t, time.Until(t)
	b.abort = !t.IsZero() && b.wdSpan <= 0
	if b.abort && b.writing {
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
	decided := b.decided
	b.decided = true
	b.mu.Unlock()
	// Once per connection: HTTP/1.1 makes this change at every request.
	if !decided && tc.ConnectionState().NegotiatedProtocol == "h2" {
		b.enable()
	}
}
