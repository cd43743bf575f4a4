package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestGracefulShutdownLetsRunningDownloadsFinish: on SIGTERM the gateway
// closes its public listener at once, lets a running download finish
// within GATEWAY_SHUTDOWN_GRACE and exits 0; a download still running
// when the grace period is over is cut and the process exits anyway
// (docs/design.md, "graceful shutdown").
func TestGracefulShutdownLetsRunningDownloadsFinish(t *testing.T) {
	t.Parallel()
	const size = 8 << 20
	curl := MustBinary(t, "curl")

	t.Run("DownloadFinishesWithinTheGrace", func(t *testing.T) {
		g := startEmbeddedWithGrace(t, "30s")
		obj := g.Admin().MustUpload(t, "shutdown/finish.bin", size)
		link := g.Admin().MustCreateLink(t, obj, LinkRequest{Downloads: 1})
		if link.Delivery != "stream" {
			t.Fatalf("link delivery %q, want the default stream", link.Delivery)
		}
		relay := MustStartBalancer(t, 2<<20, g.PublicAddr) // 8 MiB take about 4 s
		dl := startSlowDownload(t, curl, relay.On(link.URL))

		mustDial(t, g.PublicAddr) // the listener is open before SIGTERM
		part := dl.waitSomeBytes(t)
		sigterm(t, g)
		waitRefused(t, g.PublicAddr)
		// The admin listener closes at the same time, so health checks
		// see the draining instance as gone while the download runs.
		waitRefused(t, g.AdminAddr)
		if g.Exited() {
			t.Fatalf("%s exited as soon as its listener closed (%v), with a download running", g.Name, g.Err())
		}
		if dl.bg.Exited() {
			t.Errorf("curl had already ended when the public listener closed; the download was not in flight")
		}

		out, err := dl.wait(t, 2*time.Minute)
		if code := exitCode(err); code != 0 {
			t.Errorf("curl exited %d (%v) during the shutdown, want 0; output: %s", code, err, out)
		}
		checkFile(t, dl.file, obj)
		if cl := dl.contentLength(t); cl != size {
			t.Errorf("Content-Length %d, want %d", cl, size)
		}

		if !waitExit(g, 45*time.Second) {
			t.Fatalf("%s still runs 45 s after the download ended (grace 30 s)", g.Name)
		}
		if code := exitCode(g.Err()); code != 0 {
			t.Errorf("%s exited with %v (code %d), want 0", g.Name, g.Err(), code)
		}
		logs := readLog(t, g.StderrPath)
		shut := logs.mustFind(t, `msg="shutting down"`, "grace=30s")
		streamed := logs.mustFind(t, "msg=streamed", "link_id="+link.ID, "bytes="+strconv.Itoa(size))
		stopped := logs.mustFind(t, "msg=stopped")
		if shut >= 0 && streamed >= 0 && stopped >= 0 && !(shut < streamed && streamed < stopped) {
			t.Errorf("log order: shutting down at line %d, streamed at %d, stopped at %d; want the download to end between the two:\n%s",
				shut, streamed, stopped, tail(g.StderrPath, 30))
		}
		if i := logs.find("grace period over"); i >= 0 {
			t.Errorf("the grace period ran out although the download ended in time: %q", logs[i])
		}
		t.Logf("SIGTERM at %d of %d bytes; the download finished byte-exact and the gateway exited 0", part, size)
	})

	t.Run("GraceOverCutsTheDownload", func(t *testing.T) {
		g := startEmbeddedWithGrace(t, "1s")
		obj := g.Admin().MustUpload(t, "shutdown/cut.bin", size)
		link := g.Admin().MustCreateLink(t, obj, LinkRequest{Downloads: 1})
		relay := MustStartBalancer(t, 200<<10, g.PublicAddr) // 8 MiB would take about 40 s
		dl := startSlowDownload(t, curl, relay.On(link.URL))

		part := dl.waitSomeBytes(t)
		sigterm(t, g)
		waitRefused(t, g.PublicAddr)
		if !waitExit(g, 20*time.Second) {
			t.Fatalf("%s still runs 20 s after SIGTERM with a 1 s grace", g.Name)
		}
		if code := exitCode(g.Err()); code != 0 {
			t.Errorf("%s exited with %v (code %d), want 0", g.Name, g.Err(), code)
		}
		if dl.bg.Exited() {
			t.Errorf("curl had already ended when the gateway exited; the download was not cut")
		}

		out, err := dl.wait(t, 90*time.Second)
		if exitCode(err) == 0 {
			t.Errorf("curl exited 0 although the gateway cut the download; output: %s", out)
		}
		cl := dl.contentLength(t)
		if cl != size {
			t.Errorf("Content-Length %d, want %d", cl, size)
		}
		got, rerr := os.ReadFile(dl.file)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if len(got) >= cl {
			t.Errorf("curl got %d bytes of a Content-Length of %d; want the download cut short", len(got), cl)
		}
		if !bytes.Equal(got, obj.Data[:min(len(got), len(obj.Data))]) {
			t.Errorf("the %d bytes received are not the start of the object", len(got))
		}

		logs := readLog(t, g.StderrPath)
		shut := logs.mustFind(t, `msg="shutting down"`, "grace=1s")
		over := logs.mustFind(t, "grace period over")
		stopped := logs.mustFind(t, "msg=stopped")
		if shut >= 0 && over >= 0 && stopped >= 0 && !(shut < over && over < stopped) {
			t.Errorf("log order: shutting down at line %d, grace period over at %d, stopped at %d:\n%s",
				shut, over, stopped, tail(g.StderrPath, 30))
		}
		if i := logs.find("msg=streamed"); i >= 0 {
			t.Errorf("the gateway logged a finished download although it was cut: %q", logs[i])
		}
		t.Logf("SIGTERM at %d bytes; curl ended with code %d after %d of %d bytes", part, exitCode(err), len(got), cl)
	})
}

