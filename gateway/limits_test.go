package gateway_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/storage"
)

// dripper is a client that sends a request head and then its body one
// byte at a time, as slowly as an attacker likes.
type dripper struct {
	conn   net.Conn
	br     *bufio.Reader
	stop   chan struct{}
	method string
}

// startDrip connects to addr, sends head (request line and headers, each
// line ending in CRLF, without the blank line) and then a body byte every
// interval until the server closes the connection or the test ends.
func startDrip(tb testing.TB, addr, head string, interval time.Duration) *dripper {
	tb.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	method, _, _ := strings.Cut(head, " ")
	d := &dripper{conn: conn, br: bufio.NewReader(conn), stop: make(chan struct{}), method: method}
	tb.Cleanup(func() { close(d.stop); conn.Close() })
	if _, err := io.WriteString(conn, head+"\r\n"); err != nil {
		tb.Fatal(err)
	}
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-d.stop:
				return
			case <-t.C:
				if _, err := conn.Write([]byte{'x'}); err != nil {
					return
				}
			}
		}
	}()
	return d
}

// answer reads the response, failing the test when none comes within
// 5 s, and returns it with its body and how long it took.
func (d *dripper) answer(tb testing.TB, start time.Time) (*http.Response, []byte, time.Duration) {
	tb.Helper()
	d.conn.SetReadDeadline(time.Now().Add(5 * time.Second)) //nolint:errcheck // a TCP conn
	resp, err := http.ReadResponse(d.br, &http.Request{Method: d.method})
	if err != nil {
		tb.Fatalf("no answer to a dripping request: %v", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("reading the answer: %v", err)
	}
	return resp, body, time.Since(start)
}

// closed demands that the server closes the connection after its answer,
// rather than waiting for the rest of the body.
func (d *dripper) closed(tb testing.TB) {
	tb.Helper()
	d.conn.SetReadDeadline(time.Now().Add(3 * time.Second)) //nolint:errcheck // a TCP conn
	_, err := d.br.ReadByte()
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		tb.Fatal("the server kept the connection of a refused body open")
	}
}

func hostPath(tb testing.TB, rawURL string) (host, path string) {
	tb.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		tb.Fatal(err)
	}
	return u.Host, u.Path
}

func checkProblemBody(tb testing.TB, resp *http.Response, body []byte, status int, suffix string) {
	tb.Helper()
	if resp.StatusCode != status {
		tb.Fatalf("status %d %s, want %d", resp.StatusCode, body, status)
	}
	p := mustJSON[problemJSON](tb, body)
	if p.Type != problem.Base+suffix {
		tb.Errorf("problem type %q, want …/%s", p.Type, suffix)
	}
}

func TestGetOrHeadWithABodyIsRefusedBeforeAnyLookup(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "body/get.bin", testData(100), nil)
	host, path := hostPath(t, l.URL)
	for _, c := range []struct{ name, head string }{
		{"GetContentLength", "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 200000\r\n"},
		{"GetChunked", "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nTransfer-Encoding: chunked\r\n"},
		{"HeadContentLength", "HEAD " + path + " HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 10\r\n"},
		// An unknown token: what held 2,000 descriptors in issue 9.
		{"UnknownToken", "GET /d/" + strings.Repeat("A", 43) + " HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 200000\r\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := h.Ledger.Calls("")
			start := time.Now()
			d := startDrip(t, host, c.head, 200*time.Millisecond)
			resp, body, took := d.answer(t, start)
			t.Logf("answered %d after %v", resp.StatusCode, took)
			if strings.HasPrefix(c.head, "HEAD") {
				if resp.StatusCode != http.StatusBadRequest {
					t.Fatalf("HEAD with a body = %d, want 400", resp.StatusCode)
				}
			} else {
				checkProblemBody(t, resp, body, http.StatusBadRequest, "body-not-allowed")
			}
			if !resp.Close {
				t.Error("no Connection: close on the answer")
			}
			d.closed(t)
			if n := h.Ledger.Calls("") - before; n != 0 {
				t.Errorf("a request with a refused body made %d ledger calls, want none", n)
			}
		})
	}
	if got := h.MustShowLink(t, l.ID); got.Remaining != 5 {
		t.Fatalf("remaining %d after refused requests, want 5", got.Remaining)
	}
}

func TestDrippingPostBodyTimesOutBeforeTheClaim(t *testing.T) {
	h := MustHarness(t, func(o *gateway.Options) { o.BodyTimeout = 300 * time.Millisecond })
	l := h.MustObjectLink(t, "body/post.bin", testData(100), map[string]any{"confirm": true})
	before := h.Ledger.Calls("")
	host, path := hostPath(t, l.URL)
	for _, target := range []string{path, path + "/sessions"} {
		t.Run(strings.TrimPrefix(target, path), func(t *testing.T) {
			start := time.Now()
			d := startDrip(t, host, "POST "+target+" HTTP/1.1\r\nHost: "+host+
				"\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n", 50*time.Millisecond)
			resp, body, took := d.answer(t, start)
			t.Logf("answered %d after %v with a 300ms body timeout", resp.StatusCode, took)
			checkProblemBody(t, resp, body, http.StatusRequestTimeout, "request-timeout")
			d.closed(t)
		})
	}
	if n := h.Ledger.Calls("") - before; n != 0 {
		t.Errorf("requests whose bodies never arrived made %d ledger calls, want none", n)
	}
	if got := h.MustShowLink(t, l.ID); got.Remaining != 5 {
		t.Fatalf("remaining %d, want 5: nothing was claimed", got.Remaining)
	}
}

