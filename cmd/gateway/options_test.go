package main

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/dlgate/dlgate/config"
)

// lockedBuffer is an io.Writer that a test may read while serve writes.
type lockedBuffer struct {
	mu  sync.Mutex
	buf []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// MustServe runs serve on the embedded default, on loopback port 0, until
// the test ends, and returns the host:port of the public and admin
// listeners.
func MustServe(tb testing.TB) (public, admin string) {
	tb.Helper()
	return MustServeIn(tb, tb.TempDir())
}

// MustServeIn is MustServe with dataDir as GATEWAY_DATA_DIR, where the
// embedded default keeps its admin token.
func MustServeIn(tb testing.TB, dataDir string) (public, admin string) {
	tb.Helper()
	env := map[string]string{
		"GATEWAY_DATA_DIR": dataDir, "GATEWAY_LISTEN": "127.0.0.1:0", "GATEWAY_ADMIN_LISTEN": "127.0.0.1:0",
		"GATEWAY_LOG_LEVEL": "error",
	}
	cfg, err := config.Load(nil, func(k string) string { return env[k] })
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	out := &lockedBuffer{}
	done := make(chan error, 1)
	go func() { done <- serve(ctx, cfg, out) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("serve: %v", err)
		}
	})
	listening := regexp.MustCompile(`gateway: public http://(\S+), admin http://(\S+),`)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m := listening.FindStringSubmatch(out.String()); m != nil {
			return m[1], m[2]
		}
		select {
		case err := <-done:
			tb.Fatalf("serve ended before listening: %v", err)
		default:
		}
	}
	tb.Fatalf("serve did not announce its listeners: %q", out.String())
	return "", ""
}

// rawRequest sends request, written out whole, to addr and reads the
// answer.
func rawRequest(tb testing.TB, addr, request string) *http.Response {
	tb.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	if _, err := io.WriteString(conn, request); err != nil {
		tb.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		tb.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body) //nolint:errcheck // only the head matters
	resp.Body.Close()
	return resp
}

// Both listeners leave OPTIONS * to the gateway's handler, which answers
// it with the listener's headers and request id, not net/http's built-in
// 200 without them.
func TestOptionsAsteriskIsAnsweredByTheGatewayOnBothListeners(t *testing.T) {
	public, admin := MustServe(t)
	for _, c := range []struct {
		name, addr, allow string
		headers           map[string]string
	}{
		{"public", public, "GET, HEAD, POST", map[string]string{
			"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"}},
		{"admin", admin, "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS", nil},
	} {
		resp := rawRequest(t, c.addr, "OPTIONS * HTTP/1.1\r\nHost: "+c.addr+"\r\nConnection: close\r\n\r\n")
		if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Allow") != c.allow {
			t.Errorf("%s OPTIONS * = %d Allow %q, want 204 %q", c.name, resp.StatusCode, resp.Header.Get("Allow"), c.allow)
		}
		if len(resp.Header.Get("X-Request-Id")) != 24 {
			t.Errorf("%s OPTIONS *: X-Request-Id %q", c.name, resp.Header.Get("X-Request-Id"))
		}
		for k, v := range c.headers {
			if got := resp.Header.Get(k); got != v {
				t.Errorf("%s OPTIONS *: %s = %q, want %q", c.name, k, got, v)
			}
		}
	}
}
