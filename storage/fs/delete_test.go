package fs_test

import (
	"errors"
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
