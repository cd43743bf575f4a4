package e2e

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlgate/dlgate/internal/testenv"
)

// toolPackages names the Debian package of each download tool.
var toolPackages = map[string]string{"curl": "curl", "wget": "wget", "aria2c": "aria2",
	"lftp": "lftp", "axel": "axel", "wget2": "wget2"}

// MustBinary finds a download tool, or stops the test through
// testenv.Require (a failure under GATEWAY_TEST_STRICT=1).
func MustBinary(tb testing.TB, name string) string {
	tb.Helper()
	return testenv.MustBinary(tb, name, toolPackages[name])
}

// toolTimeout bounds one run of a download tool.
const toolTimeout = 3 * time.Minute

// toolCommand prepares a tool run in dir ("" for a temporary directory)
// with no proxy settings, bound to ctx.
func toolCommand(ctx context.Context, tb testing.TB, dir, bin string, args ...string) *exec.Cmd {
	tb.Helper()
	if dir == "" {
		dir = tb.TempDir()
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = childEnv(nil)
	cmd.SysProcAttr = testenv.SysProcAttr()
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// MustRun runs a tool to its end and fails the test unless it exits 0.
// It returns the tool's combined output.
func MustRun(tb testing.TB, dir, bin string, args ...string) string {
	tb.Helper()
	out, err := run(tb, dir, bin, args...)
	if err != nil {
		tb.Fatalf("%s %s: %v\n%s", filepath.Base(bin), redactArgs(args), err, out)
	}
	return out
}

func run(tb testing.TB, dir, bin string, args ...string) (string, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	defer cancel()
	out, err := toolCommand(ctx, tb, dir, bin, args...).CombinedOutput()
	return string(out), err
}

// Background is a tool running while the test does other things.
type Background struct {
	*testenv.Proc
	out *strings.Builder
}

// MustStart starts a tool in the background. Cleanup kills it if it still
// runs.
func MustStart(tb testing.TB, dir, bin string, args ...string) *Background {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), toolTimeout)
	b := &Background{out: &strings.Builder{}}
	cmd := toolCommand(ctx, tb, dir, bin, args...)
	cmd.Stdout, cmd.Stderr = b.out, b.out
	var err error
	if b.Proc, err = testenv.StartProc(cmd); err != nil {
		cancel()
		tb.Fatalf("starting %s: %v", filepath.Base(bin), err)
	}
	go func() {
		<-b.Done()
		cancel()
	}()
	tb.Cleanup(func() {
		cancel()
		<-b.Done()
	})
	return b
}

// Kill (from testenv.Proc) sends SIGKILL to the tool, as a user closing a
// laptop would cut a download, and waits for it.

// Wait waits for the tool to end and returns its output and error.
func (b *Background) Wait() (string, error) {
	<-b.Done()
	return b.out.String(), b.Err()
}

// redactArgs shortens tokens in URLs of a command line.
func redactArgs(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.HasPrefix(a, "http://") {
			a = redact(a)
		}
		out[i] = fmt.Sprintf("%q", a)
	}
	return strings.Join(out, " ")
}

// fileSize is the size of the file at path, 0 when it does not exist yet.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// checkFile checks that the file at path holds exactly obj.
func checkFile(tb testing.TB, path string, obj *Object) {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Errorf("downloaded file: %v", err)
		return
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		tb.Errorf("reading %s: %v", path, err)
		return
	}
	if [32]byte(h.Sum(nil)) != obj.Sum {
		tb.Errorf("%s: %d bytes that differ from the %d-byte object %s", filepath.Base(path), n, len(obj.Data), obj.Key)
	}
}

// exitCode is a tool's exit code: 0 for success, -1 when it did not exit
// normally (killed, or never started).
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// savedFiles lists the names of the files a tool saved into dir.
func savedFiles(tb testing.TB, dir string) []string {
	tb.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		tb.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// cutHalfWay waits until progress() reaches half, failing the test if the
// tool ends first or is not there within a minute (after undo, which
// lifts what the test slowed), then sends it sig and waits up to grace for
// it to end, killing it after that. It reports whether the tool ended
// within grace.
func cutHalfWay(t *testing.T, bg *Background, name string, progress func() int64, half int64, sig syscall.Signal, grace time.Duration, undo func()) bool {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for progress() < half {
		if bg.Exited() {
			out, err := bg.Wait()
			undo()
			t.Fatalf("%s ended (%v) before it had half the file (%d of %d bytes): %s", name, err, progress(), 2*half, lastLines(out, 10))
		}
		if time.Now().After(deadline) {
			undo()
			t.Fatalf("%s had only %d of %d bytes after a minute", name, progress(), 2*half)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := bg.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-bg.Done():
		return true
	case <-time.After(grace):
		bg.Kill()
		return false
	}
}
