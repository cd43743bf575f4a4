package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlgate/dlgate/storage"
)

// splicingBody stands in for an S3 body over plain HTTP, which can move
// its bytes to the response itself (WriteNTo; the real one has the kernel
// splice them). This one writes them from the real object, a chunk at a
// time. After `after` bytes the store sends nothing more: a Read then
// waits for the context, and a WriteNTo for its read deadline too, and
// fails as a connection does. With slow, each chunk takes that long to
// be accepted, as with a slow client.
type splicingBody struct {
	ctx      context.Context
	rc       io.ReadCloser
	left     int64 // before the stall; < 0: never
	slow     time.Duration
	deadline time.Time
	calls    *atomic.Int64
}

func (b *splicingBody) Read(p []byte) (int, error) {
	if b.left == 0 {
		<-b.ctx.Done()
		return 0, b.ctx.Err()
	}
	if b.left > 0 && int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.rc.Read(p)
	if b.left > 0 {
		b.left -= int64(n)
	}
	return n, err
}

func (b *splicingBody) SetReadDeadline(t time.Time) error {
	b.deadline = t
	return nil
}

func (b *splicingBody) WriteNTo(w io.Writer, n int64) (int64, error) {
	b.calls.Add(1)
	var done int64
	buf := make([]byte, 16<<10)
	for done < n {
		if b.left == 0 {
			select {
			case <-b.ctx.Done():
				return done, b.ctx.Err()
			case <-time.After(time.Until(b.deadline)):
				return done, fmt.Errorf("fake splice: %w", os.ErrDeadlineExceeded)
			}
		}
		if !b.deadline.IsZero() && time.Now().After(b.deadline) {
			// A slow client made the store's deadline pass mid-copy.
			return done, fmt.Errorf("fake splice: %w", os.ErrDeadlineExceeded)
		}
		k, err := b.Read(buf[:min(int64(len(buf)), n-done)])
		if _, werr := w.Write(buf[:k]); werr != nil {
			return done, werr
		}
		done += int64(k)
		if err == io.EOF && done == n {
			break // a reader may end with its last bytes
		}
		if err != nil {
			return done, err
		}
		time.Sleep(b.slow)
	}
	return done, nil
}

func (b *splicingBody) Close() error { return b.rc.Close() }

// SpliceStore makes every Open of the harness's store return a
// splicingBody over the real object; it returns the count of WriteNTo
// calls.
func (h *Harness) SpliceStore(after int64, slow time.Duration) *atomic.Int64 {
	real := h.Store.Store
	calls := &atomic.Int64{}
	h.Store.OpenFunc = func(ctx context.Context, v storage.Version, off, n int64) (io.ReadCloser, error) {
		rc, err := real.Open(ctx, v, off, n)
		if err != nil {
			return nil, err
		}
		// A file body would be sent with sendfile: hide that ability.
		return &splicingBody{ctx: ctx, rc: struct{ io.ReadCloser }{rc}, left: after, slow: slow, calls: calls}, nil
	}
	return calls
}

func TestAStreamFromASplicingStoreArrivesWhole(t *testing.T) {
	h := MustStallHarness(t)
	data := testData(3<<20 + 1234)
	l := h.MustObjectLink(t, "splice.bin", data, nil)
	calls := h.SpliceStore(-1, 0)
	resp, body := h.Do(t, http.MethodGet, l.URL, nil)
	if resp.StatusCode != http.StatusOK || string(body) != string(data) {
		t.Fatalf("GET = %d with %d bytes, want 200 and the object's %d", resp.StatusCode, len(body), len(data))
	}
	if calls.Load() == 0 {
		t.Errorf("the body was copied without WriteNTo")
	}
}

func TestSessionRangesFromASplicingStoreArriveWhole(t *testing.T) {
	h := MustStallHarness(t)
	data := testData(2 << 20)
	l := h.MustObjectLink(t, "ranges.bin", data, nil)
	s := h.MustMint(t, l)
	calls := h.SpliceStore(-1, 0)
	resp, body := h.Do(t, http.MethodGet, s.SessionURL, http.Header{"Range": {"bytes=100-1500099"}})
	if resp.StatusCode != http.StatusPartialContent || string(body) != string(data[100:1500100]) {
		t.Errorf("GET bytes=100-1500099 = %d with %d bytes, want 206 and those 1500000", resp.StatusCode, len(body))
	}
	resp, body = h.Do(t, http.MethodGet, s.SessionURL, http.Header{"Range": {"bytes=0-9,1000000-1999999"}})
	if resp.StatusCode != http.StatusPartialContent || len(body) < 1000010 {
		t.Errorf("GET of two ranges = %d with %d bytes, want 206 with both", resp.StatusCode, len(body))
	}
	if calls.Load() == 0 {
		t.Errorf("the ranges were copied without WriteNTo")
	}
	h.WaitIdle()
	if got, want := h.MustSession(t, s.SessionID).BytesDrawn, int64(1500000+10+1000000); got != want {
		t.Errorf("bytes_drawn = %d, want the %d bytes sent", got, want)
	}
}

func TestASplicingStoreThatStallsMidStreamCutsTheResponse(t *testing.T) {
	h := MustStallHarness(t)
	data := testData(1 << 20)
	l := h.MustObjectLink(t, "cut.bin", data, nil)
	const after = 300 << 10 // beyond the 64 KiB peek: the status line is out
	h.SpliceStore(after, 0)

	r := h.Fetch(t, l.URL, nil)
	if r.status != http.StatusOK || r.length != int64(len(data)) {
		t.Fatalf("GET = %d with Content-Length %d, want 200 and %d", r.status, r.length, len(data))
	}
	if !errors.Is(r.bodyErr, io.ErrUnexpectedEOF) || len(r.body) != after || string(r.body) != string(data[:after]) {
		t.Errorf("body: %d of %d bytes, error %v; want the first %d and a truncated transfer", len(r.body), len(data), r.bodyErr, after)
	}
	// The windows of an eighth of the limit put the cut between the
	// limit and 9/8 of it.
	checkTook(t, "the response was cut", r.took, testIdleTimeout)
	h.WaitIdle()
	ends := h.Logs.Records(t, "stream ended early")
	if len(ends) != 1 || ends[0]["bytes"] != float64(after) || ends[0]["err"] == nil {
		t.Errorf("log of the cut stream = %v, want one record with bytes=%d", ends, after)
	}
}

func TestASlowClientOfASplicingStoreIsNotCut(t *testing.T) {
	h := MustStallHarness(t)
	data := testData(1 << 20)
	l := h.MustObjectLink(t, "slow.bin", data, nil)
	// 64 chunks of 16 KiB at 30 ms each: about 2 s, three idle timeouts,
	// in which the store never waits: the deadline passes while the
	// "client" accepts bytes.
	h.SpliceStore(-1, 30*time.Millisecond)
	resp, body := h.Do(t, http.MethodGet, l.URL, nil)
	if resp.StatusCode != http.StatusOK || string(body) != string(data) {
		t.Errorf("GET from a slow copy = %d with %d of %d bytes, want the whole object", resp.StatusCode, len(body), len(data))
	}
}
