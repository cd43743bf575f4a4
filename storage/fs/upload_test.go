package fs_test

import (
	iofs "io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/storage/fs"
	"github.com/dlgate/dlgate/storage/storagetest"
)

func TestUploaderConformance(t *testing.T) {
	storagetest.ExerciseUploads(t, func(t *testing.T) storagetest.UploadEnv {
		st, dir := MustStore(t)
		return storagetest.UploadEnv{
			Store: st,
			Reopen: func(t *testing.T) storage.Store {
				again, err := fs.New(dir)
				if err != nil {
					t.Fatalf("fs.New(%q) again = %v", dir, err)
				}
				t.Cleanup(func() { again.Close() })
				return again
			},
			Leftovers: func(t *testing.T) []string { return partialFiles(t, dir) },
		}
	})
}

// partialFiles lists the files under dir that are not a version's, its
// metadata or a key's pointer: partial uploads and temporary files.
func partialFiles(tb testing.TB, dir string) []string {
	tb.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d iofs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		name := d.Name()
		if !strings.HasSuffix(name, ".data") && !strings.HasSuffix(name, ".json") && name != "current" {
			out = append(out, strings.TrimPrefix(path, dir+string(os.PathSeparator)))
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("walking %s: %v", dir, err)
	}
	return out
}
