package fs_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/storage/fs"
	"github.com/dlgate/dlgate/storage/storagetest"
)

// MustStore opens a store in a fresh directory and returns it with that
// directory.
func MustStore(tb testing.TB, opts ...fs.Option) (*fs.Store, string) {
	tb.Helper()
	dir := tb.TempDir()
	st, err := fs.New(dir, opts...)
	if err != nil {
		tb.Fatalf("fs.New(%q) = %v", dir, err)
	}
	tb.Cleanup(func() { st.Close() })
	return st, dir
}

func TestStoreConformance(t *testing.T) {
	storagetest.Exercise(t, func(t *testing.T) (storage.Store, string) {
		st, _ := MustStore(t)
		return st, ""
	})
}

func TestStoreConformanceInANamedBucket(t *testing.T) {
	storagetest.Exercise(t, func(t *testing.T) (storage.Store, string) {
		st, _ := MustStore(t, fs.WithDefaultBucket("other-default"))
		return st, "named.bucket"
	})
}

func TestOpenResultIsAFilerPositionedAtTheOffset(t *testing.T) {
	st, _ := MustStore(t)
	v := storagetest.MustPut(t, st, "", "k", []byte("0123456789"), "")

	rc, err := st.Open(t.Context(), v, 3, 4)
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	defer rc.Close()
	filer, ok := rc.(storage.Filer)
	if !ok {
		t.Fatalf("Open returned %T, want a storage.Filer", rc)
	}
	b, err := io.ReadAll(io.LimitReader(filer.File(), 4))
	if err != nil || string(b) != "3456" {
		t.Errorf("reading 4 bytes of File() = %q, %v, want \"3456\"", b, err)
	}
}

func TestOpenResultCopiesExactlyItsLengthThroughWriteTo(t *testing.T) {
	st, _ := MustStore(t)
	v := storagetest.MustPut(t, st, "", "k", []byte("0123456789"), "")

	rc, err := st.Open(t.Context(), v, 2, 5)
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	defer rc.Close()
	// An *os.File destination takes the copy_file_range/sendfile path.
	out, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if n, err := io.Copy(out, rc); n != 5 || err != nil {
		t.Fatalf("io.Copy = %d, %v, want 5, nil", n, err)
	}
	if n, err := rc.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Errorf("Read after the copy = %d, %v, want 0, EOF", n, err)
	}
	b, _ := os.ReadFile(out.Name())
	if string(b) != "23456" {
		t.Errorf("copied %q, want \"23456\"", b)
	}
}

func TestKeysShapedLikeNestedPathsDoNotCollide(t *testing.T) {
	st, _ := MustStore(t)
	a := storagetest.MustPut(t, st, "", "a", []byte("file a"), "")
	ab := storagetest.MustPut(t, st, "", "a/b", []byte("file a/b"), "")

	if b := storagetest.MustRead(t, st, a, 0, a.Size); string(b) != "file a" {
		t.Errorf("Open(a) = %q", b)
	}
	if b := storagetest.MustRead(t, st, ab, 0, ab.Size); string(b) != "file a/b" {
		t.Errorf("Open(a/b) = %q", b)
	}
}

// snapshot records every regular file under dir with its content and
// identity, to show that later writes add files and never touch old ones.
type fileState struct {
	info os.FileInfo
	data []byte
}

func snapshot(tb testing.TB, dir string) map[string]fileState {
	tb.Helper()
	files := map[string]fileState{}
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil || !info.Mode().IsRegular() {
			return err
		}
		data, err := os.ReadFile(p)
		files[p] = fileState{info, data}
		return err
	})
	if err != nil {
		tb.Fatalf("walking %s: %v", dir, err)
	}
	return files
}

