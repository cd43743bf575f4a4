package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/storage"
)

// rawGet sends one GET on its own connection and counts the body bytes
// that arrive before the server closes it, whatever Content-Length said.
func rawGet(tb testing.TB, target string) (resp *http.Response, body []byte, err error) {
	tb.Helper()
	u, perr := url.Parse(target)
	if perr != nil {
		tb.Fatal(perr)
	}
	conn, derr := net.Dial("tcp", u.Host)
	if derr != nil {
		tb.Fatal(derr)
	}
	defer conn.Close()
	if _, werr := io.WriteString(conn, "GET "+u.RequestURI()+" HTTP/1.1\r\nHost: "+u.Host+"\r\nConnection: close\r\n\r\n"); werr != nil {
		tb.Fatal(werr)
	}
	resp, rerr := http.ReadResponse(bufio.NewReader(conn), nil)
	if rerr != nil {
		tb.Fatal(rerr)
	}
	defer resp.Body.Close()
	body, err = io.ReadAll(resp.Body)
	return resp, body, err
}

func TestByteBudgetEndsResponsesAndThenRefuses(t *testing.T) {
	const size, budget = 40_000, 60_000 // a budget of 1.5 × size
	h := MustHarness(t, func(o *gateway.Options) { o.Chunk = 4096 })
	data := testData(size)
	l := h.MustObjectLink(t, "budget.bin", data, map[string]any{"session": map[string]any{"byte_budget": budget}})
	s := h.MustMint(t, l)

	resp, body, err := rawGet(t, s.SessionURL)
	if err != nil || resp.StatusCode != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("first GET = %d, %d bytes, %v; want 200 and the whole object", resp.StatusCode, len(body), err)
	}

	resp, body, err = rawGet(t, s.SessionURL)
	if resp.StatusCode != http.StatusOK || resp.ContentLength != size {
		t.Fatalf("second GET = %d, Content-Length %d; want 200 and %d", resp.StatusCode, resp.ContentLength, size)
	}
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("second GET body ended with %v, want io.ErrUnexpectedEOF (cut short)", err)
	}
	// Draws are partial (MIN(want, left)), so the whole budget is usable.
	if len(body) != budget-size || !bytes.Equal(body, data[:len(body)]) {
		t.Errorf("second GET delivered %d bytes, want the first %d of the object", len(body), budget-size)
	}
	h.WaitIdle()
	if got := h.MustSession(t, s.SessionID).BytesDrawn; got != budget {
		t.Errorf("bytes_drawn = %d, want %d", got, budget)
	}

	for _, rh := range []string{"", "bytes=0-0"} {
		r, b := h.Do(t, http.MethodGet, s.SessionURL, http.Header{"Range": {rh}})
		mustProblem(t, r, b, http.StatusForbidden, "byte-budget-exhausted")
		assertPublicHeaders(t, "budget spent", r)
	}
	// HEAD is free.
	if r, _ := h.Do(t, http.MethodHead, s.SessionURL, nil); r.StatusCode != http.StatusOK {
		t.Errorf("HEAD on a spent session = %d, want 200", r.StatusCode)
	}
}

