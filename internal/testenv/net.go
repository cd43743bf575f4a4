package testenv

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Ports are drawn below Linux's ephemeral range (32768–60999 by default):
// a port the kernel handed out for ":0" may be reused at once as the local
// end of some outgoing connection before the server that wanted it binds.
const (
	portLow  = 20000
	portHigh = 32000
)

var (
	portsMu sync.Mutex
	// portsGiven keeps one process from handing the same port to two servers
	// in the window between probing it and the server binding it.
	portsGiven = map[int]bool{}
)

// FreePort returns a TCP port on 127.0.0.1 that nothing listens on right now
// and that this process has not handed out before. Another process can still
// take it before the caller binds it; the Start functions retry on that.
func FreePort(tb testing.TB) int {
	tb.Helper()
	p, err := freePort()
	if err != nil {
		tb.Fatalf("testenv: no free port: %v", err)
	}
	return p
}

func freePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 200 {
		p := portLow + rand.IntN(portHigh-portLow)
		if portsGiven[p] {
			continue
		}
		if probePort(p) == nil {
			portsGiven[p] = true
			return p, nil
		}
	}
	// The low range is crowded; fall back to whatever the kernel picks.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	p := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, err
	}
	portsGiven[p] = true
	return p, nil
}

func probePort(p int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
	if err != nil {
		return err
	}
	return l.Close()
}

// WaitTCP dials addr until a connection succeeds or ctx ends. The error, on
// ctx's end, carries the last dial error.
func WaitTCP(ctx context.Context, addr string) error {
	var d net.Dialer
	for {
		dctx, cancel := context.WithTimeout(ctx, time.Second)
		c, err := d.DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			return c.Close()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last error: %v)", addr, ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// answers reports whether url answers HTTP at all.
func answers(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}