// startEmbeddedWithGrace starts the embedded default (SQLite and the local
// store, as MustStartEmbeddedDefault) with the given shutdown grace, and
// reads the admin token it prints on its first start.
func startEmbeddedWithGrace(tb testing.TB, grace string) *Gateway {
	tb.Helper()
	g := MustStartGateways(tb, GatewaySpec{Name: "embedded-grace-" + grace, Env: map[string]string{
		"GATEWAY_DATA_DIR":       filepath.Join(tb.TempDir(), "gateway-data"),
		"GATEWAY_SHUTDOWN_GRACE": grace,
		"GATEWAY_LOG_LEVEL":      "debug",
		"GATEWAY_LOG_FORMAT":     "text", // the log checks below read text lines
	}})[0]
	const marker = "generated admin token"
	b, err := os.ReadFile(g.StdoutPath)
	if err != nil {
		tb.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if line := sc.Text(); strings.Contains(line, marker) {
			fields := strings.Fields(line)
			g.AdminToken = fields[len(fields)-1]
		}
	}
	if g.AdminToken == "" {
		tb.Fatalf("the embedded default printed no line with %q on its first start; stdout:\n%s", marker, tail(g.StdoutPath, 20))
	}
	return g
}

// slowDownload is curl fetching a link in the background into file,
// writing the response headers to headers.
type slowDownload struct {
	bg      *Background
	file    string
	headers string
}

func startSlowDownload(tb testing.TB, curl, rawURL string) *slowDownload {
	tb.Helper()
	dir := tb.TempDir()
	d := &slowDownload{file: filepath.Join(dir, "download.bin"), headers: filepath.Join(dir, "headers.txt")}
	d.bg = MustStart(tb, dir, curl, "-q", "-fsS", "-D", d.headers, "-o", d.file, rawURL)
	return d
}

// waitSomeBytes waits until at least 64 KiB of the body arrived and
// returns how many there are; it fails if curl ends first.
func (d *slowDownload) waitSomeBytes(tb testing.TB) int64 {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if n := fileSize(d.file); n >= 64<<10 {
			return n
		}
		if d.bg.Exited() {
			out, err := d.bg.Wait()
			tb.Fatalf("curl ended (%v) with %d bytes before the shutdown: %s", err, fileSize(d.file), out)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("curl had only %d bytes after a minute", fileSize(d.file))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// wait waits at most bound for curl to end, killing it after that.
func (d *slowDownload) wait(tb testing.TB, bound time.Duration) (string, error) {
	tb.Helper()
	select {
	case <-d.bg.Done():
	case <-time.After(bound):
		d.bg.Kill()
		out, _ := d.bg.Wait()
		tb.Fatalf("curl still ran %v later (%d bytes); killed it: %s", bound, fileSize(d.file), out)
	}
	return d.bg.Wait()
}

// contentLength is the Content-Length of the 200 answer curl received.
func (d *slowDownload) contentLength(tb testing.TB) int {
	tb.Helper()
	b, err := os.ReadFile(d.headers)
	if err != nil {
		tb.Fatalf("curl's header dump: %v", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(b)), nil)
	if err != nil {
		tb.Fatalf("curl's header dump %.300q: %v", b, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.ContentLength < 0 {
		tb.Fatalf("the download was answered %s with Content-Length %d, want 200 with a length", resp.Status, resp.ContentLength)
	}
	return int(resp.ContentLength)
}

// sigterm sends SIGTERM to the gateway's process, by its PID.
func sigterm(tb testing.TB, g *Gateway) {
	tb.Helper()
	if g.Exited() {
		tb.Fatalf("%s exited before SIGTERM (%v)", g.Name, g.Err())
	}
	if err := g.Signal(syscall.SIGTERM); err != nil {
		tb.Fatalf("SIGTERM to %s (pid %d): %v", g.Name, g.Pid(), err)
	}
}

// mustDial checks that addr accepts a TCP connection.
func mustDial(tb testing.TB, addr string) {
	tb.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		tb.Fatalf("dial %s: %v", addr, err)
	}
	c.Close()
}

// waitRefused polls addr until a connection attempt is refused, for at
// most 10 s.
func waitRefused(tb testing.TB, addr string) {
	tb.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var last error
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err == nil {
			c.Close()
			last = errors.New("accepted")
		} else if errors.Is(err, syscall.ECONNREFUSED) {
			return
		} else {
			last = err
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Fatalf("%s still takes connections 10 s after SIGTERM (last dial: %v)", addr, last)
}

// waitExit waits at most bound for the gateway process to be reaped.
func waitExit(g *Gateway, bound time.Duration) bool {
	select {
	case <-g.Done():
		return true
	case <-time.After(bound):
		return false
	}
}

// logLines are the lines of a process's log.
type logLines []string

func readLog(tb testing.TB, path string) logLines {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}

// find returns the index of the first line holding every part, or -1.
func (l logLines) find(parts ...string) int {
next:
	for i, line := range l {
		for _, p := range parts {
			if !strings.Contains(line, p) {
				continue next
			}
		}
		return i
	}
	return -1
}

// mustFind is find, failing the test when no line matches.
func (l logLines) mustFind(tb testing.TB, parts ...string) int {
	tb.Helper()
	i := l.find(parts...)
	if i < 0 {
		tb.Errorf("no log line holds %s; stderr ends:\n%s", fmt.Sprintf("%q", parts), strings.Join(l[max(0, len(l)-30):], "\n"))
	}
	return i
}
