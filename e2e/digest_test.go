package e2e

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dunglas/httpsfv"
)

// TestVerifiedDownloads (SPEC §3, §10): the gateway's SHA-256 of an
// upload reaches the client's disk. On the embedded default (SQLite and
// the local store, whose files the test can alter behind the gateway):
// aria2c -x8 -s8 on a session checks the Digest header and says so; curl
// -C - resumes a session download whose sha256sum is the Repr-Digest
// header's; then, the stored file altered on disk, aria2c fails with its
// checksum error (exit 32) and curl of a stream link is cut short, with
// the gateway's error naming the version.
func TestVerifiedDownloads(t *testing.T) {
	t.Parallel()
	aria2c, curl, sha256sum := MustBinary(t, "aria2c"), MustBinary(t, "curl"), MustBinary(t, "sha256sum")
	dataDir := filepath.Join(t.TempDir(), "data")
	g := MustStartGateways(t, GatewaySpec{Name: "verified", Env: map[string]string{
		"GATEWAY_DATA_DIR":    dataDir,
		"GATEWAY_ADMIN_TOKEN": "verified-" + randomHex(16),
	}})[0]
	admin := g.Admin()
	const size = 24 << 20
	obj := admin.MustUpload(t, "verified/film.bin", size)
	want := hex.EncodeToString(obj.Sum[:])
	session := &SessionSettings{MaxConcurrency: 8} // aria2c -x8 without 429s
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 10, Session: session})
	var shown struct {
		Object struct {
			SHA256 string `json:"sha256"`
		} `json:"object"`
	}
	admin.call(t, http.MethodGet, "/v1/links/"+link.ID, nil, http.StatusOK, &shown)
	if shown.Object.SHA256 != want {
		t.Fatalf("GET /v1/links/%s object.sha256 = %q, want the upload's %s", link.ID, shown.Object.SHA256, want)
	}

	t.Run("TheHeadersAreStrictStructuredFieldsOfTheWholeObject", func(t *testing.T) {
		s := MustMintSession(t, g.PublicBase(), link)
		for _, tt := range []struct {
			method, url string
			hdr         []string
			status      int
		}{
			{http.MethodHead, g.On(link.URL), nil, http.StatusOK},
			{http.MethodGet, g.On(s.SessionURL), nil, http.StatusOK},
			{http.MethodGet, g.On(s.SessionURL), []string{"Range", "bytes=1000-1999"}, http.StatusPartialContent},
			{http.MethodGet, g.On(s.SessionURL), []string{"Range", "bytes=0-9,-10"}, http.StatusPartialContent},
			{http.MethodHead, g.On(s.SessionURL), []string{"Range", "bytes=5-"}, http.StatusPartialContent},
		} {
			r := MustFetch(t, tt.method, tt.url, tt.hdr...)
			if r.Status != tt.status {
				t.Fatalf("%v, want %d", r, tt.status)
			}
			checkDigestHeaders(t, r, obj.Sum[:])
		}
	})

	t.Run("Aria2cChecksTheDigestOfASessionDownload", func(t *testing.T) {
		s := MustMintSession(t, g.PublicBase(), link)
		dir := t.TempDir()
		log := filepath.Join(dir, "aria2.log")
		out := MustRun(t, dir, aria2c, aria2cVerified(g.On(s.SessionURL), log)...)
		checkFile(t, filepath.Join(dir, "film.bin"), obj)
		logged := readFile(t, log)
		for _, line := range []string{"Valid hash found in Digest header field.", "Verification finished successfully."} {
			if !strings.Contains(logged, line) {
				t.Errorf("aria2c's log has no %q; output:\n%s", line, out)
			}
		}
		t.Logf("aria2c -x8 -s8 (log at info):\n%s", grepLines(logged, "Digest header", "Verification", "Download complete"))
	})

	t.Run("CurlResumesASessionAndSha256sumIsTheHeadersDigest", func(t *testing.T) {
		s := MustMintSession(t, g.PublicBase(), link)
		dir := t.TempDir()
		// The first half, as a download cut off would have left it;
		// then curl -C - asks for the rest.
		MustRun(t, dir, curl, "-q", "-fsS", "-r", "0-"+strconv.Itoa(size/2-1), "-o", "film.bin", g.On(s.SessionURL))
		MustRun(t, dir, curl, "-q", "-fsS", "-C", "-", "-o", "film.bin", g.On(s.SessionURL))
		checkFile(t, filepath.Join(dir, "film.bin"), obj)
		// README's check by hand: curl -sI URL | grep -i repr-digest, and
		// sha256sum.
		headers := MustRun(t, dir, curl, "-q", "-fsSI", g.On(s.SessionURL))
		var repr string
		for line := range strings.Lines(headers) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.EqualFold(k, "repr-digest") {
				repr = strings.TrimSpace(v)
			}
		}
		d, err := httpsfv.UnmarshalDictionary([]string{repr})
		if err != nil {
			t.Fatalf("Repr-Digest %q: %v", repr, err)
		}
		m, _ := d.Get("sha-256")
		item, _ := m.(httpsfv.Item)
		raw, _ := item.Value.([]byte)
		sum, _, _ := strings.Cut(MustRun(t, dir, sha256sum, "film.bin"), " ")
		if hex.EncodeToString(raw) != sum || sum != want {
			t.Errorf("sha256sum of the resumed file = %s, Repr-Digest says %x, the upload %s", sum, raw, want)
		}
	})

	// Behind the gateway: one byte of the stored file changes, the size
	// does not (so the store's own size check passes).
	data := storedFile(t, dataDir, obj.VersionID)
	if err := os.Chmod(data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(data, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{obj.Data[size/2] ^ 0x20}, size/2); err != nil {
		t.Fatal(err)
	}
	f.Close()

	t.Run("Aria2cFailsWithItsChecksumErrorOnAlteredBytes", func(t *testing.T) {
		s := MustMintSession(t, g.PublicBase(), link)
		dir := t.TempDir()
		log := filepath.Join(dir, "aria2.log")
		out, err := run(t, dir, aria2c, aria2cVerified(g.On(s.SessionURL), log)...)
		if code := exitCode(err); code != 32 {
			t.Fatalf("aria2c of the altered object exited %d (%v), want 32, its checksum error; output:\n%s", code, err, out)
		}
		if !strings.Contains(out, "Checksum error detected.") {
			t.Errorf("aria2c's output names no checksum error:\n%s", out)
		}
		t.Logf("aria2c -x8 -s8 of the altered object, exit 32:\n%s", grepLines(readFile(t, log), "Checksum"))
	})

	t.Run("CurlOfAStreamLinkIsCutShort", func(t *testing.T) {
		dir := t.TempDir()
		out, err := run(t, dir, curl, "-q", "-sS", "-o", "film.bin", g.On(link.URL))
		if code := exitCode(err); code != 18 {
			t.Errorf("curl of the altered object exited %d (%v), want 18, a partial transfer; output: %s", code, err, out)
		}
		if got := fileSize(filepath.Join(dir, "film.bin")); got >= size {
			t.Errorf("curl saved %d bytes of %d, want fewer: the gateway never sends an altered object whole", got, size)
		}
		logged := readFile(t, g.StderrPath)
		if !strings.Contains(logged, "stored object does not match its SHA-256; response cut short") || !strings.Contains(logged, obj.VersionID) {
			t.Errorf("the gateway logged no error naming version %s; stderr:\n%s", obj.VersionID, tail(g.StderrPath, 20))
		}
		t.Logf("curl of the altered object's stream link: exit 18, %s", strings.TrimSpace(out))
	})
}

