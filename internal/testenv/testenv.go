// Package testenv starts the real servers that the project's tests run
// against (MariaDB, and versitygw or a SeaweedFS cluster, S3 servers with
// versioning) and decides
// what a test does when one of them is missing: skip on a developer's
// machine, fail when GATEWAY_TEST_STRICT=1 (CI). It is imported only by tests.
//
// Each server comes in two flavours: StartX gives a test a private server that
// is stopped in tb.Cleanup; SharedX gives every test of one test binary the
// same server, which testenv.Main stops after m.Run. Every server lives in its
// own temporary directory on a free port, so test binaries of different
// packages can run in parallel.
package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// installHint is how a developer gets every dependency of the test suite.
const installHint = "`make test` installs it (or `make deps`; Debian packages need root)"

// Strict reports whether missing test dependencies are failures rather than
// skips: GATEWAY_TEST_STRICT=1 (any value strconv.ParseBool takes as true).
// CI sets it so that a broken environment cannot pass by skipping.
func Strict() bool {
	v, err := strconv.ParseBool(os.Getenv("GATEWAY_TEST_STRICT"))
	return err == nil && v
}

// Require stops the test when err is not nil: t.Fatalf in strict mode,
// t.Skipf otherwise. what names the dependency and where it comes from, for
// example "MariaDB (Debian package mariadb-server)".
func Require(tb testing.TB, what string, err error) {
	tb.Helper()
	if err == nil {
		return
	}
	if Strict() {
		tb.Fatalf("%s unavailable (fatal with GATEWAY_TEST_STRICT=1); %s: %v", what, installHint, err)
		return // only reached with a fake testing.TB
	}
	tb.Skipf("%s unavailable; %s: %v", what, installHint, err)
}

var repoRoot = sync.OnceValue(func() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
})

// RepoRoot returns the directory holding go.mod, found by walking up from the
// working directory (go test runs each package in its own directory), or ""
// when there is none.
func RepoRoot() string { return repoRoot() }

// FindBinary looks for an executable named name in extraDirs, $REPO/bin (where
// `make deps` installs Go-built tools), $PATH, /usr/sbin and /usr/bin, in that
// order. /usr/sbin is searched explicitly because mariadbd lives there and it
// is not on an ordinary user's PATH. The error wraps exec.ErrNotFound.
func FindBinary(name string, extraDirs ...string) (string, error) {
	dirs := append([]string(nil), extraDirs...)
	where := append([]string(nil), extraDirs...)
	if root := RepoRoot(); root != "" {
		dirs = append(dirs, filepath.Join(root, "bin"))
		where = append(where, filepath.Join(root, "bin"))
	}
	dirs = append(dirs, filepath.SplitList(os.Getenv("PATH"))...)
	dirs = append(dirs, "/usr/sbin", "/usr/bin")
	where = append(where, "$PATH", "/usr/sbin", "/usr/bin")
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in %s: %w", name, strings.Join(where, ", "), exec.ErrNotFound)
}

// MustBinary returns the path of the executable name (see FindBinary), or
// stops the test through Require. pkg names the Debian package providing it.
func MustBinary(tb testing.TB, name, pkg string) string {
	tb.Helper()
	p, err := FindBinary(name)
	Require(tb, fmt.Sprintf("%s (Debian package %s)", name, pkg), err)
	return p
}

// mainCalled guards the shared servers: without testenv.Main nobody would
// stop them, and their temporary directories would outlive the test binary.
var mainCalled atomic.Bool

// Main runs the tests of a package and then stops the shared servers. Call it
// from TestMain in every package that uses SharedMariaDB or SharedS3:
//
//	func TestMain(m *testing.M) { testenv.Main(m) }
func Main(m *testing.M) {
	mainCalled.Store(true)
	code := m.Run()
	stopShared()
	os.Exit(code)
}

func requireMain(tb testing.TB, fn string) {
	tb.Helper()
	if !mainCalled.Load() {
		tb.Fatalf("testenv.%s needs TestMain to call testenv.Main(m), which stops shared servers", fn)
	}
}

// mustBePrivate fails tb when op (Freeze, Restart) is asked of a shared
// server, which other tests use: what names the server, start the
// function that makes a private one.
func mustBePrivate(tb testing.TB, shared bool, op, what, start string) {
	tb.Helper()
	if shared {
		tb.Fatalf("testenv: %s on the shared %s; use %s for a server a test may %s", op, what, start, strings.ToLower(op))
	}
}

// startShared is start for a shared server: what it starts is marked so.
func startShared[T interface{ markShared() }](start func() (T, error)) func() (T, error) {
	return func() (T, error) {
		v, err := start()
		if err == nil {
			v.markShared()
		}
		return v, err
	}
}

// shared holds one lazily started server per test binary. A failed start is
// remembered so that every later caller gets the same verdict quickly.
type shared[T any] struct {
	once sync.Once
	mu   sync.Mutex
	v    T
	ok   bool
	err  error
}

func (s *shared[T]) get(start func() (T, error)) (T, error) {
	s.once.Do(func() {
		v, err := start()
		s.mu.Lock()
		defer s.mu.Unlock()
		s.v, s.ok, s.err = v, err == nil, err
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.v, s.err
}

// take hands the started server to the caller (Main) exactly once.
func (s *shared[T]) take() (T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.v, s.ok
	var zero T
	s.v, s.ok = zero, false
	return v, ok
}

var (
	sharedDB shared[*MariaDB]
	sharedS3 shared[*S3]
)

func stopShared() {
	if m, ok := sharedDB.take(); ok {
		m.shutdown()
	}
	if s, ok := sharedS3.take(); ok {
		s.shutdown()
	}
	if s, ok := sharedWeed.take(); ok {
		s.shutdown()
	}
}
