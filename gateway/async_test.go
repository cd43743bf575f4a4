package gateway_test

import (
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/dlgate/dlgate/storage"
)

// result is the outcome of a request sent in the background.
type result struct {
	resp *http.Response
	body []byte
	err  error
}

// Go sends a public request in the background; the answer arrives on the
// channel once its body has been read to the end.
func (h *Harness) Go(method, url string, header http.Header) <-chan result {
	out := make(chan result, 1)
	go func() {
		req, err := http.NewRequest(method, url, nil)
		if err != nil {
			out <- result{err: err}
			return
		}
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := h.Client.Do(req)
		if err != nil {
			out <- result{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		out <- result{resp: resp, body: body, err: err}
	}()
	return out
}

// mustResult waits for a background request and demands it succeeded at
// the HTTP level.
func mustResult(tb testing.TB, ch <-chan result) result {
	tb.Helper()
	r := <-ch
	if r.err != nil {
		tb.Fatalf("background request: %v", r.err)
	}
	return r
}

// GateFirstOpen makes the reader of the first Open of key block on its
// first Read until release is called; opened is closed when that Read
// begins, by which time a session request holds its concurrency slot and
// has drawn budget. Every other Open goes to the real store.
func (h *Harness) GateFirstOpen(key string) (opened <-chan struct{}, release func()) {
	op, rel := make(chan struct{}), make(chan struct{})
	var used atomic.Bool
	real := h.Store.Store
	h.Store.OpenFunc = func(ctx context.Context, v storage.Version, offset, length int64) (io.ReadCloser, error) {
		rc, err := real.Open(ctx, v, offset, length)
		if err != nil || v.Key != key || !used.CompareAndSwap(false, true) {
			return rc, err
		}
		return gatedReader(ctx, rc, op, rel), nil
	}
	return op, func() { close(rel) }
}
