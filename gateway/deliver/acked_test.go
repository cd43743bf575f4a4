package deliver

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/dlgate/dlgate/internal/testenv"
)

// tcpPair is a loopback connection: the server side as the gateway sees
// it (through ConnContext), the client side with a small receive buffer
// so that the server's writes pile up in its send queue.
//
// With counted, the server side is wrapped as the gateway's connection
// limit wraps it, counting what it writes (WriteCounter), and a reading
// is one TCP_INFO (counted); without, the kernel's counters alone tell
// where the stream is (snapshot).
func tcpPair(t *testing.T, counted bool) (server net.Conn, client *net.TCPConn, r *http.Request) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	client = cc.(*net.TCPConn)
	client.SetReadBuffer(64 << 10) //nolint:errcheck // a hint
	tcp := (<-accepted).(*net.TCPConn)
	tcp.SetWriteBuffer(1 << 20) //nolint:errcheck // a hint
	server = tcp
	if counted {
		server = &countingConn{TCPConn: tcp}
	}
	t.Cleanup(func() { server.Close(); client.Close() })
	// Wrapped as the connection limit wraps it, to check the unwrapping.
	ctx := ConnContext(context.Background(), netConnOnly{server})
	r = (&http.Request{ProtoMajor: 1, ProtoMinor: 1}).WithContext(ctx)
	return server, client, r
}

// writeUntilBlocked writes to c until a write stalls (the peer's window
// and c's send queue are full) and returns how many bytes c took.
func writeUntilBlocked(t *testing.T, c net.Conn) int64 {
	t.Helper()
	buf := make([]byte, 64<<10)
	var n int64
	for {
		c.SetWriteDeadline(time.Now().Add(200 * time.Millisecond)) //nolint:errcheck // a test
		k, err := c.Write(buf)
		n += int64(k)
		if err != nil {
			c.SetWriteDeadline(time.Time{}) //nolint:errcheck // a test
			return n
		}
	}
}

func TestACutResponseGivesBackWhatNeverLeftTheHost(t *testing.T) {
	bothReadings(t, func(t *testing.T, counted bool) {
		// An earlier response on the kept-alive connection, read whole.
		server, client, r := afterAResponse(t, counted, 100_000)
		m := markStream(r)
		if runtime.GOOS != "linux" {
			if m.ok {
				t.Fatalf("markStream found TCP counters on %s", runtime.GOOS)
			}
			return
		}
		if !m.ok {
			t.Fatal("markStream found no TCP counters on Linux")
		}
		written := writeUntilBlocked(t, server)
		got, err := io.ReadFull(client, make([]byte, 10_000))
		if err != nil {
			t.Fatal(err)
		}
		client.SetLinger(0) //nolint:errcheck // a reset, as from a killed client
		rcvbuf := receiveBuffer(t, client)
		client.Close()
		start := time.Now()
		c := m.settle(written, true, time.Time{})
		if !c.ok || !c.reset {
			t.Fatalf("settle = %+v after the client reset, want the counters of a reset connection", c)
		}
		back := written - c.transmitted
		charged := written - back
		t.Logf("wrote %d, the client read %d and reset; %d never left the host, %d acknowledged (found in %v; receive buffer %d)",
			written, got, back, c.acked, time.Since(start), rcvbuf)
		if charged < int64(got) {
			t.Errorf("charged %d bytes, less than the %d the client read", charged, got)
		}
		if back <= 0 {
			t.Errorf("nothing given back of %d bytes written to a client that read %d and reset", written, got)
		}
		// What the client's kernel acknowledged: at least what it handed to
		// the reader, at most that and what its receive buffer could hold.
		if c.acked < int64(got) || c.acked > int64(got)+rcvbuf {
			t.Errorf("acknowledged %d bytes, want between the %d the client read and that plus its %d-byte receive buffer", c.acked, got, rcvbuf)
		}
		if c.acked > c.transmitted {
			t.Errorf("acknowledged %d bytes, more than the %d transmitted", c.acked, c.transmitted)
		}
	})
}

// receiveBuffer is c's SO_RCVBUF: what its kernel may hold unread (the
// kernel doubles the hint for its own accounting; the data held is below
// it).
func receiveBuffer(t *testing.T, c *net.TCPConn) int64 {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var n int
	var serr error
	if err := rc.Control(func(fd uintptr) { n, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF) }); err != nil {
		t.Fatal(err)
	}
	if serr != nil {
		t.Fatal(serr)
	}
	return int64(n)
}