func TestDisconnectReturnsTheUnsentReservation(t *testing.T) {
	const sent = 10_000
	h := MustHarness(t, func(o *gateway.Options) { o.Chunk = 64 << 10 })
	data := testData(256 << 10)
	l := h.MustObjectLink(t, "drop.bin", data, map[string]any{"session": map[string]any{"max_concurrency": 1}})
	s := h.MustMint(t, l)

	// The store hands out `sent` bytes, then blocks until the request
	// ends: the client hangs up with most of a drawn chunk unsent.
	real := h.Store.Store
	h.Store.OpenFunc = func(ctx context.Context, v storage.Version, off, n int64) (io.ReadCloser, error) {
		rc, err := real.Open(ctx, v, off, n)
		if err != nil {
			return nil, err
		}
		left := sent
		return &readerFunc{ReadFunc: func(p []byte) (int, error) {
			if left == 0 {
				<-ctx.Done()
				return 0, ctx.Err()
			}
			k, err := rc.Read(p[:min(len(p), left)])
			left -= k
			return k, err
		}, CloseFunc: rc.Close}, nil
	}

	u, _ := url.Parse(s.SessionURL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "GET "+u.RequestURI()+" HTTP/1.1\r\nHost: "+u.Host+"\r\n\r\n")
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET = %d, want 200", resp.StatusCode)
	}
	got := make([]byte, 1)
	if _, err := io.ReadFull(resp.Body, got); err != nil {
		t.Fatal(err)
	}
	received := 1 + br.Buffered()
	conn.Close()
	h.WaitIdle()
	// What was drawn and not sent stays warm for this process's next
	// request of the session, then goes back; Flush is that moment.
	h.Server.Flush()

	x := h.MustSession(t, s.SessionID)
	if x.BytesDrawn != sent {
		t.Errorf("bytes_drawn = %d after the server wrote %d bytes: the unsent reservation was not returned", x.BytesDrawn, sent)
	}
	if received > sent {
		t.Errorf("client received %d bytes, more than the %d the server wrote", received, sent)
	}
	ends := h.Logs.Records(t, "session response ended early")
	if len(ends) != 1 || ends[0]["bytes"] != float64(sent) {
		t.Errorf("log of the cut response = %v, want one record with bytes=%d", ends, sent)
	}

	// The slot came back too.
	h.Store.OpenFunc = nil
	if r, b := h.Do(t, http.MethodGet, s.SessionURL, http.Header{"Range": {"bytes=0-99"}}); r.StatusCode != http.StatusPartialContent || !bytes.Equal(b, data[:100]) {
		t.Errorf("GET after the disconnect = %d, want 206 with the first 100 bytes", r.StatusCode)
	}
	h.WaitIdle()
	h.Server.Flush()
	if got := h.MustSession(t, s.SessionID).BytesDrawn; got != sent+100 {
		t.Errorf("bytes_drawn = %d, want %d", got, sent+100)
	}
}

func TestConcurrencyCapRefusesTheRequestOverIt(t *testing.T) {
	h := MustHarness(t)
	data := testData(50_000)
	l := h.MustObjectLink(t, "cap.bin", data, map[string]any{"session": map[string]any{"max_concurrency": 1}})
	s := h.MustMint(t, l)

	opened, release := h.GateFirstOpen("cap.bin")
	first := h.Go(http.MethodGet, s.SessionURL, nil)
	<-opened

	resp, body := h.Do(t, http.MethodGet, s.SessionURL, http.Header{"Range": {"bytes=0-9"}})
	mustProblem(t, resp, body, http.StatusTooManyRequests, "too-many-concurrent-requests")
	if got := resp.Header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After = %q, want 1", got)
	}
	assertPublicHeaders(t, "429", resp)

	release()
	if r := mustResult(t, first); r.resp.StatusCode != http.StatusOK || !bytes.Equal(r.body, data) {
		t.Fatalf("the slot holder = %d with %d bytes, want 200 and the object", r.resp.StatusCode, len(r.body))
	}
	h.WaitIdle()
	if resp, body := h.Do(t, http.MethodGet, s.SessionURL, http.Header{"Range": {"bytes=0-9"}}); resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, data[:10]) {
		t.Errorf("GET after the holder finished = %d, want 206: the slot was not released", resp.StatusCode)
	}
}

