package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestASecondInterruptExitsAtOnceWith130: the first Ctrl-C starts the
// graceful shutdown (the listener closes, a download keeps going); the
// second ends the process at once with the shell's code for SIGINT.
func TestASecondInterruptExitsAtOnceWith130(t *testing.T) {
	t.Parallel()
	curl := MustBinary(t, "curl")
	g := startEmbeddedWithGrace(t, "60s")
	obj := g.Admin().MustUpload(t, "signals/slow.bin", 8<<20)
	link := g.Admin().MustCreateLink(t, obj, LinkRequest{Downloads: 1})
	relay := MustStartBalancer(t, 1<<20, g.PublicAddr)
	dl := startSlowDownload(t, curl, relay.On(link.URL))
	dl.waitSomeBytes(t)
	if err := g.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	waitRefused(t, g.PublicAddr)
	if g.Exited() {
		t.Fatalf("the first SIGINT ended the process (%v); it should wait for the download", g.Err())
	}
	start := time.Now()
	if err := g.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	if !waitExit(g, 10*time.Second) {
		t.Fatal("the second SIGINT did not end the process within 10 s")
	}
	var ee *exec.ExitError
	if !errors.As(g.Err(), &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit after the second SIGINT: %v, want exit code 130", g.Err())
	}
	t.Logf("second SIGINT: exited 130 after %v", time.Since(start).Round(time.Millisecond))
	if !strings.Contains(tail(g.StderrPath, 5), "second interrupt") {
		t.Errorf("stderr does not say why it exited:\n%s", tail(g.StderrPath, 5))
	}
}

// TestJSONLogFormatIsJSONEverywhere: with GATEWAY_LOG_FORMAT=json, every
// line the process writes, on stdout and stderr, is a JSON object, and
// durations read like "2s".
func TestJSONLogFormatIsJSONEverywhere(t *testing.T) {
	t.Parallel()
	g := MustStartGateways(t, GatewaySpec{Name: "json", Env: map[string]string{
		"GATEWAY_DATA_DIR":       filepath.Join(t.TempDir(), "gateway-data"),
		"GATEWAY_LOG_FORMAT":     "json",
		"GATEWAY_SHUTDOWN_GRACE": "2s",
	}})[0]
	r := MustFetch(t, "GET", g.PublicBase()+"/d/"+strings.Repeat("A", 43))
	if r.Status != 404 {
		t.Fatalf("%v, want 404", r)
	}
	if err := g.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if !waitExit(g, 20*time.Second) {
		t.Fatal("no exit within 20 s of SIGTERM")
	}
	sawGrace := false
	for _, path := range []string{g.StdoutPath, g.StderrPath} {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			t.Errorf("%s is empty", filepath.Base(path))
		}
		for line := range strings.Lines(string(b)) {
			var v map[string]any
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Errorf("%s: line is not JSON: %q", filepath.Base(path), line)
				continue
			}
			if grace, ok := v["grace"]; ok {
				sawGrace = true
				if grace != "2s" {
					t.Errorf("grace = %v, want \"2s\"", grace)
				}
			}
		}
	}
	if !sawGrace {
		t.Errorf("no line carried the shutdown grace")
	}
}
