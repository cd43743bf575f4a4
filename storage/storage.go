// Package storage defines how the gateway reads and writes immutable object
// versions. Implementations live in storage/fs (local write-once files) and
// storage/s3 (any S3-compatible server with versioning).
package storage

import (
	"context"
	"errors"
	"io"
	"os"
	"time"
)

// Errors returned by every Store. Implementations translate their own errors
// (SDK error codes, syscall errors) into these at the boundary, so callers
// can use errors.Is.
var (
	// ErrNotFound: the key, or the named version of it, does not exist.
	ErrNotFound = errors.New("storage: object not found")
	// ErrChanged: the stored object no longer matches the pinned version
	// (ETag mismatch on a bucket without versioning).
	ErrChanged = errors.New("storage: object changed since it was pinned")
	// ErrInvalidKey: the key is empty, absolute, contains "..", NUL, or
	// would otherwise escape the store.
	ErrInvalidKey = errors.New("storage: invalid key")
	// ErrTimeout: the store did not answer in time.
	ErrTimeout = errors.New("storage: timeout")
	// ErrUnavailable: the store failed (5xx, connection refused, I/O error).
	ErrUnavailable = errors.New("storage: unavailable")
	// ErrInvalid: the store refused the request itself as invalid (an S3
	// 400 such as InvalidArgument or EntityTooLarge): the caller's input,
	// not the store's health, so retrying the same request cannot help.
	// A refused key is ErrInvalidKey instead.
	ErrInvalid = errors.New("storage: request refused as invalid")
)

// Ref names an object. An empty VersionID means "the current version"
// (Stat resolves it); Open always needs a pinned Version.
type Ref struct {
	Bucket    string
	Key       string
	VersionID string
}

// Version is one immutable, pinned object version with the metadata the
// gateway records on a link so that downloads need no metadata request.
type Version struct {
	Bucket       string
	Key          string
	VersionID    string // "null" for an S3 bucket without versioning
	Size         int64
	ETag         string // strong ETag, with its quotes: "\"abc\""
	ContentType  string
	LastModified time.Time // zero when unknown
	// SHA256 is the lowercase hex SHA-256 of the whole object, "" when the
	// store does not know it: Put computes it in the upload's one pass;
	// Stat reports the store's own full-object checksum (never a
	// per-part composite, never one made up).
	SHA256 string
}

// Store is what the gateway needs from object storage.
type Store interface {
	// Stat returns the metadata of ref's version (the current one when
	// ref.VersionID is empty). Errors: ErrNotFound, ErrInvalidKey,
	// ErrInvalid, ErrTimeout, ErrUnavailable.
	Stat(ctx context.Context, ref Ref) (Version, error)

	// Open reads length bytes of the pinned version v starting at offset
	// (0 <= offset, offset+length <= v.Size). The reader never reads and
	// discards a prefix: it starts at offset in storage. It ends after
	// exactly length bytes, and earlier only with an error (ExactReader),
	// so that a short object is never a short success. Errors as Stat,
	// plus ErrChanged when the object no longer matches v.ETag.
	Open(ctx context.Context, v Version, offset, length int64) (io.ReadCloser, error)

	// Put streams body into a new version of key (bucket "" means the
	// store's default) and returns it, with the SHA-256 of the bytes it
	// stored, computed as they passed. size is -1 when unknown. The body
	// is never buffered whole in memory.
	Put(ctx context.Context, bucket, key string, body io.Reader, size int64, contentType string) (Version, error)
}

// Filer is an optional ability of a reader returned by Open: the reader is
// an *os.File positioned at the requested offset. Callers copy from it
// with CopyFile, so that the kernel can sendfile and a file cut short is
// an error, as the reader's own would be.
type Filer interface {
	File() *os.File
}

// Splicer is an optional ability of a reader returned by Open: the reader
// can move its bytes to a writer itself, without reading them into the
// process. An S3 body over plain HTTP (storage/s3) is one: its WriteNTo
// hands its connection to the writer's ReadFrom, so that the kernel
// splices the bytes from the store's socket to the client's.
// SetReadDeadline bounds each wait on the store; a passed one fails
// WriteNTo with an error wrapping os.ErrDeadlineExceeded, and the copy
// can go on once it is moved.
//
// WriteNTo writes n bytes, fewer only with an error: a body that ends
// early is ErrUnavailable, as its Read's.
type Splicer interface {
	WriteNTo(w io.Writer, n int64) (int64, error)
	SetReadDeadline(t time.Time) error
}

