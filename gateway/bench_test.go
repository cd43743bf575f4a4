package gateway_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkSessionRange64KiB measures 64 KiB range GETs on one session,
// about 16 at a time, through SQLite (slot lease, budget draw, release)
// and the filesystem store (sendfile), over loopback HTTP.
func BenchmarkSessionRange64KiB(b *testing.B) {
	const (
		size  = 64 << 20
		chunk = 64 << 10
	)
	h := MustHarness(b)
	h.MustPutObject(b, "bench.bin", "application/octet-stream", make([]byte, size))
	l := h.MustCreateLink(b, map[string]any{"object": map[string]any{"key": "bench.bin"}, "downloads": 1, "expires_in": 3600,
		"session": map[string]any{"byte_budget": int64(1) << 50, "max_concurrency": 64}})
	s := h.MustMint(b, l)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.Cleanup(client.CloseIdleConnections)

	var failures atomic.Int64
	b.SetParallelism(max(1, 16/runtime.GOMAXPROCS(0)))
	b.SetBytes(chunk)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		r := rand.New(rand.NewPCG(rand.Uint64(), 0))
		buf := make([]byte, 32<<10)
		for pb.Next() {
			off := r.Int64N(size/chunk) * chunk
			req, _ := http.NewRequest(http.MethodGet, s.SessionURL, nil)
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+chunk-1))
			resp, err := client.Do(req)
			if err != nil {
				failures.Add(1)
				continue
			}
			n, err := io.CopyBuffer(io.Discard, resp.Body, buf)
			resp.Body.Close()
			if err != nil || resp.StatusCode != http.StatusPartialContent || n != chunk {
				failures.Add(1)
			}
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	if n := failures.Load(); n > 0 {
		b.Fatalf("%d of %d range requests failed", n, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "ranges/s")
}
