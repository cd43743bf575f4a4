package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Conditional requests from a real client (SPEC §3, RFC 9110 §13): curl
// saves a download's ETag and Last-Modified, and revalidating with them
// gets 304 and spends nothing, on a link URL and on a session URL alike;
// If-Match with another ETag is 412.
func TestConditionalRequestsFromCurlSpendNothing(t *testing.T) {
	t.Parallel()
	g := MustStartEmbeddedDefault(t)
	obj := g.Admin().MustUpload(t, "conditional/file.bin", 600<<10) // over 512 KiB: the session budget is exactly 2 × size
	link := g.Admin().MustCreateLink(t, obj, LinkRequest{Downloads: 2})
	curl := MustBinary(t, "curl")
	dir := t.TempDir()
	file, etag := filepath.Join(dir, "file.bin"), filepath.Join(dir, "etag")
	code := func(args ...string) string {
		t.Helper()
		return strings.TrimSpace(MustRun(t, dir, curl, append([]string{"-q", "-sS", "-w", "%{http_code}"}, args...)...))
	}

	// The download: curl keeps its ETag and, with -R, gives the file its
	// Last-Modified.
	if got := code("-R", "--etag-save", etag, "-o", file, link.URL); got != "200" {
		t.Fatalf("first download = %s, want 200", got)
	}
	checkFile(t, file, obj)
	g.Admin().checkCounts(t, link.ID, 1, 1, 0)
	// Revalidations: --etag-compare sends If-None-Match, -z FILE sends
	// If-Modified-Since with the file's time. 304 each, nothing spent.
	if got := code("--etag-compare", etag, "-o", filepath.Join(dir, "again"), link.URL); got != "304" {
		t.Errorf("curl --etag-compare = %s, want 304", got)
	}
	if got := code("-z", file, "-o", filepath.Join(dir, "again"), link.URL); got != "304" {
		t.Errorf("curl -z FILE = %s, want 304", got)
	}
	if _, err := os.Stat(filepath.Join(dir, "again")); err == nil {
		t.Error("a 304 left a file behind")
	}
	g.Admin().checkCounts(t, link.ID, 1, 1, 0)
	// If-Match with another ETag: 412, nothing spent (a raw request, as
	// no download tool sends it).
	if r := MustFetch(t, http.MethodGet, link.URL, "If-Match", `"not-this-version"`); r.Status != http.StatusPreconditionFailed ||
		!strings.Contains(string(r.Body), "/precondition-failed") {
		t.Errorf("GET with If-Match of another version = %v %.200q, want 412 precondition-failed", r, r.Body)
	}
	g.Admin().checkCounts(t, link.ID, 1, 1, 0)

	// On a session URL: the revalidation draws no budget.
	slink := g.Admin().MustCreateLink(t, obj, LinkRequest{Downloads: 1, Delivery: "session"})
	s := MustMintSession(t, g.PublicBase(), slink)
	sfile, setag := filepath.Join(dir, "session.bin"), filepath.Join(dir, "session.etag")
	if got := code("--etag-save", setag, "-o", sfile, s.SessionURL); got != "200" {
		t.Fatalf("session download = %s, want 200", got)
	}
	checkFile(t, sfile, obj)
	for range 3 {
		if got := code("--etag-compare", setag, "-o", filepath.Join(dir, "again"), s.SessionURL); got != "304" {
			t.Errorf("curl --etag-compare on the session = %s, want 304", got)
		}
	}
	// The budget (2 × size, the default) covers one more whole download
	// only if the revalidations drew nothing.
	if got := code("-o", filepath.Join(dir, "second"), s.SessionURL); got != "200" {
		t.Errorf("a second whole download of the session after three revalidations = %s, want 200", got)
	}
	checkFile(t, filepath.Join(dir, "second"), obj)
}