func TestOversizedPostBodyIsRefused(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "body/big.bin", testData(100), nil)
	before := h.Ledger.Calls("")
	host, path := hostPath(t, l.URL)
	d := startDrip(t, host, "POST "+path+"/sessions HTTP/1.1\r\nHost: "+host+"\r\nContent-Length: 1048576\r\n", time.Second)
	resp, body, _ := d.answer(t, time.Now())
	checkProblemBody(t, resp, body, http.StatusRequestEntityTooLarge, "body-too-large")
	d.closed(t)

	// Chunked: counted as it arrives.
	req, _ := http.NewRequest(http.MethodPost, l.URL+"/sessions", io.LimitReader(neverEnding('x'), 100<<10))
	req.ContentLength = -1
	resp, body = mustDo(t, h.Client, req)
	checkProblemBody(t, resp, body, http.StatusRequestEntityTooLarge, "body-too-large")
	if n := h.Ledger.Calls("") - before; n != 0 {
		t.Errorf("oversized bodies made %d ledger calls, want none", n)
	}
}

type neverEnding byte

func (b neverEnding) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

func TestSmallPostBodiesStillClaim(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "body/small.bin", testData(100), map[string]any{"confirm": true})
	req, _ := http.NewRequest(http.MethodPost, l.URL+"/sessions", strings.NewReader(`{}`))
	if resp, body := mustDo(t, h.Client, req); resp.StatusCode != http.StatusCreated {
		t.Fatalf("mint with a small body = %d %s", resp.StatusCode, body)
	}
	// The confirm page's form post, as a browser sends it.
	req, _ = http.NewRequest(http.MethodPost, l.URL, strings.NewReader("confirm=1"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, body := mustDo(t, h.Client, req); resp.StatusCode != http.StatusOK || len(body) != 100 {
		t.Fatalf("confirm form post = %d with %d bytes", resp.StatusCode, len(body))
	}
	if got := h.MustShowLink(t, l.ID); got.Remaining != 3 {
		t.Fatalf("remaining %d, want 3", got.Remaining)
	}
}

func TestOtherMethodsWithABodyAreAnsweredAndClosed(t *testing.T) {
	h := MustHarness(t)
	host := h.Public.Listener.Addr().String()
	d := startDrip(t, host, "PUT /d/"+strings.Repeat("A", 43)+" HTTP/1.1\r\nHost: "+host+"\r\nContent-Length: 200000\r\n", 200*time.Millisecond)
	resp, body, _ := d.answer(t, time.Now())
	checkProblemBody(t, resp, body, http.StatusMethodNotAllowed, "method-not-allowed")
	d.closed(t)
}

func TestStalledUploadIsAbandoned(t *testing.T) {
	h := MustHarness(t, func(o *gateway.Options) { o.UploadIdleTimeout = 300 * time.Millisecond })
	host := strings.TrimPrefix(h.Admin.URL, "http://")
	start := time.Now()
	d := startDrip(t, host, "PUT /v1/objects/stalled.bin HTTP/1.1\r\nHost: "+host+
		"\r\nAuthorization: Bearer "+testAdminToken+"\r\nContent-Length: 100000\r\n", time.Hour)
	io.WriteString(d.conn, strings.Repeat("y", 1000)) //nolint:errcheck // then nothing more
	resp, body, took := d.answer(t, start)
	t.Logf("stalled upload answered %d after %v with a 300ms idle timeout", resp.StatusCode, took)
	checkProblemBody(t, resp, body, http.StatusRequestTimeout, "request-timeout")
	d.closed(t)
	if _, err := h.Store.Stat(context.Background(), storage.Ref{Key: "stalled.bin"}); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Stat of the stalled upload = %v, want ErrNotFound: nothing stored", err)
	}

	// Slow but moving: a byte every 100 ms never trips a 300 ms idle limit.
	start = time.Now()
	d = startDrip(t, host, "PUT /v1/objects/slow.bin HTTP/1.1\r\nHost: "+host+
		"\r\nAuthorization: Bearer "+testAdminToken+"\r\nContent-Length: 8\r\n", 100*time.Millisecond)
	resp, body, took = d.answer(t, start)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("slow upload = %d %s after %v, want 201", resp.StatusCode, body, took)
	}
}

func TestUnauthorizedUploadIsNotDrained(t *testing.T) {
	h := MustHarness(t)
	host := strings.TrimPrefix(h.Admin.URL, "http://")
	d := startDrip(t, host, "PUT /v1/objects/x.bin HTTP/1.1\r\nHost: "+host+"\r\nContent-Length: 200000\r\n", 200*time.Millisecond)
	resp, _, _ := d.answer(t, time.Now())
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("upload without a token = %d, want 401", resp.StatusCode)
	}
	d.closed(t)
}

