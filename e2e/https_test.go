package e2e

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlgate/dlgate/internal/testenv"
)

// HTTPS on the gateway itself (SPEC §10, issue 18) with certificate files
// the test makes.

// TestHTTPSCertificateFilesReloadWhileADownloadRuns replaces the pair on
// disk while an HTTP/2 download is half-way: the download finishes
// byte-exact on the old connection and the next handshake shows the new
// serial; a pair whose key does not match is refused and the good one
// keeps serving. curl downloads over HTTP/2 and HTTP/1.1 claim once each,
// every public answer carries Strict-Transport-Security, and the
// redirect listener sends plain HTTP to the https URL without claiming.
func TestHTTPSCertificateFilesReloadWhileADownloadRuns(t *testing.T) {
	curl := MustBinary(t, "curl")
	certDir := t.TempDir()
	certFile, keyFile := e2eCA.MustWritePair(t, certDir, 1001, false)
	redirect := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	g := MustStartTLSGateway(t, "https-files", map[string]string{
		"GATEWAY_TLS_CERT": certFile, "GATEWAY_TLS_KEY": keyFile, "GATEWAY_REDIRECT_LISTEN": redirect,
	})
	admin := g.HTTPSAdmin()
	obj := admin.MustUpload(t, "https/file.bin", 8<<20)
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 3})
	if want := "https://" + g.PublicAddr + "/d/"; !strings.HasPrefix(link.URL, want) {
		t.Fatalf("link URL %s, want it under %s (the public URL defaults to https with TLS on)", redact(link.URL), want)
	}
	if got := servedSerial(t, g.PublicAddr, "localhost", e2eCA.Pool); got.Int64() != 1001 {
		t.Fatalf("serial %v served, want 1001", got)
	}

	// An HTTP/2 download reads its first MiB, then the pair is renewed.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp := getH2(t, ctx, h2Client(e2eCA.Pool), link.URL)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET over HTTP/2: %s", resp.Status)
	}
	if got := resp.Header.Get("Strict-Transport-Security"); got != "max-age=31536000" {
		t.Errorf("Strict-Transport-Security %q, want max-age=31536000", got)
	}
	first := make([]byte, 1<<20)
	if _, err := io.ReadFull(resp.Body, first); err != nil {
		t.Fatal(err)
	}
	e2eCA.MustWritePair(t, certDir, 1002, false)
	waitLog(t, g.StderrPath, "tls: certificate reloaded", 15*time.Second)
	if got := servedSerial(t, g.PublicAddr, "localhost", e2eCA.Pool); got.Int64() != 1002 {
		t.Errorf("serial %v served after the files changed, want 1002", got)
	}
	rest, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || sha256.Sum256(append(first, rest...)) != obj.Sum {
		t.Errorf("the download running across the reload: %d bytes (%v), not the object's %d", len(first)+len(rest), err, len(obj.Data))
	}

	// A bad pair is refused; the good one keeps serving.
	e2eCA.MustWritePair(t, certDir, 1003, true)
	line := waitLog(t, g.StderrPath, "new certificate refused", 15*time.Second)
	if !strings.Contains(line, "private key does not match public key") {
		t.Errorf("refusal line %q does not say what is wrong", line)
	}
	if got := servedSerial(t, g.PublicAddr, "localhost", e2eCA.Pool); got.Int64() != 1002 {
		t.Errorf("serial %v served after a bad pair was written, want the old 1002", got)
	}

	// curl over both protocols: byte-exact, one claim each.
	dir := t.TempDir()
	for _, proto := range []struct{ flag, version string }{{"--http2", "2"}, {"--http1.1", "1.1"}} {
		file := filepath.Join(dir, "via"+proto.version+".bin")
		out := MustRun(t, dir, curl, "-sS", "--fail", "--cacert", e2eCA.PEMFile, proto.flag, "-o", file, "-w", "%{http_version}", link.URL)
		if strings.TrimSpace(out) != proto.version {
			t.Errorf("curl %s spoke HTTP/%s, want HTTP/%s", proto.flag, strings.TrimSpace(out), proto.version)
		}
		checkFile(t, file, obj)
	}
	admin.checkCounts(t, link.ID, 0, 3, 0)

	// The redirect listener: 308 to the https URL, nothing claimed.
	other := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1})
	plainURL := "http://" + redirect + strings.TrimPrefix(other.URL, "https://"+g.PublicAddr)
	for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
		r := MustFetch(t, method, plainURL)
		if r.Status != http.StatusPermanentRedirect || r.Header.Get("Location") != other.URL {
			t.Errorf("%v: Location %q, want 308 to the link's https URL", r, redact(r.Header.Get("Location")))
		}
		if r.Header.Get("Strict-Transport-Security") != "" {
			t.Errorf("%v: Strict-Transport-Security over plain HTTP (RFC 6797 §7.2)", r)
		}
	}
	admin.checkCounts(t, other.ID, 1, 0, 0)
	checkNoTokenInLogs(t, g)
}

