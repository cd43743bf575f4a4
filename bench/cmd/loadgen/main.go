// Command loadgen sends GET requests to one or more URLs (round robin)
// from concurrent keep-alive clients, until a count or a duration, and
// prints the rate, latency percentiles, throughput and statuses:
//
//	go run ./bench/cmd/loadgen -c 64 -n 100000 -d 10s -H 'Range: bytes=0-65535' URL...
//
// It is the load generator of `make bench-compare` (bench/loadgen),
// usable on its own against anything.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/dlgate/dlgate/bench/loadgen"
)

type headers []string

func (h *headers) String() string     { return strings.Join(*h, ", ") }
func (h *headers) Set(v string) error { *h = append(*h, v); return nil }

func main() {
	clients := flag.Int("c", 64, "concurrent clients, each on its own kept-alive connection")
	requests := flag.Int64("n", 0, "requests in all (0: until -d)")
	duration := flag.Duration("d", 10*time.Second, "longest run (0: until -n)")
	var hdrs headers
	flag.Var(&hdrs, "H", "request header `Name: value` (repeatable)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: loadgen [-c clients] [-n requests] [-d duration] [-H header]... URL...")
		flag.PrintDefaults()
	}
	flag.Parse()
	urls := flag.Args()
	if len(urls) == 0 || (*requests <= 0 && *duration <= 0) {
		flag.Usage()
		os.Exit(2)
	}
	header := http.Header{}
	for _, h := range hdrs {
		k, v, ok := strings.Cut(h, ":")
		if !ok {
			fmt.Fprintf(os.Stderr, "loadgen: -H %q: want Name: value\n", h)
			os.Exit(2)
		}
		header.Add(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res := loadgen.Run(ctx, loadgen.NewClient(*clients), loadgen.Config{
		Clients: *clients, Requests: *requests, Duration: *duration,
		Request: func(_ int, i int64) *http.Request {
			req, _ := http.NewRequest(http.MethodGet, urls[i%int64(len(urls))], nil)
			req.Header = header.Clone()
			return req
		},
	})
	fmt.Println(res)
}