// pingLedger makes the ledger's Ping a test's function.
type pingLedger struct {
	ledger.Ledger
	ping func(context.Context) error
}

func (p pingLedger) Ping(ctx context.Context) error { return p.ping(ctx) }

func hung(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }

func TestReadyReportsEachPartTruthfully(t *testing.T) {
	var dbPing func(context.Context) error
	h := MustHarness(t, func(o *gateway.Options) {
		o.ReadyTimeout = 200 * time.Millisecond
		o.Ledger = pingLedger{o.Ledger, func(ctx context.Context) error { return dbPing(ctx) }}
	})
	ready := func() map[string]string {
		resp, body := mustDo(t, http.DefaultClient, mustRequest(t, http.MethodGet, h.Admin.URL+"/readyz"))
		got := mustJSON[map[string]string](t, body)
		if (resp.StatusCode == http.StatusOK) != (got["database"] == "ok" && got["store"] == "ok") {
			t.Errorf("readyz %d with %v", resp.StatusCode, got)
		}
		return got
	}
	for _, c := range []struct {
		name      string
		db, store func(context.Context) error
		want      string
	}{
		{"Healthy", nil, nil, "map[database:ok store:ok]"},
		{"HungDatabase", hung, nil, "map[database:unavailable store:ok]"},
		{"HungStore", nil, hung, "map[database:ok store:unavailable]"},
		{"BrokenStore", nil, func(context.Context) error { return storage.ErrUnavailable }, "map[database:ok store:unavailable]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dbPing = func(context.Context) error { return nil }
			if c.db != nil {
				dbPing = c.db
			}
			h.Store.PingFunc = c.store
			if got := fmt.Sprint(ready()); got != c.want {
				t.Fatalf("readyz = %s, want %s", got, c.want)
			}
		})
	}
	t.Run("ChecksRunAtOnce", func(t *testing.T) {
		// Each check answers only once the other has started: run one
		// after the other, the first would run out of time.
		dbStarted, storeStarted := make(chan struct{}), make(chan struct{})
		meet := func(mine, theirs chan struct{}) func(context.Context) error {
			return func(ctx context.Context) error {
				close(mine)
				select {
				case <-theirs:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}
		}
		dbPing, h.Store.PingFunc = meet(dbStarted, storeStarted), meet(storeStarted, dbStarted)
		if got := fmt.Sprint(ready()); got != "map[database:ok store:ok]" {
			t.Fatalf("readyz = %s, want both checks ok", got)
		}
	})
	h.Store.PingFunc = nil
}

func TestLimitListenerHoldsAtMostNConnections(t *testing.T) {
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln := gateway.LimitListener(inner, 2)
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", inner.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	dial()
	dial()
	first, second := <-accepted, <-accepted
	if _, ok := first.(io.ReaderFrom); !ok {
		t.Error("a limited connection hides its ReaderFrom, and net/http its sendfile path")
	}
	dial() // queued in the kernel's backlog, not accepted
	select {
	case c := <-accepted:
		t.Fatalf("a third connection %v was accepted with a limit of 2", c.RemoteAddr())
	case <-time.After(200 * time.Millisecond):
	}
	first.Close()
	first.Close() // a second Close must not free a second place
	select {
	case <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("closing a connection did not let the queued one in")
	}
	dial()
	select {
	case c := <-accepted:
		t.Fatalf("a fourth connection %v was accepted: a double Close freed two places", c.RemoteAddr())
	case <-time.After(200 * time.Millisecond):
	}
	second.Close()
	ln.Close()
}

func TestCreateLinkRefusesAnExpiryNoDatabaseCanStore(t *testing.T) {
	h := MustHarness(t)
	h.MustPutObject(t, "exp.bin", "application/octet-stream", testData(10))
	for _, c := range []struct {
		at     string
		status int
	}{
		{"9999-12-31T23:59:59-05:00", http.StatusBadRequest}, // the year 10000 in UTC
		{"1969-12-31T23:59:59Z", http.StatusBadRequest},
		{"9999-12-31T23:59:59Z", http.StatusCreated},
	} {
		resp, body := h.AdminDo(t, http.MethodPost, "/v1/links", map[string]any{
			"object": map[string]any{"key": "exp.bin"}, "downloads": 1, "expires_at": c.at}, nil)
		if resp.StatusCode != c.status {
			t.Errorf("expires_at %s = %d %s, want %d", c.at, resp.StatusCode, body, c.status)
		}
	}
}

func TestForgedGrantsCursorIs400(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "cursor.bin", testData(10), nil)
	// base64url of "9223372036854775807/x", the cursor of issue 9.
	for _, c := range []string{"OTIyMzM3MjAzNjg1NDc3NTgwNy94", "not-a-cursor", "%25%25"} {
		resp, body := h.AdminDo(t, http.MethodGet, "/v1/links/"+l.ID+"/grants?cursor="+c, nil, nil)
		checkProblemBody(t, resp, body, http.StatusBadRequest, "bad-request")
	}
}
