package fs

import (
	"context"
	"crypto/md5"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	iofs "io/fs"
	"os"
	"strings"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/storage"
)

// Resumable uploads (storage.Uploader) write a partial file in the key's
// own directory, named .upload-<uuid>: no reader ever opens a name that
// is not <version>.data, <version>.json or current, so nobody sees it,
// and its rename into <version>.data at UploadFinish is atomic. The MD5
// of the ETag travels in the upload's state beside the SHA-256, so that
// neither is computed twice over any byte.

const (
	uploadPrefix = ".upload-"
	// partialMode lets the partial file be opened for writing again by
	// the next append; UploadFinish makes it read-only like every version.
	partialMode = 0o640
)

// uploadState is the fs store's Upload.State.
type uploadState struct {
	// File is the partial file's name in the key's directory.
	File string `json:"file"`
	// MD5 is the marshaled state of the ETag's MD5 of the bytes so far.
	MD5 []byte `json:"md5"`
}

// UploadBegin creates the partial file of an upload of size bytes into
// key. Errors: storage.ErrInvalidKey; storage.ErrInvalid for a negative
// size; storage.ErrTimeout, storage.ErrUnavailable.
func (s *Store) UploadBegin(ctx context.Context, bucket, key string, size int64, contentType string) (storage.Upload, error) {
	if err := ctx.Err(); err != nil {
		return storage.Upload{}, translateWrite("upload begin", err)
	}
	if size < 0 {
		return storage.Upload{}, fmt.Errorf("fs upload begin: %w: negative size %d", storage.ErrInvalid, size)
	}
	obj, err := s.locate(bucket, key)
	if err != nil {
		return storage.Upload{}, err
	}
	if contentType == "" {
		contentType = DefaultContentType
	}
	if err := s.makeDir(obj.dir); err != nil {
		return storage.Upload{}, translateWrite("upload begin", err)
	}
	st := uploadState{File: uploadPrefix + uuid.Must(uuid.NewV7()).String(), MD5: marshal(md5.New())}
	f, err := s.root.OpenFile(obj.file(st.File), os.O_WRONLY|os.O_CREATE|os.O_EXCL, partialMode)
	if err != nil {
		return storage.Upload{}, translateWrite("upload begin", err)
	}
	if err := f.Close(); err != nil {
		_ = s.root.Remove(obj.file(st.File))
		return storage.Upload{}, translateWrite("upload begin", err)
	}
	if err := s.syncDir(obj.dir); err != nil {
		_ = s.root.Remove(obj.file(st.File))
		return storage.Upload{}, translateWrite("upload begin sync dir", err)
	}
	state, err := json.Marshal(st)
	if err != nil {
		return storage.Upload{}, fmt.Errorf("fs upload begin: %w", err)
	}
	return storage.Upload{Bucket: obj.bucket, Key: obj.key, ContentType: contentType, Size: size,
		SHA256: storage.NewSHA256State(), State: state}, nil
}

// UploadAppend writes body at u.Offset of the partial file through Put's
// buffer and digests (copyBody), then makes it durable (fsync) before it
// answers: the Upload it returns names only bytes that survive a crash.
// It first cuts the file back to u.Offset, dropping what a failed append
// wrote beyond it. Errors: as storage.Uploader.
func (s *Store) UploadAppend(ctx context.Context, u storage.Upload, body io.Reader) (storage.Upload, error) {
	if err := ctx.Err(); err != nil {
		return u, translateWrite("upload append", err)
	}
	obj, st, err := s.resume(u)
	if err != nil {
		return u, err
	}
	etag, err := unmarshalMD5(st.MD5)
	if err != nil {
		return u, err
	}
	sum, err := storage.ResumeSHA256(u.SHA256)
	if err != nil {
		return u, err
	}
	f, err := s.root.OpenFile(obj.file(st.File), os.O_WRONLY, 0)
	if err != nil {
		return u, translate("upload append", err)
	}
	defer f.Close()
	if err := f.Truncate(u.Offset); err != nil {
		return u, translateWrite("upload append truncate", err)
	}
	if _, err := f.Seek(u.Offset, io.SeekStart); err != nil {
		return u, translateWrite("upload append seek", err)
	}
	left := u.Size - u.Offset
	// One byte beyond what is left shows a body that is too long.
	n, err := copyBody(ctx, f, etag, sum, io.LimitReader(body, left+1), -1)
	if err != nil {
		return u, err
	}
	if n > left {
		return u, fmt.Errorf("fs upload append: %w: body is longer than the %d bytes left of %d", storage.ErrInvalid, left, u.Size)
	}
	if err := f.Sync(); err != nil {
		return u, translateWrite("upload append sync", err)
	}
	if err := f.Close(); err != nil {
		return u, translateWrite("upload append close", err)
	}
	st.MD5 = marshal(etag)
	state, err := json.Marshal(st)
	if err != nil {
		return u, fmt.Errorf("fs upload append: %w", err)
	}
	out := u
	out.Offset, out.SHA256, out.State = u.Offset+n, storage.SHA256State(sum), state
	return out, nil
}