func TestBytesStillQueuedWhenThePeerResetsGoBack(t *testing.T) {
	bothReadings(t, func(t *testing.T, counted bool) {
		if runtime.GOOS != "linux" {
			testenv.Require(t, "Linux's TCP counters (TCP_INFO, SIOCOUTQ)", errors.New("running on "+runtime.GOOS))
		}
		server, client, r := tcpPair(t, counted)
		m := markStream(r)
		written := writeUntilBlocked(t, server)
		done := make(chan int64, 1)
		go func() {
			// A whole response: it waits for its queue to be acknowledged.
			c := m.settle(written, false, time.Now().Add(10*time.Second))
			back := int64(-1)
			if c.reset {
				back = written - c.transmitted
			}
			done <- back
		}()
		time.Sleep(50 * time.Millisecond)
		client.SetLinger(0) //nolint:errcheck // a test
		client.Close()
		select {
		case back := <-done:
			if back <= 0 || back > written {
				t.Errorf("gave back %d of %d queued bytes after a reset, want some and at most all", back, written)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a whole response still waited 5 s after its client reset the connection")
		}
	})
}

func TestAWholeResponseReadToItsEndGivesNothingBack(t *testing.T) {
	bothReadings(t, func(t *testing.T, counted bool) {
		server, client, r := tcpPair(t, counted)
		m := markStream(r)
		const n = 3 << 20
		go io.CopyN(io.Discard, client, n) //nolint:errcheck // a test
		if _, err := server.Write(make([]byte, n)); err != nil {
			t.Fatal(err)
		}
		c := m.settle(n, false, time.Now().Add(10*time.Second))
		if runtime.GOOS != "linux" {
			if c.ok {
				t.Errorf("settle read TCP counters on %s", runtime.GOOS)
			}
			return
		}
		if c.reset || c.transmitted != n {
			t.Errorf("settle = %+v for a response its client read whole, want all %d bytes transmitted", c, n)
		}
		if !c.all || c.acked != n {
			t.Errorf("settle = %+v for a response its client read whole, want all %d bytes acknowledged", c, n)
		}
	})
}

func TestALiveConnectionKeepsItsCharge(t *testing.T) {
	bothReadings(t, func(t *testing.T, counted bool) {
		// Cut for another reason (budget spent, store failed): the client is
		// still there and gets the queued bytes, so they stay charged.
		server, _, r := tcpPair(t, counted)
		m := markStream(r)
		written := writeUntilBlocked(t, server)
		start := time.Now()
		if c := m.settle(written, true, time.Time{}); c.reset || c.acked >= written {
			t.Errorf("settle = %+v for a live client that stopped reading %d bytes in, want no reset and the queue unacknowledged", c, written)
		}
		if d := time.Since(start); d > 100*time.Millisecond {
			t.Errorf("a cut response to a live client waited %v before charging it", d)
		}
	})
}

func TestHTTP2StreamsAreNotMarked(t *testing.T) {
	bothReadings(t, func(t *testing.T, counted bool) {
		_, _, r := tcpPair(t, counted)
		r.ProtoMajor, r.ProtoMinor = 2, 0
		if m := markStream(r); m.ok {
			t.Error("an HTTP/2 stream was marked: another stream can keep its connection's queue from emptying")
		}
	})
}

// netConnOnly wraps a connection as the gateway's connection limit does:
// the socket is reachable only through NetConn.
type netConnOnly struct{ net.Conn }

func (c netConnOnly) NetConn() net.Conn { return c.Conn }

// bothReadings runs test with the socket read through a WriteCounter and
// through the kernel's counters alone.
func bothReadings(t *testing.T, test func(t *testing.T, counted bool)) {
	for _, counted := range []bool{false, true} {
		t.Run(map[bool]string{false: "kernel", true: "counted"}[counted], func(t *testing.T) { test(t, counted) })
	}
}

// countingConn counts what is written to its socket, as the gateway's
// connection limit does.
type countingConn struct {
	*net.TCPConn
	n int64
}

func (c *countingConn) Write(p []byte) (int, error) {
	k, err := c.TCPConn.Write(p)
	c.n += int64(k)
	return k, err
}

func (c *countingConn) ReadFrom(r io.Reader) (int64, error) {
	k, err := c.TCPConn.ReadFrom(r)
	c.n += k
	return k, err
}

func (c *countingConn) BytesWritten() int64 { return c.n }

// afterAResponse is tcpPair after an earlier response of n bytes, read
// whole by the client.
func afterAResponse(t *testing.T, counted bool, n int) (server net.Conn, client *net.TCPConn, r *http.Request) {
	t.Helper()
	server, client, r = tcpPair(t, counted)
	if _, err := server.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(client, make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	return server, client, r
}

// The count is found under the connection's wrappers, and a reading then
// takes it; without one, the kernel's counters alone.
func TestAMarkTakesTheConnectionsCountWhenThereIsOne(t *testing.T) {
	if runtime.GOOS != "linux" {
		testenv.Require(t, "Linux's TCP counters (TCP_INFO, SIOCOUTQ)", errors.New("running on "+runtime.GOOS))
	}
	bothReadings(t, func(t *testing.T, counted bool) {
		_, _, r := afterAResponse(t, counted, 1000)
		m := markStream(r)
		defer m.sock.close()
		if !m.ok || (m.count != nil) != counted {
			t.Fatalf("mark = %+v: ok, and a count iff the connection keeps one (%v), wanted", m, counted)
		}
		if m.start != 1000 {
			t.Errorf("the body begins at %d in the stream, want 1000", m.start)
		}
	})
}

// A connection its client reset before the body began: without a count
// the mark sees the reset and measures nothing (the response is charged
// what it wrote); with one the mark costs no system call, and settle sees
// the reset with nothing of the body carried.
func TestAConnectionResetBeforeTheBodyCarriesNoneOfIt(t *testing.T) {
	if runtime.GOOS != "linux" {
		testenv.Require(t, "Linux's TCP counters (TCP_INFO, SIOCOUTQ)", errors.New("running on "+runtime.GOOS))
	}
	bothReadings(t, func(t *testing.T, counted bool) {
		server, client, r := afterAResponse(t, counted, 1000)
		client.SetLinger(0) //nolint:errcheck // a reset
		client.Close()
		// The reset has arrived once a read fails with it.
		server.SetReadDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck // a test
		if _, err := server.Read(make([]byte, 1)); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("read after the client's reset: %v, want ECONNRESET", err)
		}
		m := markStream(r)
		if !counted {
			if m.ok {
				t.Errorf("mark = %+v on a reset connection without a count, want none", m)
			}
			return
		}
		if !m.ok || m.start != 1000 {
			t.Fatalf("mark = %+v, want the count, 1000", m)
		}
		written, _ := server.Write(make([]byte, 5000))
		c := m.settle(int64(written), true, time.Time{})
		if !c.ok || !c.reset || c.acked != 0 || c.transmitted != 0 {
			t.Errorf("settle = %+v after writing %d to a reset connection, want the reset and nothing carried", c, written)
		}
	})
}