// Upload is a resumable upload in progress (Uploader): the object it
// becomes and what the store holds of it so far. A caller keeps it between
// requests where every process sees it (the gateway: in the ledger), and
// hands the one it kept last to the next call, in whatever process that
// call runs.
type Upload struct {
	// Bucket is the store's own name for the bucket: never "", once begun.
	Bucket      string
	Key         string
	ContentType string
	// Size is the object's length, declared when the upload began.
	Size int64
	// Offset is how many of its bytes the store holds.
	Offset int64
	// SHA256 is the state of the SHA-256 of those bytes, as crypto/sha256
	// marshals it (encoding.BinaryMarshaler; see ResumeSHA256): the next
	// append continues the whole object's digest from it, so every byte is
	// hashed once, however many requests and processes the upload takes.
	SHA256 []byte
	// PartSize is the length whose multiples are the cheapest ends of an
	// append: S3 sends whole parts and keeps bytes short of one as a
	// temporary object until the next append. 0 when any end is as good.
	PartSize int64
	// State is the store's own (S3: the multipart upload id, each part's
	// ETag and checksum, the temporary object; fs: the partial file and
	// the MD5 of the ETag), opaque to the caller.
	State []byte
}

// Uploader is an optional ability of a Store: an object written by
// appends, across requests, restarts and processes, that becomes a
// version exactly as Put would have stored it (resumable uploads, SPEC
// §11). The caller runs one call at a time on an upload and keeps the
// Upload each call returns; a call that fails changes nothing the caller
// kept, so it can be made again from the same Upload.
type Uploader interface {
	// UploadBegin starts an upload of size bytes (size >= 0) into key
	// (bucket "" means the store's default). Nothing is visible to
	// readers until UploadFinish. Errors: ErrInvalidKey, ErrInvalid,
	// ErrTimeout, ErrUnavailable.
	UploadBegin(ctx context.Context, bucket, key string, size int64, contentType string) (Upload, error)
	// UploadAppend appends body, read to its end, at u.Offset and returns
	// u advanced past those bytes, with their SHA-256 in its digest
	// state. Bytes a failed append may have left beyond u.Offset are not
	// the upload's: the next append from u writes over them. Errors:
	// ErrInvalid (body longer than what is left of u.Size, or u not an
	// upload of this store), ErrNotFound (the upload is gone: finished or
	// aborted), ErrChanged (what the store kept no longer matches u),
	// ErrTimeout, ErrUnavailable; the body's own read error, wrapped.
	UploadAppend(ctx context.Context, u Upload, body io.Reader) (Upload, error)
	// UploadFinish makes a complete upload (u.Offset == u.Size) a new
	// version of its key, as Put stores one (the same ETag, checksum and
	// metadata), and returns it with the whole object's SHA-256 (from
	// u.SHA256, never a second pass over the bytes). Errors: ErrInvalid
	// (incomplete), ErrNotFound (the upload is gone), ErrChanged,
	// ErrTimeout, ErrUnavailable.
	UploadFinish(ctx context.Context, u Upload) (Version, error)
	// UploadAbort removes all the store holds of an unfinished upload
	// (S3: the multipart upload and every version of its temporary
	// objects). Aborting an upload that is gone succeeds. Errors:
	// ErrTimeout, ErrUnavailable.
	UploadAbort(ctx context.Context, u Upload) error
}

// Pinger is an optional ability of a Store: a cheap reachability check for
// readiness probes.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Deleter is an optional ability of a Store: deleting one version the
// gateway stored (SPEC §6).
type Deleter interface {
	// Delete removes exactly version v.VersionID of v.Key in v.Bucket
	// ("" means the store's default); every other version of the key stays
	// as it was, and when v was the current version the newest remaining
	// one becomes current. A version that S3 calls "null" (a bucket
	// without versioning) is deleted only while it still has v.ETag.
	// Errors: ErrNotFound when that version does not exist (deleting
	// twice finds it gone), ErrChanged when a "null" version was
	// replaced (the object there now is not v), ErrInvalidKey,
	// ErrInvalid, ErrTimeout, ErrUnavailable.
	Delete(ctx context.Context, v Version) error
}