// UploadFinish renames the partial file into a new version's data file
// and ends as Put does (metadata, then the current pointer), with the
// digests the appends carried. Errors: as storage.Uploader.
func (s *Store) UploadFinish(ctx context.Context, u storage.Upload) (storage.Version, error) {
	if err := ctx.Err(); err != nil {
		return storage.Version{}, translateWrite("upload finish", err)
	}
	if u.Offset != u.Size {
		return storage.Version{}, fmt.Errorf("fs upload finish: %w: %d of %d bytes uploaded", storage.ErrInvalid, u.Offset, u.Size)
	}
	obj, st, err := s.resume(u)
	if err != nil {
		return storage.Version{}, err
	}
	etag, err := unmarshalMD5(st.MD5)
	if err != nil {
		return storage.Version{}, err
	}
	sum, err := storage.ResumeSHA256(u.SHA256)
	if err != nil {
		return storage.Version{}, err
	}
	partial := obj.file(st.File)
	fi, err := s.root.Stat(partial)
	if err != nil {
		return storage.Version{}, translate("upload finish", err)
	}
	if fi.Size() != u.Size {
		// A failed append wrote past the end that was kept: those bytes
		// are not the upload's.
		if err := s.truncate(partial, u.Size); err != nil {
			return storage.Version{}, translateWrite("upload finish truncate", err)
		}
	}
	if err := s.root.Chmod(partial, fileMode); err != nil {
		return storage.Version{}, translateWrite("upload finish", err)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return storage.Version{}, fmt.Errorf("fs upload finish: %w: version id: %w", storage.ErrUnavailable, err)
	}
	vid := id.String()
	if err := s.root.Rename(partial, obj.file(vid+dataSuffix)); err != nil {
		return storage.Version{}, translateWrite("upload finish rename", err)
	}
	if err := s.syncDir(obj.dir); err != nil {
		s.discard(obj, vid)
		return storage.Version{}, translateWrite("upload finish sync dir", err)
	}
	return s.publish(obj, vid, u.Size, sums{md5: etag.Sum(nil), sha256: sum.Sum(nil)}, u.ContentType)
}

// UploadAbort removes the partial file. Errors: storage.ErrTimeout,
// storage.ErrUnavailable.
func (s *Store) UploadAbort(ctx context.Context, u storage.Upload) error {
	if err := ctx.Err(); err != nil {
		return translateWrite("upload abort", err)
	}
	obj, st, err := s.resume(u)
	if err != nil {
		return err
	}
	if err := s.root.Remove(obj.file(st.File)); err != nil && !errors.Is(err, iofs.ErrNotExist) {
		return translateWrite("upload abort", err)
	}
	return nil
}

// resume checks that u is an upload of this store and returns where its
// partial file lives. The name comes from a database, but it must never be
// able to name another file than a partial one.
func (s *Store) resume(u storage.Upload) (object, uploadState, error) {
	var st uploadState
	if err := json.Unmarshal(u.State, &st); err != nil {
		return object{}, st, fmt.Errorf("fs upload: %w: state: %v", storage.ErrInvalid, err)
	}
	id, ok := strings.CutPrefix(st.File, uploadPrefix)
	if !ok || !validVersionID(id) {
		return object{}, st, fmt.Errorf("fs upload: %w: state names no partial file", storage.ErrInvalid)
	}
	if u.Offset < 0 || u.Offset > u.Size {
		return object{}, st, fmt.Errorf("fs upload: %w: offset %d outside a %d-byte upload", storage.ErrInvalid, u.Offset, u.Size)
	}
	obj, err := s.locate(u.Bucket, u.Key)
	return obj, st, err
}

// truncate cuts the file name to size bytes and makes that durable.
func (s *Store) truncate(name string, size int64) error {
	f, err := s.root.OpenFile(name, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Truncate(size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func marshal(h hash.Hash) []byte {
	b, err := h.(encoding.BinaryMarshaler).MarshalBinary()
	if err != nil {
		panic("fs: crypto/md5 cannot marshal its state: " + err.Error())
	}
	return b
}

func unmarshalMD5(state []byte) (hash.Hash, error) {
	h := md5.New()
	if err := h.(encoding.BinaryUnmarshaler).UnmarshalBinary(state); err != nil {
		return nil, fmt.Errorf("fs upload: %w: MD5 state: %v", storage.ErrInvalid, err)
	}
	return h, nil
}
