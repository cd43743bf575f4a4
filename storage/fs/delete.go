package fs

import (
	"context"
	"errors"
	"fmt"
	iofs "io/fs"
	"strings"

	"github.com/dlgate/dlgate/storage"
)

// Delete removes version v of its key: its data and metadata files, after
// moving the key's pointer off it when it was the current version (to the
// newest version left, or away when none is). Other versions' files are
// never touched. The key's directory stays, even empty: removing it would
// race with a Put that just created it.
//
// The data file goes before the metadata, so that a crash in between
// leaves a version that Stat still finds (and Delete finishes), never
// bytes that no metadata names.
//
// Errors: storage.ErrNotFound when the version does not exist;
// storage.ErrChanged when its ETag is not v's; storage.ErrInvalidKey;
// storage.ErrTimeout; storage.ErrUnavailable.
func (s *Store) Delete(ctx context.Context, v storage.Version) error {
	if err := ctx.Err(); err != nil {
		return translate("delete", err)
	}
	obj, err := s.locate(v.Bucket, v.Key)
	if err != nil {
		return err
	}
	got, err := s.readMeta(obj, v.VersionID)
	if err != nil {
		return err
	}
	if v.ETag != "" && got.ETag != v.ETag {
		return fmt.Errorf("fs delete: %w: have %s, asked to delete %s", storage.ErrChanged, got.ETag, v.ETag)
	}
	if err := s.unpoint(obj, v.VersionID); err != nil {
		return translateWrite("delete: move current version", err)
	}
	s.metas.removeIf(metaKey{obj.bucket, obj.key, v.VersionID}, func(storage.Version) bool { return true })
	if err := s.root.Remove(obj.file(v.VersionID + dataSuffix)); err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return translateWrite("delete data", err)
	}
	if err := s.root.Remove(obj.file(v.VersionID + metaSuffix)); err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return translateWrite("delete metadata", err)
	}
	return translateWrite("delete sync dir", s.syncDir(obj.dir))
}

// unpoint moves obj's pointer off vid, when it names vid, to the newest
// other version (version ids are UUIDv7: their text sorts by time), or
// removes it when no other version is left.
//
// A Put of the same key may move the pointer at the same moment. Its
// metadata lands before its pointer, so after changing the pointer this
// looks again: a version newer than the one it chose is made current, and
// whichever of the two writes lands last then names it.
func (s *Store) unpoint(obj object, vid string) error {
	cur, err := s.readCurrent(obj)
	if errors.Is(err, storage.ErrNotFound) {
		return nil
	}
	if err != nil || cur != vid {
		return err
	}
	chosen := ""
	for range 3 {
		newest, err := s.newestVersion(obj, vid)
		if err != nil || (newest == chosen && chosen != "") {
			return err
		}
		if newest == "" {
			if err := s.root.Remove(obj.file(currentFile)); err != nil && !errors.Is(err, iofs.ErrNotExist) {
				return err
			}
		} else if err := s.writeFileAtomic(obj.dir, currentFile, []byte(newest+"\n")); err != nil {
			return err
		}
		if newest == "" {
			// Look once more for a version a Put wrote meanwhile.
			if again, err := s.newestVersion(obj, vid); err != nil || again == "" {
				return err
			}
			continue
		}
		chosen = newest
	}
	return nil
}

// newestVersion returns the id of the newest version of obj other than
// except whose metadata exists, or "" when there is none.
func (s *Store) newestVersion(obj object, except string) (string, error) {
	d, err := s.root.Open(obj.dir)
	if err != nil {
		return "", err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return "", err
	}
	newest := ""
	for _, name := range names {
		id, ok := strings.CutSuffix(name, metaSuffix)
		if ok && id != except && validVersionID(id) && id > newest {
			newest = id
		}
	}
	return newest, nil
}