func TestVersionFilesAreNeverRewritten(t *testing.T) {
	st, dir := MustStore(t)
	storagetest.MustPut(t, st, "", "k", []byte("one"), "")
	before := snapshot(t, dir)

	storagetest.MustPut(t, st, "", "k", []byte("two"), "")
	storagetest.MustPut(t, st, "", "other", []byte("three"), "")
	after := snapshot(t, dir)

	for p, old := range before {
		if filepath.Base(p) == "current" {
			// The pointer is replaced by rename; its old inode is gone.
			continue
		}
		now, ok := after[p]
		if !ok {
			t.Errorf("%s disappeared", p)
			continue
		}
		if !os.SameFile(old.info, now.info) || !bytes.Equal(old.data, now.data) || !old.info.ModTime().Equal(now.info.ModTime()) {
			t.Errorf("%s was rewritten", p)
		}
		if now.info.Mode().Perm()&0o222 != 0 {
			t.Errorf("%s is writable (%v), want read-only", p, now.info.Mode())
		}
	}
	for p := range after {
		if strings.Contains(filepath.Base(p), ".tmp-") {
			t.Errorf("temp file %s left behind", p)
		}
	}
}

func TestFailedPutLeavesNoFilesBehind(t *testing.T) {
	st, dir := MustStore(t)
	storagetest.MustPut(t, st, "", "k", []byte("one"), "")
	before := snapshot(t, dir)

	if _, err := st.Put(t.Context(), "", "k", strings.NewReader("short"), 100, ""); err == nil {
		t.Fatal("Put(short body) succeeded")
	}
	if after := snapshot(t, dir); len(after) != len(before) {
		t.Errorf("a failed Put changed the file count from %d to %d", len(before), len(after))
	}
}

func TestSymlinkOutOfTheRootIsRefused(t *testing.T) {
	outside := t.TempDir()
	st, dir := MustStore(t)
	// A bucket directory that leads somewhere else.
	if err := os.Symlink(outside, filepath.Join(dir, "evil")); err != nil {
		t.Fatal(err)
	}

	rel, err := filepath.Rel(dir, outside)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(rel, filepath.Join(dir, "evil-relative")); err != nil {
		t.Fatal(err)
	}

	for _, bucket := range []string{"evil", "evil-relative"} {
		if _, err := st.Put(t.Context(), bucket, "k", strings.NewReader("x"), 1, ""); err == nil {
			t.Errorf("Put through symlink %s out of the root succeeded", bucket)
		}
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Errorf("Put wrote %d entries outside the root", len(entries))
	}

	// A store elsewhere writes a real version; its directory is then
	// planted under our root as a symlink.
	other, otherDir := MustStore(t)
	v := storagetest.MustPut(t, other, "", "secret", []byte("secret"), "")
	if err := os.Symlink(filepath.Join(otherDir, "local"), filepath.Join(dir, "local")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Stat(t.Context(), storage.Ref{Key: "secret"}); err == nil {
		t.Errorf("Stat through a symlink out of the root succeeded")
	}
	if rc, err := st.Open(t.Context(), v, 0, v.Size); err == nil {
		rc.Close()
		t.Errorf("Open through a symlink out of the root succeeded")
	}
}

func TestMalformedVersionIDsAreNotFound(t *testing.T) {
	st, _ := MustStore(t)
	v := storagetest.MustPut(t, st, "", "k", []byte("data"), "")

	for _, id := range []string{"../current", "current", "x", strings.ToUpper(v.VersionID), v.VersionID + ".data", "null"} {
		_, err := st.Stat(t.Context(), storage.Ref{Key: "k", VersionID: id})
		if !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Stat(version %q) = %v, want ErrNotFound", id, err)
		}
		pinned := v
		pinned.VersionID = id
		rc, err := st.Open(t.Context(), pinned, 0, 1)
		if err == nil {
			rc.Close()
		}
		if !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Open(version %q) = %v, want ErrNotFound", id, err)
		}
	}
}

