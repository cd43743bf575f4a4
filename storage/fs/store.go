// Package fs is a storage.Store on a local directory of write-once files.
//
// Every Put writes a new version that is never modified afterwards; a
// per-key pointer file names the current version and is replaced
// atomically. The layout under the root is
//
//	<bucket>/<h[0:2]>/<h>/<version>.data   object bytes
//	<bucket>/<h[0:2]>/<h>/<version>.json   metadata (key, size, ETag, ...)
//	<bucket>/<h[0:2]>/<h>/current          id of the current version
//
// where h is the hex SHA-256 of the key, so that no key can collide with
// another key's directory ("a" versus "a/b") or name a path of its own.
// All file access goes through an os.Root, so symbolic links planted under
// the root cannot lead outside it.
package fs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	iofs "io/fs"
	"os"
	"path"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/storage"
)

// DefaultBucket is the bucket used when a caller passes bucket "".
const DefaultBucket = "local"

// The store and the abilities it has, composed once here (STYLE: tusd's
// StoreComposer): the gateway finds them by type assertion.
var (
	_ storage.Store    = (*Store)(nil)
	_ storage.Pinger   = (*Store)(nil)
	_ storage.Deleter  = (*Store)(nil)
	_ storage.Uploader = (*Store)(nil)
)

// Store is a write-once object store in a local directory. It is safe for
// concurrent use, also by several processes sharing the directory.
type Store struct {
	root          *os.Root
	path          string
	defaultBucket string
	now           func() time.Time
	metas         cache[metaKey, storage.Version]
	dirs          cache[string, *os.File]
	places        cache[[2]string, object] // locate's answers: bucket and key → object
	// noDigest leaves the SHA-256 out of Put, for BenchmarkPut's
	// comparison only (export_test.go).
	noDigest bool
}

// Option configures New.
type Option func(*Store)

// WithDefaultBucket sets the bucket that bucket "" stands for (default
// DefaultBucket).
func WithDefaultBucket(name string) Option {
	return func(s *Store) { s.defaultBucket = name }
}

// WithClock sets the clock that stamps LastModified on new versions.
func WithClock(now func() time.Time) Option {
	return func(s *Store) { s.now = now }
}

// New opens (creating it if needed) the store rooted at dir. It returns
// an error when dir cannot be created or opened, or when the default
// bucket name is invalid (wrapping storage.ErrInvalidKey).
func New(dir string, opts ...Option) (*Store, error) {
	s := &Store{path: dir, defaultBucket: DefaultBucket, now: time.Now,
		metas: cache[metaKey, storage.Version]{size: metaCacheSize}, places: cache[[2]string, object]{size: placeCacheSize},
		dirs: cache[string, *os.File]{size: dirCacheSize, release: func(d *os.File) { d.Close() }}}
	for _, opt := range opts {
		opt(s)
	}
	if err := storage.ValidateBucket(s.defaultBucket); err != nil {
		return nil, fmt.Errorf("fs: default bucket: %w", err)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("fs: create root: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("fs: open root: %w", err)
	}
	s.root = root
	return s, nil
}

// Close releases the root directory. The Store must not be used after.
func (s *Store) Close() error {
	s.dirs.clear()
	return s.root.Close()
}

// Ping reports whether the root directory is still reachable under the
// path it was opened with. It returns an error wrapping
// storage.ErrUnavailable otherwise.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return translate("ping", err)
	}
	held, err := s.root.Stat(".")
	if err != nil {
		return translate("ping", err)
	}
	// The Root holds a descriptor, which keeps working when the directory
	// is deleted or a volume is unmounted beneath it; the path tells.
	named, err := os.Stat(s.path)
	if err != nil {
		return fmt.Errorf("fs ping: %w: %w", storage.ErrUnavailable, err)
	}
	if !os.SameFile(held, named) {
		return fmt.Errorf("fs ping: %w: root %s was moved or replaced", storage.ErrUnavailable, s.path)
	}
	return nil
}

// Stat returns the metadata of ref's version, or of the current version
// when ref.VersionID is empty. Errors: storage.ErrInvalidKey,
// storage.ErrNotFound, storage.ErrTimeout (deadline passed),
// storage.ErrUnavailable (I/O error).
func (s *Store) Stat(ctx context.Context, ref storage.Ref) (storage.Version, error) {
	if err := ctx.Err(); err != nil {
		return storage.Version{}, translate("stat", err)
	}
	obj, err := s.locate(ref.Bucket, ref.Key)
	if err != nil {
		return storage.Version{}, err
	}
	vid := ref.VersionID
	if vid == "" {
		vid, err = s.readCurrent(obj)
		if err != nil {
			return storage.Version{}, err
		}
	}
	return s.readMeta(obj, vid)
}

// object is a validated key and where its files live.
type object struct {
	bucket string
	key    string
	dir    string // relative to the root
}

// locate finds the directory of bucket's key, checking both names. Its
// answers are kept (a key's SHA-256, its hex and a path each time were
// about 2 % of the gateway's CPU on 64 KiB ranges); a refusal is not.
func (s *Store) locate(bucket, key string) (object, error) {
	if bucket == "" {
		bucket = s.defaultBucket
	}
	k := [2]string{bucket, key}
	if o, ok := s.places.get(k); ok {
		return o, nil
	}
	o, err := place(bucket, key)
	if err == nil {
		s.places.put(k, o)
	}
	return o, err
}

// placeCacheSize bounds locate's answers kept.
const placeCacheSize = 4096

// place is locate's answer, worked out.
func place(bucket, key string) (object, error) {
	if err := storage.ValidateBucket(bucket); err != nil {
		return object{}, fmt.Errorf("fs: %w", err)
	}
	if err := storage.ValidateKey(key); err != nil {
		return object{}, fmt.Errorf("fs: %w", err)
	}
	sum := sha256.Sum256([]byte(key))
	h := hex.EncodeToString(sum[:])
	// Two hex characters of fan-out keep directories small without
	// another level of fsyncs.
	return object{bucket: bucket, key: key, dir: path.Join(bucket, h[:2], h)}, nil
}

func (o object) file(name string) string { return path.Join(o.dir, name) }

// validVersionID reports whether id is a version id this store could have
// written. Ids come from links and callers, and must never be able to name
// another path.
func validVersionID(id string) bool {
	u, err := uuid.Parse(id)
	return err == nil && u.String() == id
}

// translate maps file-system and context errors to storage errors, keeping
// the cause for logs.
func translate(op string, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("fs %s: %w: %w", op, storage.ErrTimeout, err)
	case errors.Is(err, context.Canceled):
		return fmt.Errorf("fs %s: %w", op, err)
	case errors.Is(err, iofs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("fs %s: %w: %w", op, storage.ErrNotFound, err)
	default:
		return fmt.Errorf("fs %s: %w: %w", op, storage.ErrUnavailable, err)
	}
}

// translateWrite is translate for writes, where nothing is "not found": a
// directory missing under a write means the store is broken.
func translateWrite(op string, err error) error {
	if errors.Is(err, iofs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return fmt.Errorf("fs %s: %w: %w", op, storage.ErrUnavailable, err)
	}
	return translate(op, err)
}