// TestHTTPSSIGHUPAloneReloadsTheCertificateFiles keeps the file poller
// out of the way (DLGATE_TEST_TLS_POLL=1h: it looks at the files when the
// gateway starts, then in an hour) so that SIGHUP is the only thing that
// can reload the pair. A SIGHUP with the files unchanged reads them again
// and logs no reload, the serial as it was; a pair replaced on disk is not
// served until the signal, and is served once the signal has logged
// "tls: certificate reloaded".
func TestHTTPSSIGHUPAloneReloadsTheCertificateFiles(t *testing.T) {
	t.Parallel()
	certDir := t.TempDir()
	certFile, keyFile := e2eCA.MustWritePair(t, certDir, 1101, false)
	g := MustStartTLSGateway(t, "https-sighup", map[string]string{
		"GATEWAY_TLS_CERT": certFile, "GATEWAY_TLS_KEY": keyFile, "DLGATE_TEST_TLS_POLL": "1h",
	})
	// The poller logs this after its first look at the files; its next is
	// an hour away. watchTLS subscribes to SIGHUP before it starts the
	// poller, so from here on a SIGHUP is handled (not the default exit).
	if line := waitLog(t, g.StderrPath, "tls: watching the certificate files", 10*time.Second); !strings.Contains(line, "poll=1h0m0s") {
		t.Fatalf("the poller's line %q does not say poll=1h0m0s: DLGATE_TEST_TLS_POLL was not applied", line)
	}
	hup := func() {
		t.Helper()
		if err := syscall.Kill(g.Pid(), syscall.SIGHUP); err != nil {
			t.Fatalf("SIGHUP to %s (pid %d): %v", g.Name, g.Pid(), err)
		}
	}
	logCount := func(substr string) int {
		b, _ := os.ReadFile(g.StderrPath)
		return countLines(string(b), substr)
	}
	// waitUnchanged waits for the n-th "unchanged" line, the sign that a
	// SIGHUP was handled without a reload (tlsserve.Server.Reload).
	waitUnchanged := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for logCount("tls: certificate files read again; the certificate is unchanged") < n {
			if time.Now().After(deadline) {
				t.Fatalf("SIGHUP number %d with unchanged files not handled within 10 s; last lines:\n%s", n, tail(g.StderrPath, 20))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// Unchanged files: read again, nothing reloaded, nothing refused.
	hup()
	waitUnchanged(1)
	if n := logCount("tls: certificate reloaded"); n != 0 {
		t.Errorf("%d reloads logged after a SIGHUP with unchanged files, want 0", n)
	}
	if n := logCount("new certificate refused"); n != 0 {
		t.Errorf("%d refusals logged after a SIGHUP with unchanged files, want 0", n)
	}
	if got := servedSerial(t, g.PublicAddr, "localhost", e2eCA.Pool); got.Int64() != 1101 {
		t.Errorf("serial %v served after a SIGHUP with unchanged files, want 1101", got)
	}

	// A new pair on disk: still the old one until SIGHUP (the poller's
	// next look is an hour away), the new one after it.
	e2eCA.MustWritePair(t, certDir, 1102, false)
	if got := servedSerial(t, g.PublicAddr, "localhost", e2eCA.Pool); got.Int64() != 1101 {
		t.Fatalf("serial %v served right after the files changed, before any SIGHUP, want the old 1101", got)
	}
	hup()
	line := waitLog(t, g.StderrPath, "tls: certificate reloaded", 10*time.Second)
	if want := fmt.Sprintf("serial=%x", 1102); !strings.Contains(line, want) {
		t.Errorf("reload line %q, want %s", line, want)
	}
	if got := servedSerial(t, g.PublicAddr, "localhost", e2eCA.Pool); got.Int64() != 1102 {
		t.Errorf("serial %v served after SIGHUP, want 1102", got)
	}

	// SIGHUP again, the files as they are now: no second reload.
	hup()
	waitUnchanged(2)
	if n := logCount("tls: certificate reloaded"); n != 1 {
		t.Errorf("%d reloads logged after one change and three SIGHUPs, want 1", n)
	}
	if got := servedSerial(t, g.PublicAddr, "localhost", e2eCA.Pool); got.Int64() != 1102 {
		t.Errorf("serial %v served after a SIGHUP with unchanged files, want 1102", got)
	}
}

// TestHTTP2SessionCapCountsRequests opens five streams on one HTTP/2
// connection to a session whose cap is two: two are served, three get
// 429, as five HTTP/1.1 connections would.
func TestHTTP2SessionCapCountsRequests(t *testing.T) {
	certFile, keyFile := e2eCA.MustWritePair(t, t.TempDir(), 2001, false)
	g := MustStartTLSGateway(t, "https-h2-cap", map[string]string{"GATEWAY_TLS_CERT": certFile, "GATEWAY_TLS_KEY": keyFile})
	admin := g.HTTPSAdmin()
	obj := admin.MustUpload(t, "https/capped.bin", 32<<20)
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1, Session: &SessionSettings{MaxConcurrency: 2}})
	s := MustMintSession(t, "https://"+g.PublicAddr, link)
	c := h2Client(e2eCA.Pool)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// The first request opens the connection the others share.
	warm := getH2(t, ctx, c, s.SessionURL, "Range", "bytes=0-0")
	io.Copy(io.Discard, warm.Body) //nolint:errcheck // one byte
	warm.Body.Close()

	var (
		mu       sync.Mutex
		statuses []int
		bodies   []io.ReadCloser
		wg       sync.WaitGroup
	)
	for range 5 {
		wg.Go(func() {
			// Each holds its stream (and slot) by not reading its body.
			resp := getH2(t, ctx, c, s.SessionURL, "Range", fmt.Sprintf("bytes=0-%d", len(obj.Data)-1))
			mu.Lock()
			statuses = append(statuses, resp.StatusCode)
			bodies = append(bodies, resp.Body)
			mu.Unlock()
		})
	}
	wg.Wait()
	got := map[int]int{}
	for _, st := range statuses {
		got[st]++
	}
	if got[http.StatusPartialContent] != 2 || got[http.StatusTooManyRequests] != 3 {
		t.Errorf("five streams on one connection, cap 2: statuses %v, want two 206 and three 429", got)
	}
	for _, b := range bodies {
		b.Close()
	}
}
