package fs_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/storage/storagetest"
)

func TestDeleteRemovesTheVersionsFilesAndNoOther(t *testing.T) {
	st, dir := MustStore(t)
	keep := storagetest.MustPut(t, st, "", "k", []byte("keep"), "")
	gone := storagetest.MustPut(t, st, "", "k", []byte("gone"), "")
	before := snapshot(t, dir)
	if err := st.Delete(t.Context(), gone); err != nil {
		t.Fatal(err)
	}
	after := snapshot(t, dir)
	for p, old := range before {
		name := filepath.Base(p)
		switch name {
		case gone.VersionID + ".data", gone.VersionID + ".json":
			if _, ok := after[p]; ok {
				t.Errorf("%s is still there after its version was deleted", p)
			}
		case "current":
			if string(after[p].data) != keep.VersionID+"\n" {
				t.Errorf("current = %q, want %s", after[p].data, keep.VersionID)
			}
		default:
			now, ok := after[p]
			if !ok || string(now.data) != string(old.data) {
				t.Errorf("%s changed when another version was deleted", p)
			}
		}
	}
	if len(after) != len(before)-2 {
		t.Errorf("%d files before, %d after; want exactly the version's two removed", len(before), len(after))
	}
}

func TestDeleteOfAVersionWithAnotherETagIsChanged(t *testing.T) {
	st, _ := MustStore(t)
	v := storagetest.MustPut(t, st, "", "k", []byte("data"), "")
	other := v
	other.ETag = `"not-this-one"`
	if err := st.Delete(t.Context(), other); !errors.Is(err, storage.ErrChanged) {
		t.Fatalf("Delete(wrong ETag) = %v, want ErrChanged", err)
	}
	storagetest.MustStat(t, st, storage.Ref{Key: "k", VersionID: v.VersionID})
}

// Open remembers a version's metadata; a version deleted afterwards, by
// Delete or by hand, is still not found.
func TestAVersionOpenedBeforeItWasDeletedIsNotFound(t *testing.T) {
	st, dir := MustStore(t)
	byAPI := storagetest.MustPut(t, st, "", "k", []byte("by the API"), "")
	byHand := storagetest.MustPut(t, st, "", "k2", []byte("by hand"), "")
	for _, v := range []storage.Version{byAPI, byHand} {
		r, err := st.Open(t.Context(), v, 0, v.Size)
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
	}
	if err := st.Delete(t.Context(), byAPI); err != nil {
		t.Fatal(err)
	}
	for p := range snapshot(t, dir) {
		if filepath.Base(p) == byHand.VersionID+".data" {
			if err := os.Remove(p); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, v := range []storage.Version{byAPI, byHand} {
		if _, err := st.Open(t.Context(), v, 0, v.Size); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Open of version %s after its deletion: %v, want ErrNotFound", v.VersionID, err)
		}
	}
}

// A key's directory replaced by hand after Open cached it: its versions
// are found where they are now.
func TestADirectoryReplacedByHandIsSeenAgain(t *testing.T) {
	st, dir := MustStore(t)
	v := storagetest.MustPut(t, st, "", "k", []byte("first home"), "")
	r, err := st.Open(t.Context(), v, 0, v.Size)
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	var data string
	for p := range snapshot(t, dir) {
		if filepath.Base(p) == v.VersionID+".data" {
			data = p
		}
	}
	home := filepath.Dir(data)
	if err := os.Rename(home, home+".moved"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(home+".moved", home); err != nil {
		t.Fatal(err)
	}
	// Same inode: the cached directory still works. Now a copy under
	// the same name, a new directory.
	if err := os.Rename(home, home+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(home, os.DirFS(home+".old")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(home + ".old"); err != nil {
		t.Fatal(err)
	}
	r, err = st.Open(t.Context(), v, 0, v.Size)
	if err != nil {
		t.Fatalf("Open after the directory was replaced: %v", err)
	}
	r.Close()
}
