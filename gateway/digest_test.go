package gateway_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dunglas/httpsfv"

	"github.com/dlgate/dlgate/storage"
)

// wantDigests fails unless resp carries data's SHA-256 as Repr-Digest
// (read with a strict RFC 8941 parser: a Dictionary whose sha-256 member
// is a Byte Sequence) and as the RFC 3230 Digest aria2c reads.
func wantDigests(tb testing.TB, what string, resp *http.Response, data []byte) {
	tb.Helper()
	sum := sha256.Sum256(data)
	d, err := httpsfv.UnmarshalDictionary(resp.Header.Values("Repr-Digest"))
	if err != nil {
		tb.Fatalf("%s: Repr-Digest %q is not a structured Dictionary: %v", what, resp.Header.Values("Repr-Digest"), err)
	}
	m, ok := d.Get("sha-256")
	item, isItem := m.(httpsfv.Item)
	if b, isBytes := item.Value.([]byte); !ok || !isItem || !isBytes || !bytes.Equal(b, sum[:]) || len(d.Names()) != 1 {
		tb.Errorf("%s: Repr-Digest = %q, want sha-256 of the whole object, :%s:", what, resp.Header.Get("Repr-Digest"),
			base64.StdEncoding.EncodeToString(sum[:]))
	}
	if got, want := resp.Header.Values("Digest"), "SHA-256="+base64.StdEncoding.EncodeToString(sum[:]); len(got) != 1 || got[0] != want {
		tb.Errorf("%s: Digest = %q, want %q", what, got, want)
	}
}

func wantNoDigests(tb testing.TB, what string, resp *http.Response) {
	tb.Helper()
	for _, k := range []string{"Repr-Digest", "Digest", "Content-Digest"} {
		if v := resp.Header.Values(k); v != nil {
			tb.Errorf("%s: %s = %q, want none", what, k, v)
		}
	}
}

func TestEveryRepresentationOfAnObjectCarriesItsWholeDigest(t *testing.T) {
	h := MustHarness(t)
	data := testData(200<<10 + 3)
	l := h.MustObjectLink(t, "verified.bin", data, map[string]any{"downloads": 5})
	if obj := h.MustPutObject(t, "again.bin", "", data); obj.SHA256 != hex.EncodeToString(sha256sum(data)) {
		t.Errorf("PUT /v1/objects answered sha256 %q, want the digest of the bytes", obj.SHA256)
	}
	if got, want := h.MustShowLink(t, l.ID).Object.SHA256, hex.EncodeToString(sha256sum(data)); got != want {
		t.Fatalf("GET /v1/links/%s object.sha256 = %q, want %s", l.ID, got, want)
	}

	resp, _ := h.Do(t, http.MethodHead, l.URL, nil)
	wantDigests(t, "HEAD /d/", resp, data)
	resp, body := h.Do(t, http.MethodGet, l.URL, nil)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("GET /d/ = %d with %d bytes, want 200 and the object", resp.StatusCode, len(body))
	}
	wantDigests(t, "GET /d/", resp, data)

	x := h.MustMint(t, l)
	for _, tt := range []struct {
		method, rng string
		status      int
	}{
		{http.MethodGet, "", http.StatusOK},
		{http.MethodHead, "", http.StatusOK},
		{http.MethodGet, "bytes=100-199", http.StatusPartialContent},
		{http.MethodHead, "bytes=-10", http.StatusPartialContent},
		{http.MethodGet, "bytes=0-9,1000-1009", http.StatusPartialContent},
	} {
		var hdr http.Header
		if tt.rng != "" {
			hdr = http.Header{"Range": {tt.rng}}
		}
		resp, _ := h.Do(t, tt.method, x.SessionURL, hdr)
		what := tt.method + " /s/ Range " + tt.rng
		if resp.StatusCode != tt.status {
			t.Errorf("%s = %d, want %d", what, resp.StatusCode, tt.status)
			continue
		}
		// RFC 9530 §3: the digest of the representation, not of this part.
		wantDigests(t, what, resp, data)
	}
}

func sha256sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}

