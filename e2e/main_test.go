package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/dlgate/dlgate/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// binDirPrefix names the directories the gateway binary is built into:
// dlgate-e2e-PID-*, so that a later run can remove those of test binaries
// that died (testenv.Main exits the process; no code of ours runs after
// the tests, and a killed run skips everything).
const binDirPrefix = "dlgate-e2e-"

// buildGateway builds ./cmd/gateway once per test binary.
var buildGateway = sync.OnceValues(func() (string, error) {
	root := testenv.RepoRoot()
	if root == "" {
		return "", errors.New("no go.mod above the working directory")
	}
	sweepStaleBinDirs()
	dir, err := os.MkdirTemp("", binDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "gateway")
	cmd := exec.Command("go", "build", "-buildvcs=false", "-o", bin, "./cmd/gateway")
	// Same settings as `go test` itself, so the build cache it filled
	// serves this build too.
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("go build ./cmd/gateway: %v\n%s", err, out)
	}
	return bin, nil
})

// MustGatewayBinary returns the path of the gateway built from this tree.
func MustGatewayBinary(tb testing.TB) string {
	tb.Helper()
	bin, err := buildGateway()
	if err != nil {
		tb.Fatalf("building the gateway: %v", err)
	}
	return bin
}

// sweepStaleBinDirs removes build directories whose test binary is gone.
func sweepStaleBinDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), binDirPrefix+"*"))
	for _, dir := range dirs {
		rest := strings.TrimPrefix(filepath.Base(dir), binDirPrefix)
		pidText, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if !ok || err != nil || pid == os.Getpid() || alive(pid) {
			continue
		}
		_ = os.RemoveAll(dir)
	}
}

func alive(pid int) bool {
	p, err := os.FindProcess(pid)
	if err != nil {
		return false
	}
	err = p.Signal(syscall.Signal(0))
	return err == nil || errors.Is(err, syscall.EPERM)
}
