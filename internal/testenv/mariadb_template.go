package testenv

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// asUser is needed because mariadbd refuses to run as root unless told to,
// and CI runs as root.
func asUser() []string {
	if os.Geteuid() == 0 {
		return []string{"--user=root"}
	}
	return nil
}

var templates sync.Map // cache path -> *templateOnce

type templateOnce struct {
	once sync.Once
	dir  string
	err  error
}

// mariadbTemplate returns a freshly bootstrapped, never started datadir that
// servers copy instead of running mariadb-install-db each time: bootstrap
// costs several seconds of CPU when the machine is busy compiling, a copy a
// fraction of one. The template is keyed by the MariaDB binaries, the options
// and the user, and cached across test binaries under $REPO/bin/cache (or the
// temp dir), published by an atomic rename so that concurrent test binaries
// never see half a template.
func mariadbTemplate(mariadbd, installDB string) (string, error) {
	args := append([]string{
		"--no-defaults",
		"--auth-root-authentication-method=normal",
		"--skip-test-db",
	}, asUser()...)
	args = append(args, mariadbdArgs...)

	h := sha256.New()
	for _, bin := range []string{mariadbd, installDB} {
		fi, err := os.Stat(bin)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d %d\n", bin, fi.Size(), fi.ModTime().UnixNano())
	}
	fmt.Fprintf(h, "uid %d\n%s\n", os.Geteuid(), strings.Join(args, " "))
	key := hex.EncodeToString(h.Sum(nil))[:16]

	cache := cacheDir()
	final := filepath.Join(cache, "mariadb-template-"+key)
	v, _ := templates.LoadOrStore(final, &templateOnce{})
	t := v.(*templateOnce)
	t.once.Do(func() {
		t.dir, t.err = buildTemplate(installDB, args, cache, final)
	})
	return t.dir, t.err
}

func buildTemplate(installDB string, args []string, cache, final string) (string, error) {
	datadir := filepath.Join(final, "data")
	if _, err := os.Stat(datadir); err == nil {
		return datadir, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	// One bootstrap at a time across test binaries: the others would only
	// burn the same CPU, and concurrent bootstraps have been seen to crash
	// mariadbd (signal 11 in ha_maria::drop_table).
	unlock, err := lockFile(final + ".lock")
	if err != nil {
		return "", err
	}
	defer unlock()
	if _, err := os.Stat(datadir); err == nil {
		return datadir, nil // built while we waited for the lock
	}

	var lastErr error
	for range 2 { // a bootstrap crash is rare and not repeatable; retry once
		if lastErr = bootstrapInto(installDB, args, cache, final); lastErr == nil {
			return datadir, nil
		}
		if _, err := os.Stat(datadir); err == nil {
			return datadir, nil
		}
	}
	return "", lastErr
}

func bootstrapInto(installDB string, args []string, cache, final string) error {
	tmp, err := mkServerDir(cache, "mariadb-template-tmp-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp) // a no-op once renamed

	bootTmp := filepath.Join(tmp, "tmp")
	if err := os.Mkdir(bootTmp, 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, installDB, append(args,
		"--datadir="+filepath.Join(tmp, "data"),
		"--tmpdir="+bootTmp,
	)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		// mariadb-install-db prints the cause first and boilerplate after.
		return fmt.Errorf("mariadb-install-db: %w\n--- output ---\n%s", err, firstLines(string(out), 30))
	}
	if err := os.RemoveAll(bootTmp); err != nil {
		return err
	}
	return os.Rename(tmp, final)
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// cacheDir prefers the repository's bin/ (ignored by git, removed by `make
// distclean`) over the temp dir, so the cache is easy to find and to drop.
func cacheDir() string {
	if root := RepoRoot(); root != "" {
		dir := filepath.Join(root, "bin", "cache")
		if err := os.MkdirAll(dir, 0o755); err == nil {
			return dir
		}
	}
	return filepath.Join(tempParent(), "dlgate-testenv-cache")
}

// copyTree copies the regular files and directories under src to dst,
// keeping permissions; a MariaDB datadir holds nothing else.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, info.Mode().Perm())
		case info.Mode().IsRegular():
			return copyFile(path, target, info.Mode().Perm())
		default:
			return fmt.Errorf("%s: %w", path, errors.ErrUnsupported)
		}
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
