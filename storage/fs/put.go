package fs

import (
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	iofs "io/fs"
	"path"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/storage"
)

// copyBufSize is the fixed buffer a Put streams through; one per Put in
// flight, recycled. Each write is a whole buffer (but the last): the page
// cache then holds the file in large folios, and sendfile from it walks a
// sixteenth of the entries it walks for a file written in the 16–32 KiB
// pieces a request body arrives in (filemap_get_read_batch: 3 % of the
// gateway's CPU on 1 GiB downloads, against 0.7 % in nginx's for a file
// written in 1 MiB writes).
const copyBufSize = 1 << 20

var copyBufs = sync.Pool{New: func() any { b := make([]byte, copyBufSize); return &b }}

// DefaultContentType is recorded when Put is given no content type.
const DefaultContentType = "application/octet-stream"

// Put streams body into a new version of key and makes it the current
// one. size is the exact body length, or -1 when unknown; a body shorter
// or longer than a known size is refused and leaves nothing behind. The
// ETag is the quoted hex MD5 of the bytes, as S3 gives for a single-part
// upload; SHA256 is their SHA-256, computed in the same pass and kept in
// the version's metadata.
//
// Errors: storage.ErrInvalidKey; storage.ErrTimeout when ctx's deadline
// passes; storage.ErrUnavailable on I/O errors; an error wrapping
// io.ErrUnexpectedEOF when body ends before size bytes, storage.ErrTooLong
// when it goes on after them; the body's own read error, wrapped.
func (s *Store) Put(ctx context.Context, bucket, key string, body io.Reader, size int64, contentType string) (storage.Version, error) {
	if err := ctx.Err(); err != nil {
		return storage.Version{}, translateWrite("put", err)
	}
	if size < -1 {
		return storage.Version{}, fmt.Errorf("fs put: negative size %d", size)
	}
	obj, err := s.locate(bucket, key)
	if err != nil {
		return storage.Version{}, err
	}
	if contentType == "" {
		contentType = DefaultContentType
	}
	id, err := uuid.NewV7()
	if err != nil {
		return storage.Version{}, fmt.Errorf("fs put: %w: version id: %w", storage.ErrUnavailable, err)
	}
	vid := id.String()
	if err := s.makeDir(obj.dir); err != nil {
		return storage.Version{}, translateWrite("put", err)
	}

	n, sums, err := s.writeData(ctx, obj, vid, body, size)
	if err != nil {
		return storage.Version{}, err
	}
	return s.publish(obj, vid, n, sums, contentType)
}

// publish writes the metadata of version vid of obj, whose data file of n
// bytes with digests sums is in place, and makes it the current version;
// when it fails, the version's files are removed. Put and UploadFinish
// end with it.
func (s *Store) publish(obj object, vid string, n int64, sums sums, contentType string) (storage.Version, error) {
	m := meta{
		Bucket:       obj.bucket,
		Key:          obj.key,
		VersionID:    vid,
		Size:         n,
		ETag:         `"` + hex.EncodeToString(sums.md5) + `"`,
		ContentType:  contentType,
		LastModified: s.now().UTC().Truncate(timeResolution),
		SHA256:       hex.EncodeToString(sums.sha256),
	}
	doc, err := json.Marshal(m)
	if err != nil {
		s.discard(obj, vid)
		return storage.Version{}, fmt.Errorf("fs put: encode metadata: %w", err)
	}
	// Metadata lands before the pointer moves, so whoever reads the
	// pointer finds a complete version.
	if err := s.writeFileAtomic(obj.dir, vid+metaSuffix, doc); err != nil {
		s.discard(obj, vid)
		return storage.Version{}, translateWrite("put metadata", err)
	}
	if err := s.writeFileAtomic(obj.dir, currentFile, []byte(vid+"\n")); err != nil {
		// When only the directory sync failed the pointer did move; the
		// version is then live and must stay.
		if cur, cerr := s.readCurrent(obj); cerr != nil || cur != vid {
			s.discard(obj, vid)
		}
		return storage.Version{}, translateWrite("put pointer", err)
	}
	return m.version(), nil
}

