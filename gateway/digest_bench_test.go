package gateway_test

import (
	"io"
	"net/http"
	"testing"
)

// BenchmarkStreamWhole measures whole-object GETs of a 256 MiB stream
// link from the fs store over loopback, with the version's digest known
// (each slice read and hashed ahead of sendfile, digest.go) and unknown
// (sendfile alone): what checking a download costs.
//
//	go test -run '^$' -bench StreamWhole -benchtime 5x ./gateway/
func BenchmarkStreamWhole(b *testing.B) {
	const size = 256 << 20
	for _, known := range []bool{true, false} {
		name := "sha256=known"
		if !known {
			name = "sha256=unknown"
		}
		b.Run(name, func(b *testing.B) {
			h := MustHarness(b)
			h.MustPutObject(b, "whole.bin", "application/octet-stream", testData(size))
			l := h.MustCreateLink(b, map[string]any{"object": map[string]any{"key": "whole.bin"}, "downloads": 1_000_000, "expires_in": 3600})
			if !known {
				if _, err := h.DB.SQL().Exec(`UPDATE links SET sha256 = NULL`); err != nil {
					b.Fatal(err)
				}
			}
			buf := make([]byte, 256<<10)
			b.SetBytes(size)
			for b.Loop() {
				resp, err := h.Client.Get(l.URL)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.CopyBuffer(io.Discard, resp.Body, buf)
				resp.Body.Close()
				if err != nil || n != size || resp.StatusCode != http.StatusOK || (resp.Header.Get("Repr-Digest") != "") != known {
					b.Fatalf("GET = %d, %d bytes, %v, Repr-Digest %q", resp.StatusCode, n, err, resp.Header.Get("Repr-Digest"))
				}
			}
		})
	}
}
