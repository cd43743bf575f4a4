package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/dlgate/dlgate/ledger/sqlite"
)

func TestDatabaseFilesAreOwnerOnly(t *testing.T) {
	old := syscall.Umask(0o022) // the usual umask, under which SQLite makes 0644 files
	defer syscall.Umask(old)
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.db")
	db, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Migrating writes, so the -wal and -shm files exist too.
	if err := sqlite.Migrate(context.Background(), db.SQL(), path); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal", path + "-shm", path + ".migrate-lock"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v", filepath.Base(p), err)
		}
		if m := fi.Mode().Perm(); m != 0o600 {
			t.Errorf("%s has mode %v, want -rw-------", filepath.Base(p), m)
		}
	}
}

func TestWiderDatabaseFilesAreNarrowedOnOpen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.db")
	for _, p := range []string{path, path + "-wal"} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	db, err := sqlite.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, p := range []string{path, path + "-wal"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m != 0o600 {
			t.Errorf("%s left with mode %v, want -rw-------", filepath.Base(p), m)
		}
	}
}
