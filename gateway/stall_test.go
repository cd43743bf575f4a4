package gateway_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/storage"
)

// The limits of the stall tests: short, so the tests are quick, and far
// enough apart to tell which one cut a response.
const (
	testOpenTimeout = 300 * time.Millisecond
	testIdleTimeout = 600 * time.Millisecond
)

// MustStallHarness is a harness whose store waits are bounded by the test
// limits.
func MustStallHarness(tb testing.TB, configure ...func(*gateway.Options)) *Harness {
	tb.Helper()
	return MustHarness(tb, append([]func(*gateway.Options){func(o *gateway.Options) {
		o.StoreOpenTimeout = testOpenTimeout
		o.StoreIdleTimeout = testIdleTimeout
	}}, configure...)...)
}

// StallStoreAfter makes every Open of the harness's store serve the first
// `after` bytes of the real object and then block, like a stopped S3
// server with its connection open, until the read's context ends. With
// stallOpen the Open itself blocks that way (no response headers). The
// blocked reads give up only on the context, never on their own: the
// gateway's limits are all that ends them.
func (h *Harness) StallStoreAfter(after int, stallOpen bool) {
	real := h.Store.Store
	h.Store.OpenFunc = func(ctx context.Context, v storage.Version, off, n int64) (io.ReadCloser, error) {
		if stallOpen {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		rc, err := real.Open(ctx, v, off, n)
		if err != nil {
			return nil, err
		}
		left := after
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
}

// cutReply is a response read until it ended, whole or not.
type cutReply struct {
	status  int
	length  int64 // Content-Length
	body    []byte
	bodyErr error
	took    time.Duration // from sending the request to the end of the body
}

// Fetch sends a public GET and reads the body until it ends, however it
// ends: a cut response is what these tests look for.
func (h *Harness) Fetch(tb testing.TB, url string, header http.Header) cutReply {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	start := time.Now()
	resp, err := h.Client.Do(req)
	if err != nil {
		tb.Fatalf("GET: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return cutReply{status: resp.StatusCode, length: resp.ContentLength, body: b, bodyErr: err, took: time.Since(start)}
}

// checkTook fails tb unless d is the limit plus a margin for a loaded
// machine.
func checkTook(tb testing.TB, what string, d, limit time.Duration) {
	tb.Helper()
	if d < limit || d > limit+2*time.Second {
		tb.Errorf("%s after %v, want the limit %v (+ up to 2 s)", what, d.Round(time.Millisecond), limit)
	}
}

func TestAStoreThatSendsNothingIs504AndRefunded(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stallOpen bool
	}{
		{"OpenNeverAnswers", true},
		{"FirstReadNeverAnswers", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := MustStallHarness(t)
			l := h.MustObjectLink(t, "stall.bin", testData(256<<10), nil)
			h.StallStoreAfter(0, tc.stallOpen)

			start := time.Now()
			resp, body := h.Do(t, http.MethodGet, l.URL, nil)
			took := time.Since(start)
			mustProblem(t, resp, body, http.StatusGatewayTimeout, "storage-timeout")
			checkTook(t, "the 504 came", took, testOpenTimeout)
			h.WaitIdle()
			// No byte left: the claim is refunded (SPEC §1).
			got := h.MustShowLink(t, l.ID)
			if got.Remaining != 5 || got.Grants["refunded"] != 1 || got.Grants["granted"] != 0 {
				t.Errorf("after the 504: remaining %d, grants %v; want 5 and one refunded", got.Remaining, got.Grants)
			}
			t.Logf("open timeout %v: 504 after %v, claim refunded", testOpenTimeout, took.Round(time.Millisecond))
		})
	}
}

func TestAStoreThatStallsMidStreamCutsTheResponse(t *testing.T) {
	h := MustStallHarness(t)
	data := testData(512 << 10)
	l := h.MustObjectLink(t, "cut.bin", data, nil)
	const after = 200 << 10 // beyond the 64 KiB peek: the status line is out
	h.StallStoreAfter(after, false)

	r := h.Fetch(t, l.URL, nil)
	if r.status != http.StatusOK || r.length != int64(len(data)) {
		t.Fatalf("GET = %d with Content-Length %d, want 200 and %d", r.status, r.length, len(data))
	}
	if !errors.Is(r.bodyErr, io.ErrUnexpectedEOF) || len(r.body) > after {
		t.Errorf("body: %d of %d bytes, error %v; want at most %d and a truncated transfer", len(r.body), len(data), r.bodyErr, after)
	}
	if string(r.body) != string(data[:len(r.body)]) {
		t.Errorf("the %d bytes received are not the object's first ones", len(r.body))
	}
	checkTook(t, "the response was cut", r.took, testIdleTimeout)
	h.WaitIdle()
	// Bytes left: the claim stands (SPEC §1).
	if got := h.MustShowLink(t, l.ID); got.Remaining != 4 || got.Grants["granted"] != 1 || got.Grants["refunded"] != 0 {
		t.Errorf("after the cut: remaining %d, grants %v; want 4 and one granted", got.Remaining, got.Grants)
	}
	ends := h.Logs.Records(t, "stream ended early")
	if len(ends) != 1 || ends[0]["bytes"] != float64(after) {
		t.Errorf("log of the cut stream = %v, want one record with bytes=%d", ends, after)
	}
}

func TestAStalledSessionRangeGivesBackItsSlotAndBudget(t *testing.T) {
	h := MustStallHarness(t, func(o *gateway.Options) { o.Chunk = 128 << 10 })
	data := testData(512 << 10)
	l := h.MustObjectLink(t, "range.bin", data, map[string]any{"session": map[string]any{"max_concurrency": 1}})
	s := h.MustMint(t, l)
	const after = 100 << 10
	h.StallStoreAfter(after, false)

	r := h.Fetch(t, s.SessionURL, http.Header{"Range": {"bytes=0-"}})
	if r.status != http.StatusPartialContent || r.length != int64(len(data)) {
		t.Fatalf("GET bytes=0- = %d with Content-Length %d, want 206 and %d", r.status, r.length, len(data))
	}
	if r.bodyErr == nil || len(r.body) > after {
		t.Errorf("body: %d bytes, error %v; want at most %d and a truncated transfer", len(r.body), r.bodyErr, after)
	}
	checkTook(t, "the range was cut", r.took, testIdleTimeout)
	h.WaitIdle()
	// What was drawn and not sent went back (after the warm window, which
	// Flush ends): the budget counts exactly the bytes written.
	h.Server.Flush()
	if got := h.MustSession(t, s.SessionID).BytesDrawn; got != after {
		t.Errorf("bytes_drawn = %d after %d bytes were sent, want %d", got, after, after)
	}

	// The slot is free again: with max_concurrency 1, a new range request
	// on the same session is served, not refused with 429.
	h.Store.OpenFunc = nil
	resp, body := h.Do(t, http.MethodGet, s.SessionURL, http.Header{"Range": {"bytes=" + strconv.Itoa(after) + "-"}})
	if resp.StatusCode != http.StatusPartialContent || string(body) != string(data[after:]) {
		t.Errorf("resume after the cut = %d with %d bytes, want 206 with the remaining %d", resp.StatusCode, len(body), len(data)-after)
	}
	h.WaitIdle()
	h.Server.Flush()
	if got := h.MustSession(t, s.SessionID).BytesDrawn; got != int64(len(data)) {
		t.Errorf("bytes_drawn = %d after the whole object was sent once, want %d", got, len(data))
	}
}

func TestAStoreThatSendsNothingOnASessionIs504(t *testing.T) {
	h := MustStallHarness(t)
	data := testData(64 << 10)
	l := h.MustObjectLink(t, "sess.bin", data, map[string]any{"session": map[string]any{"max_concurrency": 1}})
	s := h.MustMint(t, l)
	h.StallStoreAfter(0, false)

	start := time.Now()
	resp, body := h.Do(t, http.MethodGet, s.SessionURL, http.Header{"Range": {"bytes=0-999"}})
	took := time.Since(start)
	mustProblem(t, resp, body, http.StatusGatewayTimeout, "storage-timeout")
	checkTook(t, "the 504 came", took, testOpenTimeout)
	h.WaitIdle()
	h.Server.Flush()
	if got := h.MustSession(t, s.SessionID).BytesDrawn; got != 0 {
		t.Errorf("bytes_drawn = %d after a 504 that sent nothing, want 0", got)
	}
	h.Store.OpenFunc = nil
	if resp, body := h.Do(t, http.MethodGet, s.SessionURL, http.Header{"Range": {"bytes=0-999"}}); resp.StatusCode != http.StatusPartialContent || string(body) != string(data[:1000]) {
		t.Errorf("GET after the 504 = %d with %d bytes, want 206 with 1000: the slot must be free", resp.StatusCode, len(body))
	}
}

func TestAMultipartResponseIsCutWhenALaterRangeStalls(t *testing.T) {
	h := MustStallHarness(t)
	data := testData(64 << 10)
	l := h.MustObjectLink(t, "parts.bin", data, nil)
	s := h.MustMint(t, l)
	real := h.Store.Store
	opens := 0
	h.Store.OpenFunc = func(ctx context.Context, v storage.Version, off, n int64) (io.ReadCloser, error) {
		if opens++; opens > 1 {
			<-ctx.Done() // the second part's Open never answers
			return nil, ctx.Err()
		}
		return real.Open(ctx, v, off, n)
	}
	r := h.Fetch(t, s.SessionURL, http.Header{"Range": {"bytes=0-99,1000-1099"}})
	if r.status != http.StatusPartialContent || r.bodyErr == nil {
		t.Errorf("multipart GET = %d, body error %v; want 206 cut short", r.status, r.bodyErr)
	}
	checkTook(t, "the multipart response was cut", r.took, testIdleTimeout)
}

// rejectingStore refuses uploads and lookups as an S3 server refuses a
// request it judges invalid.
type rejectingStore struct {
	storage.Store
	err error
}

func (s rejectingStore) Put(context.Context, string, string, io.Reader, int64, string) (storage.Version, error) {
	return storage.Version{}, s.err
}

func (s rejectingStore) Stat(context.Context, storage.Ref) (storage.Version, error) {
	return storage.Version{}, s.err
}

func TestStoreSideClientErrorsAre400(t *testing.T) {
	for _, tc := range []struct {
		err    error
		suffix string
	}{
		{fmt.Errorf("s3 PutObject: %w: api error KeyTooLongError", storage.ErrInvalidKey), "invalid-key"},
		{fmt.Errorf("s3 PutObject: %w: api error InvalidArgument", storage.ErrInvalid), "storage-rejected"},
	} {
		h := MustHarness(t, func(o *gateway.Options) { o.Store = rejectingStore{Store: o.Store, err: tc.err} })
		resp, body := h.AdminDo(t, http.MethodPut, "/v1/objects/some/key", "data", nil)
		mustProblem(t, resp, body, http.StatusBadRequest, tc.suffix)
		resp, body = h.AdminDo(t, http.MethodPost, "/v1/links", map[string]any{"object": map[string]any{"key": "some/key"}, "downloads": 1, "expires_in": 60}, nil)
		mustProblem(t, resp, body, http.StatusBadRequest, tc.suffix)
	}
}
