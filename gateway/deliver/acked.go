package deliver

import (
	"context"
	"net"
	"net/http"
	"syscall"
	"time"
)

// What a response's connection carried of it, read from the socket's
// counters at two moments only — the mark, once the status line and
// headers left, and the end — never per slice.
//
// A session response is charged what its connection carried, not what
// it wrote (README, "What the budget means in practice"). A write returns
// once the bytes are in the socket's send queue; when the client goes
// away with its window full, its kernel resets the connection and the
// bytes this host never transmitted die in the queue. They go back to the
// budget. Everything that left this host stays charged, acknowledged or
// not: a client may have read a segment whose acknowledgement never came
// back. So a response is charged
//
//	min(written, transmitted since the response's body began)
//
// Until the reset the kernel may still send what is queued, so nothing
// goes back before it: a response written whole waits for its queue to be
// acknowledged (or for the reset) before it counts as done; a cut one
// waits only when its peer already sent its FIN, and the reset follows
// within a round trip.
//
// Delivery evidence (SPEC §1) is the other half of the same counters:
// the body bytes the client's TCP stack acknowledged, tcpi_bytes_acked
// since the mark (carried.go maps them onto the object's ranges). That is
// what the client's kernel received, not what reached its disk, and a
// proxy in front of the gateway is the client here (docs/design.md, "What
// 'acknowledged' proves").

// connKey carries a request's connection in its context (ConnContext).
type connKey struct{}

// ConnContext is the public http.Server's ConnContext: it keeps each
// connection in its requests' contexts, so that a response can ask the
// connection's TCP stack what it carried. Without it (or off Linux) a
// response is charged all it wrote. A wrapper of the connection is seen
// through when it has a NetConn method, as tls.Conn has.
func ConnContext(ctx context.Context, c net.Conn) context.Context {
	return context.WithValue(ctx, connKey{}, c)
}

// WriteCounter is a connection wrapper that counts every byte handed to
// its socket since the connection was accepted (the gateway's connection
// limit does). Under it, a response reads where its body begins in the
// connection's stream from the count, and the rest from one TCP_INFO,
// where without it each reading of the socket is three system calls
// (readStream).
type WriteCounter interface{ BytesWritten() int64 }

// connOf finds the TCP socket under the request's connection, unwrapping
// TLS (tls.Conn.NetConn) and our own wrappers, and the first WriteCounter
// on the way: nil, nil when there is no socket.
func connOf(ctx context.Context) (syscall.RawConn, WriteCounter) {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	var n WriteCounter
	for c != nil {
		if wc, ok := c.(WriteCounter); ok && n == nil {
			n = wc
		}
		if sc, ok := c.(syscall.Conn); ok {
			rc, err := sc.SyscallConn()
			if err != nil {
				return nil, nil
			}
			return rc, n
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil, nil
		}
		c = u.NetConn()
	}
	return nil, nil
}

// tcpStream is what a TCP socket's kernel knows of the bytes written to
// it, as offsets in the connection's byte stream.
type tcpStream struct {
	written     int64 // acknowledged, plus still queued (unsent or unacknowledged)
	transmitted int64 // acknowledged, plus sent and unacknowledged
	acked       int64 // acknowledged by the peer's TCP (tcpi_bytes_acked)
	reset       bool  // closed for good: nothing more will be sent
	peerClosed  bool  // the peer sent its FIN; a reset usually follows
}

// streamMark is where a response's body began in its connection's
// stream, and the socket to read the counters of until the response is
// settled: a duplicate of the connection's descriptor, because net/http
// closes a connection whose write failed (its chunkWriter does, on every
// buffered write, over TLS always) before the response can ask what it
// carried. The duplicate keeps the socket's counters readable, and holds
// back the socket's own close by no more than settle waits.
type streamMark struct {
	sock  socket
	count WriteCounter // nil: the kernel's counters alone
	start int64
	ok    bool
}

// markStream records where the body of the response to r begins: Serve
// takes it once the status line and headers were flushed, so everything
// the connection carries after the mark is the body's (and, over TLS, its
// records' framing). On a kept-alive connection the earlier responses'
// queued bytes come before it, so only this response's bytes count later.
// HTTP/2 streams share their connection's queue, which another stream may
// keep from ever emptying, and its counters cannot tell one stream's bytes
// from another's: a stream is not marked, and counts what it wrote.
func markStream(r *http.Request) streamMark {
	if r.ProtoMajor != 1 {
		return streamMark{}
	}
	rc, count := connOf(r.Context())
	if rc == nil {
		return streamMark{}
	}
	sock, err := dupSocket(rc)
	if err != nil {
		return streamMark{}
	}
	if count != nil {
		// Where the body begins is the count: no system call. A
		// connection reset already shows at settle, where nothing
		// written after the mark left.
		return streamMark{sock: sock, count: count, start: count.BytesWritten(), ok: true}
	}
	st, err := readStream(sock, nil)
	if err != nil || st.reset {
		sock.close()
		return streamMark{}
	}
	return streamMark{sock: sock, start: st.written, ok: true}
}

// settleWait bounds how long a cut response waits for the reset that
// follows a peer's FIN while bytes are still queued: about one round trip
// on any ordinary path. Past it the response is charged all it wrote.
const settleWait = time.Second

// carried is what a response's connection carried of the bytes it wrote
// after its mark, as offsets from the mark in the connection's stream
// (over TLS these count records, framing included).
type carried struct {
	// ok: the counters were read; without them nothing below is known.
	ok bool
	// written, transmitted, acked: what was handed to the socket, what
	// left this host, what the peer's TCP acknowledged.
	written, transmitted, acked int64
	// all: nothing the socket was given is unacknowledged, so every byte
	// the response handed to the socket reached the peer's kernel.
	all bool
	// reset: the connection was reset; what it never transmitted died in
	// its queue.
	reset bool
}

// settle waits until the fate of a finished response's bytes is known and
// returns what the connection carried of them. A response written whole
// (cut false) waits until the peer acknowledged everything queued (its
// final acknowledgement, which a client's delayed ACK holds back at most
// a few tens of milliseconds, and which its next request on a kept-alive
// connection carries at once), until the connection is reset, or until
// until. A cut one returns at once to a live peer (its queue still goes
// out, unmeasured: evidence errs low) and waits only for a peer that sent
// its FIN, at most settleWait, for the reset that tells what never left.
// written is how many bytes the response wrote after its mark: nothing is
// awaited for a response that wrote none. It lets go of the mark's socket.
func (m streamMark) settle(written int64, cut bool, until time.Time) carried {
	if !m.ok {
		return carried{}
	}
	defer m.sock.close()
	if cut {
		until = time.Now().Add(settleWait)
	}
	// The first polls come quickly: on a kept-alive connection the last
	// acknowledgement rides on the client's next request, which waits
	// for this handler to return, so every microsecond of the pause is
	// the next response's latency; later ones back off to 50 ms (a
	// delayed ACK, a slow network).
	for pause := 25 * time.Microsecond; ; pause = min(2*pause, 50*time.Millisecond) {
		st, err := readStream(m.sock, m.count)
		if err != nil {
			return carried{}
		}
		c := carried{ok: true, written: max(0, st.written-m.start), transmitted: max(0, st.transmitted-m.start),
			acked: max(0, st.acked-m.start), all: st.acked == st.written, reset: st.reset}
		switch {
		case st.reset,
			c.all, // nothing left unacknowledged
			written <= 0,
			cut && !st.peerClosed, // alive: its queue will still go out
			time.Now().After(until):
			return c
		}
		time.Sleep(pause)
	}
}
