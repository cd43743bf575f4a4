package fs

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/dlgate/dlgate/storage"
)

// Open returns a reader of length bytes of version v from offset. The
// reader implements storage.Filer and io.WriterTo, so copying it into an
// http.ResponseWriter lets the kernel sendfile.
//
// Errors: storage.ErrInvalidKey; storage.ErrNotFound when the version does
// not exist; storage.ErrChanged when its recorded size or ETag differ from
// v, or its file no longer has the recorded size; storage.ErrTimeout,
// storage.ErrUnavailable; a plain error when offset and length do not fit
// in v.Size.
func (s *Store) Open(ctx context.Context, v storage.Version, offset, length int64) (io.ReadCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, translate("open", err)
	}
	obj, err := s.locate(v.Bucket, v.Key)
	if err != nil {
		return nil, err
	}
	if offset < 0 || length < 0 || offset > v.Size || length > v.Size-offset {
		return nil, fmt.Errorf("fs open: range %d+%d outside a %d-byte object", offset, length, v.Size)
	}
	got, err := s.openMeta(obj, v.VersionID)
	if err != nil {
		return nil, err
	}
	if got.Size != v.Size || got.ETag != v.ETag {
		return nil, fmt.Errorf("fs open: %w: have %d bytes %s, pinned %d bytes %s",
			storage.ErrChanged, got.Size, got.ETag, v.Size, v.ETag)
	}

	f, err := s.openData(obj, v.VersionID+dataSuffix)
	if err != nil {
		return nil, translate("open", err)
	}
	if err := checkData(f, got.Size); err != nil {
		f.Close()
		return nil, err
	}
	// A file just opened is at offset 0.
	if offset != 0 {
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			f.Close()
			return nil, translate("open seek", err)
		}
	}
	return &reader{f: f, ExactReader: storage.ExactReader{R: f, N: length, Short: storage.ErrChanged}}, nil
}

// checkData refuses a data file that is not a regular file of the recorded
// size: a FIFO or device would hang or lie, a truncated file would send a
// short body under a promised Content-Length.
func checkData(f *os.File, size int64) error {
	fi, err := f.Stat()
	if err != nil {
		return translate("open stat", err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("fs open: %w: %s is not a regular file", storage.ErrUnavailable, f.Name())
	}
	if fi.Size() != size {
		return fmt.Errorf("fs open: %w: %s has %d bytes, metadata says %d", storage.ErrChanged, f.Name(), fi.Size(), size)
	}
	return nil
}

var (
	_ storage.Filer = (*reader)(nil)
	_ io.WriterTo   = (*reader)(nil)
)

// reader reads n bytes of f from its current offset; a file cut short
// since Open checked its size is storage.ErrChanged.
type reader struct {
	f *os.File
	storage.ExactReader
}

// File returns the underlying file, positioned where the next Read would
// start (the offset given to Open, until Read is called).
func (r *reader) File() *os.File { return r.f }

// WriteTo copies the rest through storage.CopyFile, whose
// io.LimitedReader over the *os.File (*net.TCPConn).ReadFrom and the HTTP
// response writer turn into sendfile.
func (r *reader) WriteTo(w io.Writer) (int64, error) {
	n, err := storage.CopyFile(w, r.f, r.N)
	r.N -= n
	return n, err
}

func (r *reader) Close() error { return r.f.Close() }

// dirs (Store.dirs) keeps the object directories Open has used open:
// opening a data file through the store's root walks every path component
// (bucket, fan-out, key hash, file: four openat calls and three closes),
// relative to its open directory it is one openat (openLeaf). That walk
// was most of Open's cost on small session ranges. An evicted directory
// is closed; opens in flight on it finish first.

// dirCacheSize bounds the directories kept open (one descriptor each).
const dirCacheSize = 128

// openData opens the file name of obj's directory for reading, relative
// to the directory's cached descriptor when there is one. A miss there
// (the directory was replaced by hand since it was cached, the file is a
// symbolic link) is retried through the store's root, which sees what is
// on disk now.
func (s *Store) openData(obj object, name string) (*os.File, error) {
	if dir, ok := s.dirs.get(obj.dir); ok {
		f, err := openLeaf(dir, obj.dir, name)
		if err == nil {
			return f, nil
		}
		s.dirs.removeIf(obj.dir, func(d *os.File) bool { return d == dir })
	}
	f, err := s.root.OpenFile(obj.file(name), os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	if dir, err := s.root.Open(obj.dir); err == nil {
		s.dirs.put(obj.dir, dir)
	}
	return f, nil
}
