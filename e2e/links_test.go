package e2e

import (
	"crypto/rand"
	"encoding/base64"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testHeadAndRangeNeverConsume: on a one-download link, HEADs and Range
// GETs (on every process) leave the allowance alone; the one real GET
// then gets the object and everything after it is 404.
func testHeadAndRangeNeverConsume(t *testing.T, c *Cluster, obj *Object) {
	admin := c.Admin()
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1})
	for i := range 20 {
		g := c.Gateways[i%len(c.Gateways)]
		r := MustFetch(t, http.MethodHead, g.On(link.URL))
		if r.Status != http.StatusOK {
			t.Fatalf("%v, want 200", r)
		}
		checkPublicHeaders(t, r)
		if got := r.Header.Get("Content-Length"); got != strconv.FormatInt(link.Object.Size, 10) {
			t.Errorf("%v: Content-Length %q, want %d", r, got, link.Object.Size)
		}
		if got := r.Header.Get("ETag"); got == "" || got != link.Object.ETag {
			t.Errorf("%v: ETag %q, want the pinned version's %q", r, got, link.Object.ETag)
		}
		if got := r.Header.Get("Accept-Ranges"); got != "none" {
			t.Errorf("%v: Accept-Ranges %q, want none", r, got)
		}
		if len(r.Body) != 0 {
			t.Errorf("%v: HEAD answered a %d-byte body", r, len(r.Body))
		}
	}
	ranges := []string{"bytes=0-99", "bytes=-500", "bytes=100-", "bytes=0-0,5-9", "bytes=0-", "bytes=999999999-", "bytes=abc", "items=0-1", "bytes=1-2", "bytes=0-262143"}
	for i, rg := range ranges {
		g := c.Gateways[i%len(c.Gateways)]
		r := MustFetch(t, http.MethodGet, g.On(link.URL), "Range", rg)
		checkProblem(t, r, http.StatusConflict, "range-requires-session")
		if got := r.Header.Get("Accept-Ranges"); got != "none" {
			t.Errorf("%v (Range %q): Accept-Ranges %q, want none", r, rg, got)
		}
		if !strings.Contains(string(r.Body), "/sessions") {
			t.Errorf("%v (Range %q): the problem does not point to POST …/sessions: %.300q", r, rg, r.Body)
		}
	}
	admin.checkCounts(t, link.ID, 1, 0, 0)

	r := MustFetch(t, http.MethodGet, c.Gateways[1].On(link.URL))
	checkBody(t, r, obj)
	checkPublicHeaders(t, r)
	for _, h := range []string{"Content-Length", "ETag", "Content-Type"} {
		if r.Header.Get(h) == "" {
			t.Errorf("%v: no %s", r, h)
		}
	}
	if got := r.Header.Get("Content-Disposition"); !strings.HasPrefix(got, "attachment") {
		t.Errorf("%v: Content-Disposition %q, want attachment", r, got)
	}
	for _, g := range c.Gateways {
		checkProblem(t, MustFetch(t, http.MethodGet, g.On(link.URL)), http.StatusNotFound, "link-unavailable")
		checkProblem(t, MustFetch(t, http.MethodHead, g.On(link.URL)), http.StatusNotFound, "link-unavailable")
	}
	admin.checkCounts(t, link.ID, 0, 1, 0)
}

// testUnavailableLinksAre404: expired, revoked, unknown and malformed
// tokens all get the same generic 404 on every process, and nothing is
// consumed.
func testUnavailableLinksAre404(t *testing.T, c *Cluster, obj *Object) {
	admin := c.Admin()
	check404 := func(t *testing.T, rawURL string) {
		t.Helper()
		for _, g := range c.Gateways {
			for _, m := range []string{http.MethodGet, http.MethodHead} {
				checkProblem(t, MustFetch(t, m, g.On(rawURL)), http.StatusNotFound, "link-unavailable")
			}
		}
	}

	t.Run("ExpiredLink", func(t *testing.T) {
		t.Parallel()
		link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1, ExpiresIn: 1})
		// HEAD never claims, so it can watch the link until it expires.
		deadline := time.Now().Add(20 * time.Second)
		for {
			r := MustFetch(t, http.MethodHead, link.URL)
			if r.Status != http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("a link created with expires_in 1 still answers HEAD 200 after 20 s")
			}
			time.Sleep(100 * time.Millisecond)
		}
		check404(t, link.URL)
		admin.checkCounts(t, link.ID, 1, 0, 0)
	})

	t.Run("RevokedLink", func(t *testing.T) {
		t.Parallel()
		link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 3})
		admin.MustRevokeLink(t, link.ID)
		check404(t, link.URL)
		l := admin.MustLink(t, link.ID)
		if l.RevokedAt == nil || l.Remaining != 3 || l.Grants["granted"] != 0 {
			t.Errorf("revoked link shows revoked_at %v, remaining %d, grants %v; want a time, 3, none", l.RevokedAt, l.Remaining, l.Grants)
		}
	})

	t.Run("UnknownToken", func(t *testing.T) {
		t.Parallel()
		b := make([]byte, 32)
		rand.Read(b) //nolint:errcheck // never fails
		tok := base64.RawURLEncoding.EncodeToString(b)
		if len(tok) != 43 {
			t.Fatalf("test token has %d characters", len(tok))
		}
		check404(t, c.PublicURL+"/d/"+tok)
	})

	t.Run("MalformedTokens", func(t *testing.T) {
		t.Parallel()
		link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1})
		tok := link.Token
		for _, bad := range []struct{ name, tok string }{
			{"TooShort", "abc"},
			{"OneCharacterShort", tok[:42]},
			{"OneCharacterLong", tok + "A"},
			{"WithBase64Padding", tok[:42] + "="},
			{"WithADot", tok[:42] + "."},
			{"WithStandardBase64Plus", "+" + tok[1:]},
			{"PercentEncodedAndShort", tok[:40] + "%41"},
		} {
			t.Run(bad.name, func(t *testing.T) {
				check404(t, c.PublicURL+"/d/"+bad.tok)
				for _, g := range c.Gateways {
					checkProblem(t, MustFetch(t, http.MethodPost, g.PublicBase()+"/d/"+bad.tok+"/sessions"), http.StatusNotFound, "link-unavailable")
					checkProblem(t, MustFetch(t, http.MethodGet, g.PublicBase()+"/s/"+bad.tok), http.StatusNotFound, "session-unavailable")
				}
			})
		}
		// The real token next to all those near misses is untouched.
		admin.checkCounts(t, link.ID, 1, 0, 0)
	})
}

