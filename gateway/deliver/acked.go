package deliver

import (
	"context"
	"net"
	"net/http"
	"syscall"
	"time"
)

// A session response is charged what its connection carried, not what
// it wrote (README, "What the budget means in practice"). A write returns
// once the bytes are in the socket's send queue; when the client goes
// away with its window full, its kernel resets the connection and the
// bytes this host never transmitted die in the queue. They go back to the
// budget. Everything that left this host stays charged, acknowledged or
// not: a client may have read a segment whose acknowledgement never came
// back. So a response is charged
//
//	min(written, transmitted since the response began)
//
// where "transmitted" counts the status line and headers too (charged as
// body bytes: never less than the client could have received). Until the
// reset the kernel may still send what is queued, so nothing goes back
// before it: a response written whole waits for its queue to leave (or for
// the reset) before it counts as done; a cut one waits only when its peer
// already sent its FIN, and the reset follows within a round trip.

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

// rawConnOf finds the TCP socket under the request's connection,
// unwrapping TLS (tls.Conn.NetConn) and our own wrappers; nil when there
// is none.
func rawConnOf(ctx context.Context) syscall.RawConn {
	c, _ := ctx.Value(connKey{}).(net.Conn)
	for c != nil {
		if sc, ok := c.(syscall.Conn); ok {
			rc, err := sc.SyscallConn()
			if err != nil {
				return nil
			}
			return rc
		}
		u, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return nil
		}
		c = u.NetConn()
	}
	return nil
}

// tcpStream is what a TCP socket's kernel knows of the bytes written to
// it, as offsets in the connection's byte stream.
type tcpStream struct {
	written     int64 // acknowledged, plus still queued (unsent or unacknowledged)
	transmitted int64 // acknowledged, plus sent and unacknowledged
	reset       bool  // closed for good: nothing more will be sent
	peerClosed  bool  // the peer sent its FIN; a reset usually follows
}

// streamMark is where a response began in its connection's stream.
type streamMark struct {
	rc    syscall.RawConn
	start int64
	ok    bool
}

// markStream records where the response to r about to be written begins.
// On a kept-alive connection the earlier responses' queued bytes come
// before it, so only this response's bytes count later. HTTP/2 streams
// share their connection's queue, which another stream may keep from
// ever emptying: they are charged all they write, as before.
func markStream(r *http.Request) streamMark {
	if r.ProtoMajor != 1 {
		return streamMark{}
	}
	rc := rawConnOf(r.Context())
	if rc == nil {
		return streamMark{}
	}
	st, err := readStream(rc)
	if err != nil || st.reset {
		return streamMark{}
	}
	return streamMark{rc: rc, start: st.written, ok: true}
}

// settleWait bounds how long a cut response waits for the reset that
// follows a peer's FIN while bytes are still queued: about one round trip
// on any ordinary path. Past it the response is charged all it wrote.
const settleWait = time.Second

// untransmitted waits until the fate of a finished response's bytes is
// known and returns how many of its written body bytes never left this
// host. It returns as soon as everything written was transmitted (0) or
// the connection is reset (the rest). A response written whole waits
// until the client's window took the socket's queue, at most until;
// a cut one waits only for a peer that sent its FIN, at most settleWait.
// Without counters (markStream found none) it returns 0.
func (m streamMark) untransmitted(written int64, cut bool, until time.Time) int64 {
	if !m.ok || written <= 0 {
		return 0
	}
	if cut {
		until = time.Now().Add(settleWait)
	}
	for pause := time.Millisecond / 2; ; pause = min(2*pause, 50*time.Millisecond) {
		st, err := readStream(m.rc)
		switch {
		case err != nil:
			return 0
		case st.reset:
			return max(0, written-max(0, st.transmitted-m.start))
		case st.written == st.transmitted, // nothing left unsent
			cut && !st.peerClosed, // alive: its queue will still go out
			time.Now().After(until):
			return 0
		}
		time.Sleep(pause)
	}
}