// aria2cVerified downloads url to film.bin with eight connections, its log
// at info level in log.
func aria2cVerified(url, log string) []string {
	return []string{"--no-conf", "-x8", "-s8", "-k1M", "--max-tries=3", "--retry-wait=1",
		"--file-allocation=none", "--summary-interval=0", "--console-log-level=warn",
		"--log-level=info", "--log=" + log, "--allow-overwrite=true", "--auto-file-renaming=false",
		"-o", "film.bin", url}
}

// checkDigestHeaders parses r's Repr-Digest with a strict RFC 8941
// parser (a Dictionary of one Byte Sequence, sha-256) and its RFC 3230
// Digest, and compares both with sum, the whole object's SHA-256.
func checkDigestHeaders(tb testing.TB, r *Reply, sum []byte) {
	tb.Helper()
	d, err := httpsfv.UnmarshalDictionary(r.Header.Values("Repr-Digest"))
	if err != nil {
		tb.Fatalf("%v: Repr-Digest %q is not a structured Dictionary: %v", r, r.Header.Values("Repr-Digest"), err)
	}
	m, ok := d.Get("sha-256")
	item, isItem := m.(httpsfv.Item)
	got, isBytes := item.Value.([]byte)
	if !ok || !isItem || !isBytes || !bytes.Equal(got, sum) || len(d.Names()) != 1 {
		tb.Errorf("%v: Repr-Digest %q, want sha-256 of the whole object, %x", r, r.Header.Get("Repr-Digest"), sum)
	}
	if got, want := r.Header.Values("Digest"), "SHA-256="+base64.StdEncoding.EncodeToString(sum); len(got) != 1 || got[0] != want {
		tb.Errorf("%v: Digest %q, want %q", r, got, want)
	}
}

// storedFile is the data file of version vid in the local store under
// dataDir.
func storedFile(tb testing.TB, dataDir, vid string) string {
	tb.Helper()
	matches, _ := filepath.Glob(filepath.Join(dataDir, "objects", "local", "*", "*", vid+".data"))
	if len(matches) != 1 {
		tb.Fatalf("found %d data files of version %s under %s, want 1", len(matches), vid, dataDir)
	}
	return matches[0]
}

func readFile(tb testing.TB, path string) string {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// grepLines returns the lines of s that contain any of subs.
func grepLines(s string, subs ...string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		for _, sub := range subs {
			if strings.Contains(line, sub) {
				b.WriteString(line)
				break
			}
		}
	}
	return b.String()
}