func TestConcurrencyCapAdmitsUpToMaxConcurrency(t *testing.T) {
	h := MustHarness(t)
	data := testData(1000)
	l := h.MustObjectLink(t, "two.bin", data, map[string]any{"session": map[string]any{"max_concurrency": 2}})
	s := h.MustMint(t, l)

	// Two holders, each blocked in the store.
	gates := make(chan struct{})
	opened := make(chan struct{}, 2)
	real := h.Store.Store
	h.Store.OpenFunc = func(ctx context.Context, v storage.Version, off, n int64) (io.ReadCloser, error) {
		rc, err := real.Open(ctx, v, off, n)
		if err != nil {
			return nil, err
		}
		op := make(chan struct{})
		go func() { <-op; opened <- struct{}{} }()
		return gatedReader(ctx, rc, op, gates), nil
	}
	a := h.Go(http.MethodGet, s.SessionURL, nil)
	b := h.Go(http.MethodGet, s.SessionURL, nil)
	<-opened
	<-opened
	if resp, _ := h.Do(t, http.MethodGet, s.SessionURL, nil); resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("third GET = %d, want 429", resp.StatusCode)
	}
	close(gates)
	for _, ch := range []<-chan result{a, b} {
		if r := mustResult(t, ch); r.resp.StatusCode != http.StatusOK || !bytes.Equal(r.body, data) {
			t.Errorf("holder = %d with %d bytes, want 200 and the object", r.resp.StatusCode, len(r.body))
		}
	}
}

// connAware serves h's public routes on a listener of their own, behind
// the connection limit (LimitListener, whose connections count what they
// write), whose http.Server hands each connection to the gateway
// (Server.ConnContext), as cmd/gateway's does, and returns rewrite, which points a URL of h at
// it, and wait, which returns once the requests it served have ended.
func connAware(t *testing.T, h *Harness) (rewrite func(string) string, wait func()) {
	t.Helper()
	var (
		mu       sync.Mutex
		inflight int
	)
	idle := sync.NewCond(&mu)
	public := h.Server.PublicHandler()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		inflight++
		mu.Unlock()
		defer func() {
			mu.Lock()
			inflight--
			idle.Broadcast()
			mu.Unlock()
		}()
		public.ServeHTTP(w, r)
	}))
	srv.Listener = gateway.LimitListener(srv.Listener, 1024)
	srv.Config.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		// A send queue large enough to hold what a client that stopped
		// reading leaves behind, whatever the autotuning did so far.
		c.(interface{ NetConn() net.Conn }).NetConn().(*net.TCPConn).SetWriteBuffer(2 << 20) //nolint:errcheck // a hint
		return h.Server.ConnContext(ctx, c)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	rewrite = func(raw string) string {
		u, _ := url.Parse(raw)
		u.Host = srv.Listener.Addr().String()
		return u.String()
	}
	wait = func() {
		mu.Lock()
		for inflight > 0 {
			idle.Wait()
		}
		mu.Unlock()
		h.Server.WaitDeliveries()
	}
	return rewrite, wait
}

// dialGet sends GET target with the extra header lines hdr (each ending
// in CRLF) on a new connection with a small receive buffer, and reads
// nothing.
func dialGet(t *testing.T, target, hdr string) *net.TCPConn {
	t.Helper()
	u, _ := url.Parse(target)
	c, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	conn := c.(*net.TCPConn)
	conn.SetReadBuffer(64 << 10)                                                               //nolint:errcheck // a hint
	io.WriteString(conn, "GET "+u.RequestURI()+" HTTP/1.1\r\nHost: "+u.Host+"\r\n"+hdr+"\r\n") //nolint:errcheck // the answer tells
	return conn
}

// stalledGet sends GET target with a small receive buffer, reads the
// header and want body bytes, then stops reading until the server's writes
// stall. It returns the connection and the body bytes it received.
func stalledGet(t *testing.T, target string, want int) (*net.TCPConn, int) {
	t.Helper()
	conn := dialGet(t, target, "")
	br := bufio.NewReaderSize(conn, 4096)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET = %d, want 200", resp.StatusCode)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, want)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the server fills its send queue and stalls
	return conn, want + br.Buffered()
}