func TestPreferencesLeaveOutOnlyWhatTheClientRefusesAndNeverRefuse(t *testing.T) {
	h := MustHarness(t)
	data := []byte("preferences are hints")
	l := h.MustObjectLink(t, "prefs.txt", data, map[string]any{"downloads": 10})
	x := h.MustMint(t, l)
	for _, tt := range []struct {
		name      string
		header    http.Header
		repr, dig bool
	}{
		{"aria2c", http.Header{"Want-Digest": {"SHA-512;q=1, SHA-256;q=1, SHA;q=0.1"}}, true, true},
		{"OnlyAnotherAlgorithm", http.Header{"Want-Repr-Digest": {"sha-512=10"}, "Want-Digest": {"SHA-512"}}, true, true},
		{"ReprDigestRefused", http.Header{"Want-Repr-Digest": {"sha-256=0, sha-512=3"}}, false, true},
		{"DigestRefused", http.Header{"Want-Digest": {"SHA-256;q=0"}}, true, false},
		{"BothRefused", http.Header{"Want-Repr-Digest": {"sha-256=0"}, "Want-Digest": {"sha-256;q=0"}}, false, false},
		{"Malformed", http.Header{"Want-Repr-Digest": {"SHA-256=0,,"}, "Want-Digest": {";q=;"}}, true, true},
	} {
		for _, url := range []string{l.URL, x.SessionURL} {
			resp, body := h.Do(t, http.MethodGet, url, tt.header)
			if resp.StatusCode != http.StatusOK || !bytes.Equal(body, data) {
				t.Errorf("%s: GET %s = %d %q, want 200 with the object", tt.name, url, resp.StatusCode, body)
			}
			if got := resp.Header.Get("Repr-Digest") != ""; got != tt.repr {
				t.Errorf("%s: GET %s sent Repr-Digest %v, want %v", tt.name, url, got, tt.repr)
			}
			if got := resp.Header.Get("Digest") != ""; got != tt.dig {
				t.Errorf("%s: GET %s sent Digest %v, want %v", tt.name, url, got, tt.dig)
			}
		}
	}
}

func TestPagesErrorsAndRedirectsCarryNoDigest(t *testing.T) {
	h := MustHarness(t)
	data := []byte("not on pages")
	stream := h.MustObjectLink(t, "page.txt", data, nil)
	confirm := h.MustCreateLink(t, map[string]any{"object": map[string]any{"key": "page.txt"}, "downloads": 1, "expires_in": 60, "confirm": true})
	session := h.MustCreateLink(t, map[string]any{"object": map[string]any{"key": "page.txt"}, "downloads": 1, "expires_in": 60, "delivery": "session"})
	x := h.MustMint(t, stream)
	spent := h.MustMint(t, h.MustCreateLink(t, map[string]any{"object": map[string]any{"key": "page.txt"}, "downloads": 1, "expires_in": 60,
		"session": map[string]any{"byte_budget": len(data)}}))
	if resp, body := h.Do(t, http.MethodGet, spent.SessionURL, nil); resp.StatusCode != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("GET of a session with a budget of one download = %d %q", resp.StatusCode, body)
	}
	h.WaitIdle()
	slack := http.Header{"User-Agent": {"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"}}
	for _, tt := range []struct {
		what, method, url string
		header            http.Header
		status            int
	}{
		{"preview of a link", http.MethodGet, stream.URL, slack, http.StatusOK},
		{"preview of a session", http.MethodGet, x.SessionURL, slack, http.StatusOK},
		{"landing page", http.MethodGet, confirm.URL, nil, http.StatusOK},
		{"HEAD of a landing page", http.MethodHead, confirm.URL, nil, http.StatusOK},
		{"303 to a session", http.MethodGet, session.URL, nil, http.StatusSeeOther},
		{"416", http.MethodGet, x.SessionURL, http.Header{"Range": {"bytes=100-"}}, http.StatusRequestedRangeNotSatisfiable},
		{"409 on a link URL", http.MethodGet, stream.URL, http.Header{"Range": {"bytes=0-1"}}, http.StatusConflict},
		// The representation's headers were set when the budget ran out.
		{"403 byte budget spent", http.MethodGet, spent.SessionURL, nil, http.StatusForbidden},
	} {
		resp, _ := h.Do(t, tt.method, tt.url, tt.header)
		if resp.StatusCode != tt.status {
			t.Errorf("%s = %d, want %d", tt.what, resp.StatusCode, tt.status)
		}
		wantNoDigests(t, tt.what, resp)
	}
}

