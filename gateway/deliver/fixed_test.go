package deliver

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/dlgate/dlgate/storage"
)

// The representation headers kept for an object are the ones formatted
// for it anew, follow what they are made of (a digest filled in later, the
// file name a link sends), and are not changed by a response that adds to
// its own.
func TestTheHeadersKeptForAnObjectAreItsOwn(t *testing.T) {
	p := New(Config{})
	sum := "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	base := Object{Version: storage.Version{Key: "dir/report.pdf", VersionID: "v1", Size: 1234, ETag: `"abc"`,
		ContentType: "application/pdf", LastModified: time.Date(2026, 12, 7, 20, 0, 0, 0, time.UTC)}}
	headers := func(o Object, req *http.Request) http.Header {
		w := httptest.NewRecorder()
		p.headers(w, req, o)
		return w.Header()
	}
	get := httptest.NewRequest(http.MethodGet, "/", nil)
	want := http.Header{
		"Content-Type": {"application/pdf"}, "Content-Length": {"1234"}, "Etag": {`"abc"`},
		"Last-Modified": {"Mon, 07 Dec 2026 20:00:00 GMT"}, "Content-Disposition": {`attachment; filename="report.pdf"`},
		"Accept-Ranges": {"none"},
	}
	for i := range 2 { // formatted, then kept
		if got := headers(base, get); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("headers (%d) = %v, want %v", i, got, want)
		}
	}
	withSum := base
	withSum.Version.SHA256 = sum
	h := headers(withSum, get)
	if h.Get("Repr-Digest") != "sha-256=:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=:" || h.Get("Digest") != "SHA-256=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=" {
		t.Errorf("a digest filled in later: Repr-Digest %q, Digest %q", h.Get("Repr-Digest"), h.Get("Digest"))
	}
	noDigests := httptest.NewRequest(http.MethodGet, "/", nil)
	noDigests.Header.Set("Want-Repr-Digest", "sha-256=0")
	noDigests.Header.Set("Want-Digest", "SHA-256;q=0")
	if h := headers(withSum, noDigests); h.Get("Repr-Digest") != "" || h.Get("Digest") != "" {
		t.Errorf("digests sent to a request that refuses them: %v", h)
	}
	named := base
	named.Filename = "Q4.pdf"
	named.Ranges = true
	if h := headers(named, get); h.Get("Content-Disposition") != `attachment; filename="Q4.pdf"` || h.Get("Accept-Ranges") != "bytes" {
		t.Errorf("another file name and a session URL: %v", h)
	}
	// A response that adds to a kept value does not change it for the next.
	h = headers(base, get)
	h.Add("Content-Type", "text/plain")
	h.Add("Etag", `"other"`)
	if got := headers(base, get); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after a response added to its headers, the next has %v, want %v", got, want)
	}
}

// The headers kept are bounded.
func TestTheHeadersKeptAreBounded(t *testing.T) {
	p := New(Config{})
	for i := range 3 * fixedCacheSize {
		p.fixed.of(Object{Version: storage.Version{Key: fmt.Sprint(i), Size: int64(i)}})
	}
	if n := len(p.fixed.m); n > fixedCacheSize {
		t.Errorf("%d objects' headers kept, want at most %d", n, fixedCacheSize)
	}
}