func TestTruncatedDataFileIsChanged(t *testing.T) {
	st, dir := MustStore(t)
	v := storagetest.MustPut(t, st, "", "k", []byte("0123456789"), "")
	matches, _ := filepath.Glob(filepath.Join(dir, "local", "*", "*", v.VersionID+".data"))
	if len(matches) != 1 {
		t.Fatalf("found %d data files for %s, want 1", len(matches), v.VersionID)
	}
	if err := os.Chmod(matches[0], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(matches[0], 5); err != nil {
		t.Fatal(err)
	}

	rc, err := st.Open(t.Context(), v, 0, v.Size)
	if err == nil {
		rc.Close()
	}
	if !errors.Is(err, storage.ErrChanged) {
		t.Errorf("Open(truncated file) = %v, want ErrChanged", err)
	}
}

func TestLastModifiedComesFromTheClock(t *testing.T) {
	at := time.Date(2024, 5, 6, 7, 8, 9, 123456789, time.UTC)
	st, _ := MustStore(t, fs.WithClock(func() time.Time { return at }))
	storagetest.MustPut(t, st, "", "k", []byte("x"), "")

	got := storagetest.MustStat(t, st, storage.Ref{Key: "k"})
	if want := at.Truncate(time.Second); !got.LastModified.Equal(want) {
		t.Errorf("LastModified = %v, want %v", got.LastModified, want)
	}
}

func TestPingFailsWhenTheRootIsGone(t *testing.T) {
	st, dir := MustStore(t)
	if err := st.Ping(t.Context()); err != nil {
		t.Fatalf("Ping = %v", err)
	}
	if err := os.Rename(dir, dir+".moved"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Rename(dir+".moved", dir) })
	if err := st.Ping(t.Context()); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Ping after the root moved = %v, want ErrUnavailable", err)
	}
}

func TestNewRefusesAnInvalidDefaultBucket(t *testing.T) {
	if _, err := fs.New(t.TempDir(), fs.WithDefaultBucket("../up")); !errors.Is(err, storage.ErrInvalidKey) {
		t.Errorf("New(default bucket \"../up\") = %v, want ErrInvalidKey", err)
	}
}

func TestPutIntoADeletedRootIsUnavailable(t *testing.T) {
	st, dir := MustStore(t)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	_, err := st.Put(t.Context(), "", "k", strings.NewReader("x"), 1, "")
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Put into a deleted root = %v, want ErrUnavailable", err)
	}
	if err := st.Ping(t.Context()); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Ping of a deleted root = %v, want ErrUnavailable", err)
	}
}

// A data file replaced by a symbolic link after its directory was cached:
// the open relative to the cached directory (openLeaf, O_NOFOLLOW) does
// not follow it, and the store's root, which Open then goes through,
// refuses a link out of the root as it refuses it on a first open.
func TestADataFileSwappedForALinkOutOfTheRootIsRefused(t *testing.T) {
	st, dir := MustStore(t)
	v := storagetest.MustPut(t, st, "", "k", []byte("inside"), "")
	rc, err := st.Open(t.Context(), v, 0, v.Size) // caches the directory
	if err != nil {
		t.Fatal(err)
	}
	rc.Close()
	var data string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasSuffix(p, v.VersionID+".data") {
			data = p
		}
		return nil
	})
	if data == "" {
		t.Fatal("no data file found for the version")
	}
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("stolen"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(data); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, data); err != nil {
		t.Fatal(err)
	}
	if rc, err := st.Open(t.Context(), v, 0, v.Size); err == nil {
		b, _ := io.ReadAll(rc)
		rc.Close()
		t.Fatalf("Open of a data file swapped for a link out of the root succeeded: read %q", b)
	}
}

// Ranges opened one after another through the cached directory each
// start at their own offset (a fresh descriptor is not sought when the
// offset is 0, and is when it is not).
func TestRangesThroughTheCachedDirectoryStartAtTheirOffsets(t *testing.T) {
	st, _ := MustStore(t)
	body := []byte("0123456789abcdef")
	v := storagetest.MustPut(t, st, "", "k", body, "")
	for _, rg := range [][2]int64{{0, 16}, {5, 3}, {0, 4}, {15, 1}, {0, 16}} {
		rc, err := st.Open(t.Context(), v, rg[0], rg[1])
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(rc)
		rc.Close()
		if err != nil || string(got) != string(body[rg[0]:rg[0]+rg[1]]) {
			t.Errorf("Open(%d, %d) read %q, %v; want %q", rg[0], rg[1], got, err, body[rg[0]:rg[0]+rg[1]])
		}
	}
}