func TestAnObjectWithoutAKnownDigestIsServedWithoutOne(t *testing.T) {
	h := MustHarness(t)
	data := []byte("stored before digests")
	l := h.MustObjectLink(t, "old.bin", data, nil)
	if _, err := h.DB.SQL().Exec(`UPDATE links SET sha256 = NULL`); err != nil {
		t.Fatal(err)
	}
	resp, body := h.Do(t, http.MethodGet, l.URL, nil)
	if resp.StatusCode != http.StatusOK || !bytes.Equal(body, data) {
		t.Fatalf("GET = %d %q", resp.StatusCode, body)
	}
	wantNoDigests(t, "GET of a link without a digest", resp)
	if _, body := h.AdminDo(t, http.MethodGet, "/v1/links/"+l.ID, nil, nil); !bytes.Contains(body, []byte(`"sha256":null`)) {
		t.Errorf("GET /v1/links/%s = %s, want object.sha256 null", l.ID, body)
	}
}

// tamperedFile serves a copy of a version whose bytes changed on disk,
// as the fs store would: a storage.Filer positioned at the offset.
type tamperedFile struct {
	f *os.File
	r io.Reader
}

func (t *tamperedFile) Read(p []byte) (int, error) { return t.r.Read(p) }
func (t *tamperedFile) Close() error               { return t.f.Close() }
func (t *tamperedFile) File() *os.File             { return t.f }

var _ storage.Filer = (*tamperedFile)(nil)

// tamper makes every Open of h's store serve data with one byte changed
// at flip, from a file.
func tamper(t *testing.T, h *Harness, data []byte, flip int) {
	t.Helper()
	bad := bytes.Clone(data)
	bad[flip] ^= 0x20
	path := filepath.Join(t.TempDir(), "bad.data")
	if err := os.WriteFile(path, bad, 0o444); err != nil {
		t.Fatal(err)
	}
	h.Store.OpenFunc = func(_ context.Context, v storage.Version, offset, length int64) (io.ReadCloser, error) {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			f.Close()
			return nil, err
		}
		return &tamperedFile{f: f, r: io.LimitReader(f, length)}, nil
	}
}

func TestAStoredObjectThatNoLongerMatchesItsDigestIsNeverServedWhole(t *testing.T) {
	h := MustHarness(t)
	data := testData(3<<20 + 11)
	l := h.MustObjectLink(t, "rotten.bin", data, map[string]any{"downloads": 3})
	x := h.MustMint(t, l)
	tamper(t, h, data, len(data)/2)

	for _, url := range []string{l.URL, x.SessionURL} {
		resp, err := h.Client.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d, want 200 (the damage shows only at the end)", url, resp.StatusCode)
		}
		if !errors.Is(err, io.ErrUnexpectedEOF) || int64(len(body)) >= resp.ContentLength {
			t.Errorf("GET %s: read %d of %d bytes, %v; want the body cut short of its Content-Length", url, len(body), resp.ContentLength, err)
		}
	}
	h.WaitIdle()
	recs := h.Logs.Records(t, "stored object does not match its SHA-256; response cut short")
	if len(recs) != 2 {
		t.Fatalf("%d error records of the mismatch, want one per response:\n%s", len(recs), h.Logs.String())
	}
	for _, rec := range recs {
		if rec["level"] != "ERROR" || rec["version_id"] == "" || rec["version_id"] == nil || rec["link_id"] != l.ID ||
			rec["want_sha256"] != hex.EncodeToString(sha256sum(data)) {
			t.Errorf("mismatch record %v, want an error naming the version, the link and the recorded digest", rec)
		}
	}

	// A range is served as stored: only the client can check what it
	// stitches together (docs/design.md, "Verified downloads").
	resp, body := h.Do(t, http.MethodGet, x.SessionURL, http.Header{"Range": {"bytes=0-99"}})
	if resp.StatusCode != http.StatusPartialContent || len(body) != 100 {
		t.Errorf("GET range of the damaged object = %d, %d bytes, want 206 with 100", resp.StatusCode, len(body))
	}
	if strings.Contains(h.Logs.String(), `"msg":"streamed"`) {
		t.Errorf("a cut stream was logged as streamed")
	}
}