// timeResolution matches S3 and HTTP dates, so that both stores report the
// same LastModified and If-Range dates compare equal.
const timeResolution = time.Second

// sums are the digests of a version's bytes: MD5 for the ETag, SHA-256
// for the digest a download announces (sha256 nil when not computed).
type sums struct{ md5, sha256 []byte }

// writeData copies body into <vid>.data and returns its size and digests.
func (s *Store) writeData(ctx context.Context, obj object, vid string, body io.Reader, size int64) (int64, sums, error) {
	tmp, f, err := s.createTemp(obj.dir)
	if err != nil {
		return 0, sums{}, translateWrite("put", err)
	}
	etag := md5.New()
	var sum hash.Hash
	if !s.noDigest {
		sum = sha256.New()
	}
	n, err := copyBody(ctx, f, etag, sum, body, size)
	if err == nil {
		err = translateWrite("put sync", f.Sync())
	}
	if cerr := f.Close(); err == nil && cerr != nil {
		err = translateWrite("put close", cerr)
	}
	if err == nil {
		err = translateWrite("put rename", s.root.Rename(tmp, obj.file(vid+dataSuffix)))
	}
	if err != nil {
		_ = s.root.Remove(tmp)
		return 0, sums{}, err
	}
	if err := s.syncDir(obj.dir); err != nil {
		s.discard(obj, vid)
		return 0, sums{}, translateWrite("put sync dir", err)
	}
	out := sums{md5: etag.Sum(nil)}
	if sum != nil {
		out.sha256 = sum.Sum(nil)
	}
	return n, out, nil
}

// copyBody copies body to w, etag and sum (when not nil) through a fixed
// buffer, checking ctx between reads and enforcing a known size in both
// directions. sum is fed on a goroutine of its own while etag and w take
// the same block: MD5 (about 300 MB/s on the machines measured, SHA-256
// with the CPU's SHA extensions 1.6 GB/s) is the slowest step of a Put,
// and SHA-256 beside it on a second core costs the upload a few per cent
// of its time (BenchmarkPut; docs/design.md, "Verified downloads").
func copyBody(ctx context.Context, w io.Writer, etag, sum hash.Hash, body io.Reader, size int64) (int64, error) {
	bufp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bufp)
	buf := *bufp

	src := body
	if size >= 0 {
		// A longer body means the caller's size was wrong; storing a
		// prefix would pin bytes nobody meant to upload.
		src = &storage.ExactReader{R: body, N: size, Whole: true}
	}
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return n, translateWrite("put", err)
		}
		nr, rerr := io.ReadFull(src, buf)
		if rerr == io.ErrUnexpectedEOF {
			rerr = io.EOF
		}
		if nr > 0 {
			block := buf[:nr]
			var wg sync.WaitGroup
			if sum != nil {
				wg.Go(func() { sum.Write(block) })
			}
			etag.Write(block)
			_, werr := w.Write(block)
			wg.Wait() // before the buffer is read into again
			if werr != nil {
				return n, translateWrite("put write", werr)
			}
			n += int64(nr)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return n, fmt.Errorf("fs put: reading body: %w", rerr)
		}
	}
	return n, nil
}

// makeDir creates obj's directory, making new directory entries durable
// up to the root.
func (s *Store) makeDir(dir string) error {
	if _, err := s.root.Stat(dir); err == nil {
		return nil
	} else if !errors.Is(err, iofs.ErrNotExist) {
		return err
	}
	if err := s.root.MkdirAll(dir, dirMode); err != nil {
		return err
	}
	for d := path.Dir(dir); ; d = path.Dir(d) {
		if err := s.syncDir(d); err != nil {
			return err
		}
		if d == "." {
			return nil
		}
	}
}

// discard removes the files of a version whose Put failed before the
// pointer moved: nobody can know its id, so nothing is rewritten.
func (s *Store) discard(obj object, vid string) {
	_ = s.root.Remove(obj.file(vid + metaSuffix))
	_ = s.root.Remove(obj.file(vid + dataSuffix))
}
