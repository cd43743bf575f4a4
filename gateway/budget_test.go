package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"testing"

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
