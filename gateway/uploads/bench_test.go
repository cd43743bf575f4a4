package uploads_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// BenchmarkUpload compares one 256 MiB upload over loopback through tus
// (POST, then one PATCH of the whole body; the store's resumable upload,
// a ledger record every 64 MiB, the finish and Record) with the same
// bytes in one PUT into the store's Put, the core of PUT /v1/objects, on
// each backend:
//
//	go test -run '^$' -bench Upload -benchtime 3x ./uploads/
func BenchmarkUpload(b *testing.B) {
	const size = 256 << 20
	data := randomBytes(42, size)
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			bt := b
			open, _ := be.setup(bt)
			e := &env{open: open, leftovers: nil, clock: newClock()}
			p := e.start(bt)
			put := http.NewServeMux()
			put.HandleFunc("PUT /put/{key}", func(w http.ResponseWriter, r *http.Request) {
				if _, err := p.store.Put(r.Context(), "", r.PathValue("key"), r.Body, r.ContentLength, "application/octet-stream"); err != nil {
					http.Error(w, err.Error(), http.StatusBadGateway)
					return
				}
				w.WriteHeader(http.StatusCreated)
			})
			srv := httptest.NewServer(put)
			b.Cleanup(srv.Close)
			putURL := srv.URL
			b.Run("tus", func(b *testing.B) {
				b.SetBytes(size)
				for i := range b.N {
					url := create(b, p, size, meta("key", fmt.Sprintf("bench-%d.bin", i)))
					resp := patch(b, url, 0, bytes.NewReader(data))
					if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Upload-Offset") != strconv.Itoa(size) {
						b.Fatalf("PATCH = %d", resp.StatusCode)
					}
				}
			})
			b.Run("put", func(b *testing.B) {
				b.SetBytes(size)
				for i := range b.N {
					resp := do(b, http.MethodPut, fmt.Sprintf("%s/put/bench-put-%d.bin", putURL, i), bytes.NewReader(data))
					if resp.StatusCode != http.StatusCreated {
						b.Fatalf("PUT = %d %s", resp.StatusCode, readBody(b, resp))
					}
				}
			})
		})
	}
}
