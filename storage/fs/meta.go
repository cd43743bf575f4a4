package fs

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path"
	"time"

	"github.com/dlgate/dlgate/storage"
)

const (
	currentFile = "current"
	dataSuffix  = ".data"
	metaSuffix  = ".json"
	tempPrefix  = ".tmp-"

	// maxMetaSize bounds what Stat reads from a metadata file: a 1024-byte
	// key escapes to at most 6 KiB of JSON, so more means a damaged file.
	maxMetaSize = 64 << 10
	// Version files are read-only: nothing ever writes to them again.
	fileMode = 0o444
	dirMode  = 0o750
)

// meta is the <version>.json document.
type meta struct {
	Bucket       string    `json:"bucket"`
	Key          string    `json:"key"`
	VersionID    string    `json:"version_id"`
	Size         int64     `json:"size"`
	ETag         string    `json:"etag"`
	ContentType  string    `json:"content_type"`
	LastModified time.Time `json:"last_modified"`
	// SHA256 is absent from versions stored before the store computed it.
	SHA256 string `json:"sha256,omitempty"`
}

func (m meta) version() storage.Version {
	return storage.Version{
		Bucket:       m.Bucket,
		Key:          m.Key,
		VersionID:    m.VersionID,
		Size:         m.Size,
		ETag:         m.ETag,
		ContentType:  m.ContentType,
		LastModified: m.LastModified,
		SHA256:       m.SHA256,
	}
}

// readCurrent returns the id in obj's pointer file. Errors:
// storage.ErrNotFound when the key has no version, storage.ErrUnavailable.
func (s *Store) readCurrent(obj object) (string, error) {
	b, err := s.readSmall(obj.file(currentFile), 128)
	if err != nil {
		return "", translate("read current version", err)
	}
	vid := string(bytes.TrimSpace(b))
	if !validVersionID(vid) {
		return "", fmt.Errorf("fs: %w: damaged pointer %s", storage.ErrUnavailable, obj.file(currentFile))
	}
	return vid, nil
}

// readMeta returns the metadata of version vid of obj. Errors:
// storage.ErrNotFound, storage.ErrUnavailable.
func (s *Store) readMeta(obj object, vid string) (storage.Version, error) {
	if !validVersionID(vid) {
		// No file can have this name, and it must not become a path.
		return storage.Version{}, fmt.Errorf("fs: %w: malformed version id", storage.ErrNotFound)
	}
	b, err := s.readSmall(obj.file(vid+metaSuffix), maxMetaSize)
	if err != nil {
		return storage.Version{}, translate("read metadata", err)
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return storage.Version{}, fmt.Errorf("fs: %w: damaged metadata %s: %w", storage.ErrUnavailable, obj.file(vid+metaSuffix), err)
	}
	if m.Key != obj.key || m.Bucket != obj.bucket || m.VersionID != vid {
		// Only a directory copied by hand (or a SHA-256 collision) gets
		// here; the version does not belong to this key.
		return storage.Version{}, fmt.Errorf("fs: %w: metadata %s names another object", storage.ErrNotFound, obj.file(vid+metaSuffix))
	}
	return m.version(), nil
}

func (s *Store) readSmall(name string, limit int64) ([]byte, error) {
	f, err := s.root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, limit)
	}
	return b, nil
}

// writeFileAtomic creates name in dir with content b so that readers see
// either no file, the previous one, or all of b: temp file, fsync, rename,
// fsync of the directory.
func (s *Store) writeFileAtomic(dir, name string, b []byte) error {
	tmp, f, err := s.createTemp(dir)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = s.root.Rename(tmp, path.Join(dir, name))
	}
	if err != nil {
		_ = s.root.Remove(tmp)
		return err
	}
	return s.syncDir(dir)
}

// createTemp creates a new, exclusive temp file in dir. Temp files share
// the directory of their final name so that rename is atomic.
func (s *Store) createTemp(dir string) (string, *os.File, error) {
	var rnd [12]byte
	_, _ = rand.Read(rnd[:])
	name := path.Join(dir, tempPrefix+hex.EncodeToString(rnd[:]))
	f, err := s.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
	if err != nil {
		return "", nil, err
	}
	return name, f, nil
}

// syncDir makes the entries of dir (creations and renames) durable.
func (s *Store) syncDir(dir string) error {
	d, err := s.root.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// metas is the cache of the metadata of versions Open has read
// (Store.metas). A version never changes once written and its id is never
// reused, so an entry stays true for as long as the version exists; Open
// still opens the data file and checks its size, so a version deleted
// meanwhile is still not found. Reading the metadata file was most of
// Open's cost: a path walk under os.Root, a read and a JSON decode for
// every download.
type metaKey struct{ bucket, key, vid string }

// metaCacheSize bounds it: at about 300 bytes an entry, 3 MiB.
const metaCacheSize = 10000

// openMeta is readMeta through the cache.
func (s *Store) openMeta(obj object, vid string) (storage.Version, error) {
	k := metaKey{obj.bucket, obj.key, vid}
	if v, ok := s.metas.get(k); ok {
		return v, nil
	}
	v, err := s.readMeta(obj, vid)
	if err == nil {
		s.metas.put(k, v)
	}
	return v, err
}