// testToolsDownload: curl and wget save byte-exact files through the
// balancer, and name them from Content-Disposition when asked to.
func testToolsDownload(t *testing.T, c *Cluster, obj *Object) {
	curl, wget := MustBinary(t, "curl"), MustBinary(t, "wget")
	const filename = "report 2026.pdf"
	link := c.Admin().MustCreateLink(t, obj, LinkRequest{Downloads: 4, Filename: filename})
	if link.Filename != filename {
		t.Errorf("link filename %q, want %q", link.Filename, filename)
	}
	dir := t.TempDir()

	MustRun(t, dir, curl, "-q", "-fsS", "-o", "curl.bin", link.URL)
	checkFile(t, filepath.Join(dir, "curl.bin"), obj)

	MustRun(t, dir, wget, "--no-config", "-q", "-O", "wget.bin", link.URL)
	checkFile(t, filepath.Join(dir, "wget.bin"), obj)

	for _, tc := range []struct {
		tool string
		args []string
	}{
		{curl, []string{"-q", "-fsS", "-O", "-J", link.URL}},
		{wget, []string{"--no-config", "-q", "--content-disposition", link.URL}},
	} {
		into := t.TempDir()
		MustRun(t, into, tc.tool, tc.args...)
		names := savedFiles(t, into)
		if len(names) != 1 || names[0] != filename {
			t.Errorf("%s saved %q, want exactly %q", filepath.Base(tc.tool), names, filename)
			continue
		}
		checkFile(t, filepath.Join(into, filename), obj)
	}
	c.Admin().checkCounts(t, link.ID, 0, 4, 0)

	// The allowance is spent: curl -f reports the 404 as exit code 22.
	out, err := run(t, dir, curl, "-q", "-fsS", "-o", "fifth.bin", link.URL)
	if code := exitCode(err); code != 22 {
		t.Errorf("curl -f of a spent link: exit code %d (%v), want 22 (HTTP error); output %q", code, err, out)
	}
}

// testPinnedVersion: a link serves the version it pinned even after the
// key was overwritten; a link created without version_id pins the current
// one.
func testPinnedVersion(t *testing.T, c *Cluster) {
	admin := c.Admin()
	const key = "pinned/report.bin"
	v1 := admin.MustUpload(t, key, 100<<10)
	old := admin.MustCreateLink(t, v1, LinkRequest{Downloads: 1})
	v2 := admin.MustUpload(t, key, 120<<10)
	if v1.VersionID == v2.VersionID {
		t.Fatalf("two uploads to one key of a versioned bucket share version id %q", v1.VersionID)
	}
	var cur Link
	admin.call(t, http.MethodPost, "/v1/links", map[string]any{"object": map[string]string{"key": key}, "downloads": 1, "expires_in": 600}, http.StatusCreated, &cur)
	if cur.Object.VersionID != v2.VersionID || cur.Object.Size != int64(len(v2.Data)) {
		t.Errorf("link without version_id pinned %q (%d bytes), want the current version %q (%d bytes)",
			cur.Object.VersionID, cur.Object.Size, v2.VersionID, len(v2.Data))
	}
	checkBody(t, MustFetch(t, http.MethodGet, c.Gateways[2].On(old.URL)), v1)
	checkBody(t, MustFetch(t, http.MethodGet, c.Gateways[0].On(cur.URL)), v2)
}
