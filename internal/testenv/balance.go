package testenv

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// balancer is a TCP load balancer on 127.0.0.1, as an operator puts in
// front of stateless S3 gateways: each connection it accepts goes to the
// next of its backends in turn (one that refuses is passed over for the
// one after), and bytes go through unchanged, so a client's requests,
// signed for the balancer's address, reach every gateway alike.
type balancer struct {
	addr     string
	backends []string
	next     atomic.Uint64
	// accepted counts, per backend, the connections sent to it.
	accepted []atomic.Int64

	mu    sync.Mutex // guards ln and conns
	ln    net.Listener
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

func newBalancer(addr string, backends ...string) *balancer {
	return &balancer{addr: addr, backends: backends, accepted: make([]atomic.Int64, len(backends))}
}

// start listens on b.addr and serves until stop. It fails when the
// address is taken.
func (b *balancer) start() error {
	ln, err := net.Listen("tcp", b.addr)
	if err != nil {
		return fmt.Errorf("balancer on %s: %w", b.addr, err)
	}
	b.mu.Lock()
	b.ln = ln
	b.conns = map[net.Conn]struct{}{}
	b.mu.Unlock()
	b.wg.Go(func() { b.serve(ln) })
	return nil
}

func (b *balancer) serve(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				// A transient accept error (EMFILE): the listener
				// stays, as net/http's does.
				time.Sleep(10 * time.Millisecond)
				continue
			}
			return
		}
		if !b.track(c) {
			c.Close()
			return
		}
		b.wg.Go(func() { b.relay(c) })
	}
}

// track records c so that stop can cut it; false once stop has begun.
func (b *balancer) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.conns == nil {
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *balancer) untrack(c net.Conn) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.conns, c)
}

// relay joins client to the next backend that takes a connection, and
// copies each way until both sides are done. With no backend up, the
// client's connection is closed, as a load balancer without a healthy
// target does.
func (b *balancer) relay(client net.Conn) {
	defer b.untrack(client)
	defer client.Close()
	first := b.next.Add(1)
	var backend net.Conn
	for i := range uint64(len(b.backends)) {
		n := (first + i) % uint64(len(b.backends))
		c, err := net.DialTimeout("tcp", b.backends[n], 5*time.Second)
		if err == nil {
			b.accepted[n].Add(1)
			backend = c
			break
		}
	}
	if backend == nil || !b.track(backend) {
		if backend != nil {
			backend.Close()
		}
		return
	}
	defer b.untrack(backend)
	defer backend.Close()
	var wg sync.WaitGroup
	wg.Go(func() { pipe(backend, client) })
	pipe(client, backend)
	wg.Wait()
}

// pipe copies src to dst (splice on Linux) and then half-closes dst, so
// that an end of the request or of the response reaches the other side as
// it would without a balancer between them.
func pipe(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	} else {
		_ = dst.Close()
	}
}

// stop closes the listener and every connection through it, and waits
// until nothing runs. start may be called again afterwards, on the same
// address.
func (b *balancer) stop() {
	b.mu.Lock()
	if b.ln != nil {
		b.ln.Close()
		b.ln = nil
	}
	for c := range b.conns {
		c.Close()
	}
	b.conns = nil
	b.mu.Unlock()
	b.wg.Wait()
}
