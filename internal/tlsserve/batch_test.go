package tlsserve

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"testing"
	"time"
)

// tcpPair is a connected loopback TCP pair: the server end wrapped as a
// BatchListener wraps it, batching enabled, and the client end.
func tcpPair(t *testing.T) (*batchConn, net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	bl := BatchListener(l)
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := bl.Accept()
		if err != nil {
			t.Error(err)
		}
		accepted <- c
	}()
	client, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server := (<-accepted).(*batchConn)
	server.enable()
	t.Cleanup(func() { server.Close(); client.Close() })
	return server, client
}

// smallBuffers makes the kernel's buffers small, so that a peer that
// stops reading stalls the writer after a few hundred KiB.
func smallBuffers(t *testing.T, server *batchConn, client net.Conn) {
	t.Helper()
	if err := server.Conn.(*net.TCPConn).SetWriteBuffer(16 << 10); err != nil {
		t.Fatal(err)
	}
	if err := client.(*net.TCPConn).SetReadBuffer(16 << 10); err != nil {
		t.Fatal(err)
	}
}

// Everything written in records, from one writer as a tls.Conn writes,
// arrives byte-exact and in order, and Close delivers what was pending
// before the peer sees the end.
func TestBatchedWritesArriveInOrderAndCloseDeliversThem(t *testing.T) {
	server, client := tcpPair(t)
	data := make([]byte, 8<<20)
	rand.Read(data)
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(client)
		got <- b
	}()
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 16<<10+29) // a TLS record's size
		if k, err := server.Write(rest[:n]); err != nil || k != n {
			t.Fatalf("Write: %d, %v", k, err)
		}
		rest = rest[n:]
	}
	if err := server.Close(); err != nil {
		t.Fatal(err)
	}
	if b := <-got; !bytes.Equal(b, data) {
		t.Fatalf("the peer read %d bytes, not the %d written", len(b), len(data))
	}
	if _, err := server.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Write after Close: %v, want net.ErrClosed", err)
	}
}

// A connection not enabled writes straight through (HTTP/1.1, and HTTP/2
// before its preface).
func TestAConnectionNotEnabledWritesStraightThrough(t *testing.T) {
	server, client := tcpPair(t)
	server.mu.Lock()
	server.on = false
	server.mu.Unlock()
	if _, err := server.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	server.mu.Lock()
	writing, pending := server.writing, len(server.next)
	server.mu.Unlock()
	if writing || pending != 0 {
		t.Errorf("an unbatched Write left a flusher (%v) or %d pending bytes", writing, pending)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(client, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("read %q, %v", buf, err)
	}
}

// A peer that reads nothing fails the writes within their deadline, as
// net/http's WriteByteTimeout sets it before every write: a Write waiting
// for room returns the timeout instead of waiting for ever, and so does
// every later one.
func TestAPeerThatReadsNothingFailsTheWritesAtTheirDeadline(t *testing.T) {
	server, client := tcpPair(t)
	smallBuffers(t, server, client)
	// Should the writes hang, the peer goes away after 30 s and the test
	// fails on a reset instead of hanging.
	watchdog := time.AfterFunc(30*time.Second, func() { client.Close() })
	defer watchdog.Stop()
	record := make([]byte, 16<<10)
	var err error
	for i := 0; i < 10_000 && err == nil; i++ { // at most 160 MiB
		server.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
		_, err = server.Write(record)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("writes to a peer that reads nothing: %v, want a deadline error", err)
	}
	server.SetWriteDeadline(time.Time{})
	if _, err := server.Write(record); err == nil {
		t.Error("a Write after a failed one succeeded")
	}
}

// A peer that reads slowly but steadily is never cut off: each write of
// the flusher only has to move a byte within the deadline's span, and a
// Write waiting for room waits as long as that write moves.
func TestASlowPeerThatKeepsReadingIsNotCutOff(t *testing.T) {
	server, client := tcpPair(t)
	smallBuffers(t, server, client)
	const total = 256 << 10
	read := make(chan int64)
	go func() {
		var n int64
		buf := make([]byte, 4<<10)
		for n < total {
			k, err := client.Read(buf)
			n += int64(k)
			if err != nil {
				break
			}
			// At most 100 KiB/s: a batch of 64 KiB takes 640 ms, and
			// every write waits for the kernel to take bytes.
			time.Sleep(40 * time.Millisecond)
		}
		read <- n
	}()
	record := make([]byte, 16<<10)
	for sent := 0; sent < total; sent += len(record) {
		server.SetWriteDeadline(time.Now().Add(time.Second))
		if _, err := server.Write(record); err != nil {
			t.Fatalf("after %d bytes to a peer reading steadily: %v", sent, err)
		}
	}
	if n := <-read; n != total {
		t.Fatalf("the peer read %d of %d bytes", n, total)
	}
}

// A quiet connection keeps no goroutine and no buffer.
func TestAQuietConnectionHoldsNothing(t *testing.T) {
	server, client := tcpPair(t)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		io.CopyN(io.Discard, client, 1<<20)
	}()
	record := make([]byte, 16<<10)
	for range 64 {
		if _, err := server.Write(record); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		server.mu.Lock()
		writing, next := server.writing, server.next
		server.mu.Unlock()
		if !writing {
			if next != nil {
				t.Errorf("a quiet connection holds a %d-byte buffer", cap(next))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the flusher still runs 10 s after everything was read")
		}
		time.Sleep(time.Millisecond)
	}
}

// A deadline set in the past stops a write under way at once, though
// bytes still move: it is how a server aborts a connection's writes.
func TestAPastDeadlineStopsTheWriteUnderWay(t *testing.T) {
	server, client := tcpPair(t)
	smallBuffers(t, server, client)
	go func() { // a slow reader: bytes keep moving
		buf := make([]byte, 4<<10)
		for {
			if _, err := client.Read(buf); err != nil {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	record := make([]byte, 16<<10)
	// Fill the batch with a deadline that would be extended while bytes move.
	for range 8 {
		server.SetWriteDeadline(time.Now().Add(time.Minute))
		if _, err := server.Write(record); err != nil {
			t.Fatal(err)
		}
	}
	server.SetWriteDeadline(time.Now().Add(-time.Second))
	done := make(chan error, 1)
	go func() {
		server.mu.Lock()
		for server.writing {
			server.cond.Wait()
		}
		err := server.err
		server.mu.Unlock()
		done <- err
	}()
	select {
	case err := <-done:
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("the write under way ended with %v, want a deadline error", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a deadline in the past did not stop the write under way within 30 s")
	}
}