func TestACutSessionResponseIsChargedWhatItsConnectionCarried(t *testing.T) {
	h := MustHarness(t)
	data := testData(8 << 20)
	l := h.MustObjectLink(t, "cut.bin", data, nil)
	s := h.MustMint(t, l)
	on, wait := connAware(t, h)

	conn, received := stalledGet(t, on(s.SessionURL), 100_000)
	conn.SetLinger(0) //nolint:errcheck // a reset, as the kernel sends for a killed client with unread bytes
	conn.Close()
	wait()
	h.Server.Flush()

	drawn := h.MustSession(t, s.SessionID).BytesDrawn
	ends := h.Logs.Records(t, "session response ended early")
	if len(ends) != 1 {
		t.Fatalf("log records of cut responses: %v, want one", ends)
	}
	charged, back := int64(ends[0]["bytes"].(float64)), int64(ends[0]["untransmitted"].(float64))
	t.Logf("the client received %d bytes and reset; charged %d, %d written bytes never left the host; bytes_drawn %d",
		received, charged, back, drawn)
	if drawn < int64(received) {
		t.Errorf("bytes_drawn = %d, less than the %d bytes the client received", drawn, received)
	}
	if drawn != charged {
		t.Errorf("bytes_drawn = %d, but the log says the response was charged %d", drawn, charged)
	}
	if runtime.GOOS == "linux" && back <= 0 {
		t.Errorf("nothing came back of a response whose client stopped reading and reset (bytes_drawn %d)", drawn)
	}
}

func TestAResponseCutByTheBudgetStaysChargedForALiveClient(t *testing.T) {
	// The response ends at the budget, the client still reads: all it
	// wrote reaches the client, and all of it is charged.
	const size, budget = 4 << 20, 6 << 20
	h := MustHarness(t, func(o *gateway.Options) { o.Chunk = 1 << 20 })
	data := testData(size)
	l := h.MustObjectLink(t, "live.bin", data, map[string]any{"session": map[string]any{"byte_budget": budget}})
	s := h.MustMint(t, l)
	on, wait := connAware(t, h)

	for i, want := range []int{size, budget - size} {
		resp, body, err := rawGet(t, on(s.SessionURL))
		if resp.StatusCode != http.StatusOK || len(body) != want || !bytes.Equal(body, data[:want]) {
			t.Fatalf("GET %d = %d with %d bytes (%v), want 200 with the first %d", i+1, resp.StatusCode, len(body), err, want)
		}
	}
	wait()
	h.Server.Flush()
	if got := h.MustSession(t, s.SessionID).BytesDrawn; got != budget {
		t.Errorf("bytes_drawn = %d after %d bytes received, want equal", got, budget)
	}
}

func TestAResponseWrittenWholeButStillQueuedComesBackOnAReset(t *testing.T) {
	// A range small enough to sit in the send queue whole: the handler's
	// writes return, but the client resets before the queue left.
	h := MustHarness(t)
	data := testData(4 << 20)
	l := h.MustObjectLink(t, "queued.bin", data, nil)
	s := h.MustMint(t, l)
	on, wait := connAware(t, h)

	conn := dialGet(t, on(s.SessionURL), "Range: bytes=0-1048575\r\n")
	time.Sleep(300 * time.Millisecond)
	conn.SetLinger(0) //nolint:errcheck // a test
	conn.Close()
	wait()
	h.Server.Flush()
	drawn := h.MustSession(t, s.SessionID).BytesDrawn
	t.Logf("a 1 MiB range reset unread in the client's buffer: bytes_drawn %d", drawn)
	if drawn > 1<<20 {
		t.Errorf("bytes_drawn = %d, more than the range", drawn)
	}
	if runtime.GOOS == "linux" && drawn >= 1<<20 {
		t.Errorf("bytes_drawn = %d: nothing came back of a range still queued when its client reset", drawn)
	}
}
