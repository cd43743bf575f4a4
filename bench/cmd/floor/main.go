// Command floor is the least a Go net/http server does for three rows of
// `make bench-compare`, with none of the gateway's code: GET /d/{token}
// answers the gateway's 404 for an unknown link (the same headers and a
// body of the same shape and length), GET /f/{name} serves a file of
// -root through http.ServeContent (ranges included, sendfile for the
// body). No database, no logging; GOMAXPROCS as the runtime sets it.
//
//	go run ./bench/cmd/floor -listen 127.0.0.1:0 -root DIR
//
// Its first line on stdout is "listening ADDR". bench/compare runs it as
// "net/http alone", next to the gateway and nginx.
package main

import (
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// The gateway's problem type for a link it does not serve
// (gateway/problem/problem.go: ProblemBase + probLinkUnavailable).
const (
	problemHead = `{"type":"https://dlgate.dev/problems/link-unavailable","title":"This link is no longer available","status":404,"request_id":"`
	problemTail = "\"}\n"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	root := flag.String("root", ".", "directory served under /f/")
	flag.Parse()
	files, err := os.OpenRoot(*root)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /d/{token}", func(w http.ResponseWriter, r *http.Request) {
		id := public(w.Header())
		body := make([]byte, 0, len(problemHead)+len(id)+len(problemTail))
		body = append(append(append(body, problemHead...), id...), problemTail...)
		w.Header().Set("Content-Type", "application/problem+json")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusNotFound)
		w.Write(body) //nolint:errcheck // the client is gone
	})
	mux.HandleFunc("GET /f/{name}", func(w http.ResponseWriter, r *http.Request) {
		f, err := files.Open(r.PathValue("name"))
		if err != nil {
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil || !fi.Mode().IsRegular() {
			http.NotFound(w, r)
			return
		}
		public(w.Header())
		// Set, so that ServeContent does not sniff the first 512 bytes.
		w.Header().Set("Content-Type", "application/octet-stream")
		http.ServeContent(w, r, "", fi.ModTime(), f)
	})
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening %s\n", ln.Addr())
	// The gateway's public server settings (cmd/gateway/serve.go).
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	log.Fatal(srv.Serve(ln))
}

// public sets the headers the gateway sends on every public response and
// returns the request id: 12 random bytes in hex, as the gateway's.
func public(h http.Header) string {
	var b [12]byte
	rand.Read(b[:]) //nolint:errcheck // never fails (Go 1.24+)
	id := hex.EncodeToString(b[:])
	h.Set("X-Request-Id", id)
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	return id
}
