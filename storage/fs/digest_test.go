package fs_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/storage/storagetest"
)

func TestStatReportsTheSHA256PutComputed(t *testing.T) {
	st, _ := MustStore(t)
	data := []byte("checked on the way out")
	v := storagetest.MustPut(t, st, "", "k", data, "")
	got := storagetest.MustStat(t, st, storage.Ref{Key: "k", VersionID: v.VersionID})
	if got.SHA256 != storagetest.SHA256Hex(data) || got.SHA256 != v.SHA256 {
		t.Errorf("Stat SHA256 = %q, Put's %q, want both %s", got.SHA256, v.SHA256, storagetest.SHA256Hex(data))
	}
}

func TestVersionStoredBeforeDigestsHasNone(t *testing.T) {
	st, dir := MustStore(t)
	v := storagetest.MustPut(t, st, "", "k", []byte("old"), "")
	// The metadata as the store wrote it before it computed digests.
	matches, _ := filepath.Glob(filepath.Join(dir, "local", "*", "*", v.VersionID+".json"))
	if len(matches) != 1 {
		t.Fatalf("found %d metadata files for %s, want 1", len(matches), v.VersionID)
	}
	b, err := os.ReadFile(matches[0])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil || m["sha256"] != v.SHA256 {
		t.Fatalf("metadata %s = %s, want a sha256 field with %s", matches[0], b, v.SHA256)
	}
	delete(m, "sha256")
	b, _ = json.Marshal(m)
	if err := os.Chmod(matches[0], 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(matches[0], b, 0o444); err != nil {
		t.Fatal(err)
	}
	got := storagetest.MustStat(t, st, storage.Ref{Key: "k", VersionID: v.VersionID})
	if got.SHA256 != "" || got.ETag != v.ETag {
		t.Errorf("Stat of a version without a recorded digest = %+v, want its ETag and no SHA256", got)
	}
}
