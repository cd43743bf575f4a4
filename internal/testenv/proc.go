package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// process is one server child. Its stdout and stderr go to a log file that
// outlives restarts, so a failed start can quote what the server said.
type process struct {
	*Proc
	logPath string
}

// errExited marks a server that died before it became ready.
var errExited = errors.New("server exited during startup")

func startProcess(logPath, bin string, args ...string) (*process, error) {
	return startCmd(logPath, exec.Command(bin, args...))
}

// startCmd starts cmd, its stdout and stderr going to the log at logPath.
func startCmd(logPath string, cmd *exec.Cmd) (*process, error) {
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	// The child holds its own descriptor; ours is only needed until Start.
	defer logf.Close()
	fmt.Fprintf(logf, "=== testenv %s: %s\n", time.Now().UTC().Format(time.RFC3339), strings.Join(cmd.Args, " "))

	cmd.Stdout = logf
	cmd.Stderr = logf
	child, err := StartProc(cmd)
	if err != nil {
		return nil, err
	}
	return &process{Proc: child, logPath: logPath}, nil
}

// waitReady polls ready until it succeeds, the process dies or ctx ends.
func (p *process) waitReady(ctx context.Context, ready func(context.Context) error) error {
	var last error
	for {
		if p.Exited() {
			return fmt.Errorf("%w (%v)", errExited, p.Err())
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		last = ready(rctx)
		cancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready: %w (last error: %v)", ctx.Err(), last)
		case <-p.Done():
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// bindConflict reports whether a server that died at startup lost its port
// to another process, which is worth a retry on a fresh port.
func bindConflict(logPath string) bool {
	return strings.Contains(strings.ToLower(logTail(logPath, 30)), "address already in use")
}

// retryBind runs launch, and again, up to tries times in all, while it
// fails because another process holds a port it binds (conflict says so
// of the error), pausing between attempts: a port taken between probing
// it free and binding it (launch then picks fresh ones), or one that a
// server stopped a moment ago for a restart still holds.
func retryBind(tries int, pause time.Duration, launch func() error, conflict func(error) bool) error {
	var err error
	for i := range tries {
		if i > 0 {
			time.Sleep(pause)
		}
		if err = launch(); err == nil || !conflict(err) {
			return err
		}
	}
	return err
}

// logTail returns the last n lines of the file at path, for error messages.
func logTail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	defer f.Close()
	const maxRead = 16 << 10
	if fi, err := f.Stat(); err == nil && fi.Size() > maxRead {
		_, _ = f.Seek(-maxRead, io.SeekEnd)
	}
	b, _ := io.ReadAll(f)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// withLog appends the tail of the server's log to a startup error, because
// the error alone ("exit status 1") never says why a server refused to run.
func withLog(err error, logPath string) error {
	return fmt.Errorf("%w\n--- last lines of %s ---\n%s", err, logPath, logTail(logPath, 25))
}

// tempParent is where server directories go. MariaDB's unix socket path must
// stay under 108 bytes, so a very long $TMPDIR is replaced by /tmp.
func tempParent() string {
	if d := os.TempDir(); len(d) <= 60 {
		return d
	}
	return "/tmp"
}

// ownerFile names the process that made a server directory, so that a later
// test binary can remove directories left behind by one that was killed
// (a -timeout panic or SIGKILL skips every Cleanup).
const ownerFile = "testenv.owner"

var swept sync.Map // parent+prefix -> struct{}

// mkServerDir makes a fresh directory parent/prefix*, after removing stale
// ones whose owner process is gone.
func mkServerDir(parent, prefix string) (string, error) {
	if _, done := swept.LoadOrStore(parent+"\x00"+prefix, struct{}{}); !done {
		sweepStale(parent, prefix)
	}
	dir, err := os.MkdirTemp(parent, prefix)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

func sweepStale(parent, prefix string) {
	matches, _ := filepath.Glob(filepath.Join(parent, prefix+"*"))
	for _, dir := range matches {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not ours, or still being created
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid == os.Getpid() || processAlive(pid) {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}
