// Package loadgen is the bench's HTTP load generator: a fixed number of
// clients, each on its own kept-alive connection, send requests one after
// another (a closed loop) until a request count or a duration is reached,
// and every response body is read to its end. It reports the rate, the
// latency percentiles and the bytes received; partial bodies of requests
// cut by the duration count as bytes, not as requests.
package loadgen

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Config is one run.
type Config struct {
	// Clients is the number of requests in flight (default 64).
	Clients int
	// Requests bounds the run's requests; 0 means no bound but Duration.
	Requests int64
	// Duration bounds the run's time; 0 means no bound but Requests (one
	// of them must be set). Requests in flight when it passes are cut.
	Duration time.Duration
	// Request returns the i-th request (0-based, in the order they are
	// sent), made by client c.
	Request func(c int, i int64) *http.Request
	// ReadBuffer is the size of each client's body buffer (default 256
	// KiB, so that large bodies cost the client few reads).
	ReadBuffer int
}

// Result is what a run measured.
type Result struct {
	Requests  int64         // responses read to their end
	Failed    int64         // transport errors and bodies cut by an error
	Statuses  map[int]int64 // responses by status
	Bytes     int64         // body bytes received, cut bodies included
	Elapsed   time.Duration
	latencies []time.Duration // sorted, one per completed request
}

// Rate is completed requests per second.
func (r Result) Rate() float64 { return float64(r.Requests) / r.Elapsed.Seconds() }

// Throughput is body bytes per second.
func (r Result) Throughput() float64 { return float64(r.Bytes) / r.Elapsed.Seconds() }

// Percentile is the latency below which fraction p (0…1) of the completed
// requests fell; 0 when none completed.
func (r Result) Percentile(p float64) time.Duration {
	if len(r.latencies) == 0 {
		return 0
	}
	i := int(p*float64(len(r.latencies)) + 0.5)
	return r.latencies[min(max(i-1, 0), len(r.latencies)-1)]
}

// Status is the count of responses with status code.
func (r Result) Status(code int) int64 { return r.Statuses[code] }

func (r Result) String() string {
	return fmt.Sprintf("%d requests in %v (%.0f/s, p50 %v, p99 %v), %.1f MB/s, statuses %v, %d failed",
		r.Requests, r.Elapsed.Round(time.Millisecond), r.Rate(), r.Percentile(0.5).Round(10*time.Microsecond),
		r.Percentile(0.99).Round(10*time.Microsecond), r.Throughput()/1e6, r.Statuses, r.Failed)
}

// NewClient returns an HTTP client for n concurrent keep-alive
// connections per server, without compression or proxies.
func NewClient(n int) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			MaxIdleConnsPerHost: n,
			MaxConnsPerHost:     n,
			DisableCompression:  true,
			ReadBufferSize:      64 << 10,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Run runs cfg with client (a NewClient of at least cfg.Clients
// connections, reused across runs so that connections stay warm) until
// its bound or ctx ends.
func Run(ctx context.Context, client *http.Client, cfg Config) Result {
	if cfg.Clients <= 0 {
		cfg.Clients = 64
	}
	if cfg.ReadBuffer <= 0 {
		cfg.ReadBuffer = 256 << 10
	}
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}
	var (
		next  atomic.Int64
		mu    sync.Mutex
		total = Result{Statuses: map[int]int64{}}
		wg    sync.WaitGroup
	)
	start := time.Now()
	for c := range cfg.Clients {
		wg.Go(func() {
			r := Result{Statuses: map[int]int64{}}
			buf := make([]byte, cfg.ReadBuffer)
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if cfg.Requests > 0 && i >= cfg.Requests {
					break
				}
				one(ctx, client, cfg.Request(c, i), buf, &r)
			}
			mu.Lock()
			defer mu.Unlock()
			total.Requests += r.Requests
			total.Failed += r.Failed
			total.Bytes += r.Bytes
			for k, v := range r.Statuses {
				total.Statuses[k] += v
			}
			total.latencies = append(total.latencies, r.latencies...)
		})
	}
	wg.Wait()
	total.Elapsed = time.Since(start)
	slices.Sort(total.latencies)
	return total
}

// one sends req and reads its body to the end into buf.
func one(ctx context.Context, client *http.Client, req *http.Request, buf []byte, r *Result) {
	t := time.Now()
	resp, err := client.Do(req.WithContext(ctx))
	if err != nil {
		if ctx.Err() == nil {
			r.Failed++
		}
		return
	}
	// Not io.Discard: its ReadFrom would read 8 KiB at a time.
	n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, struct{ io.Reader }{resp.Body}, buf)
	resp.Body.Close()
	r.Bytes += n
	switch {
	case err != nil && ctx.Err() != nil:
		// Cut by the run's bound: the bytes count, the request does not.
	case err != nil:
		r.Failed++
	default:
		r.Requests++
		r.Statuses[resp.StatusCode]++
		r.latencies = append(r.latencies, time.Since(t))
	}
}
