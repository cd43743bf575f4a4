package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/google/uuid"

	"github.com/dlgate/dlgate/storage"
)

var _ uploadAPI = (*s3.Client)(nil)

// Resumable uploads (storage.Uploader, docs/design.md "Resumable
// uploads"). An upload of more than one part is a multipart upload
// created with the SHA-256 checksum algorithm; its parts are the store's
// part size, sent from the same buffer, with the same checksums and the
// same whole-object digest as Put's (sendPart). An append rarely ends on a
// part boundary (a connection drops where it drops), and S3 takes no part
// but the last under 5 MiB, so the bytes short of a whole part are kept as
// a temporary object, .dlgate-uploads/<token>.<offset>, until the next
// append reads them back in front of its own: they survive the end of the
// request, a restart and a move to another process, and no request ever
// carries more than one part of them. Each temporary object has a key of
// its own (the offset it ends at), so writing one never replaces another
// that a kept Upload names, and in a versioned bucket each has exactly one
// version, deleted by version id: the next append deletes the ones the
// kept Upload no longer needs, UploadFinish and UploadAbort every version
// under the upload's prefix.
//
// An upload that fits in one part is not a multipart upload: its bytes
// wait in temporary objects and UploadFinish stores them with one
// PutObject, as Put stores a small body (a FULL_OBJECT checksum, the same
// ETag), which is also how an empty upload is stored.

// TempPrefix starts the keys of the temporary objects of resumable
// uploads. A bucket lifecycle rule expiring it after a few days is a
// safety net for what a crash between two requests could leave.
const TempPrefix = ".dlgate-uploads/"

// uploadAPI is what resumable uploads call beyond API. *s3.Client has it;
// a client without it cannot upload resumably (storage.ErrUnavailable).
type uploadAPI interface {
	DeleteObject(ctx context.Context, in *s3.DeleteObjectInput, optFns ...func(*s3.Options)) (*s3.DeleteObjectOutput, error)
	ListObjectVersions(ctx context.Context, in *s3.ListObjectVersionsInput, optFns ...func(*s3.Options)) (*s3.ListObjectVersionsOutput, error)
}

// resumeState is the S3 store's Upload.State.
type resumeState struct {
	// UploadID is the multipart upload's; "" for an upload of one part.
	UploadID string `json:"upload_id,omitempty"`
	// Token names the upload's temporary objects.
	Token string `json:"token"`
	// Parts are the parts sent, part number i+1 at Parts[i], each
	// PartSize bytes.
	Parts []resumePart `json:"parts,omitempty"`
	// Tail holds the bytes after the last part, when there are any.
	Tail *tempObject `json:"tail,omitempty"`
	// Garbage are temporary objects that no longer hold the upload's
	// bytes, to delete once this state is the one kept.
	Garbage []tempObject `json:"garbage,omitempty"`
}

type resumePart struct {
	ETag     string `json:"etag"`
	Checksum string `json:"sha256"` // base64, as S3 sends checksums
}

type tempObject struct {
	Key       string `json:"key"`
	VersionID string `json:"version_id"`
	Size      int64  `json:"size"`
	Checksum  string `json:"sha256"` // base64 SHA-256 of its bytes
}

// UploadBegin starts an upload of size bytes: a multipart upload with the
// SHA-256 checksum algorithm when it needs more than one part, nothing at
// all in the store otherwise. Errors: storage.ErrInvalidKey;
// storage.ErrInvalid (negative size); storage.ErrTimeout,
// storage.ErrUnavailable.
func (s *Store) UploadBegin(ctx context.Context, bucket, key string, size int64, contentType string) (storage.Upload, error) {
	bucket, err := s.resolve(bucket, key)
	if err != nil {
		return storage.Upload{}, err
	}
	if size < 0 {
		return storage.Upload{}, fmt.Errorf("s3 upload begin: %w: negative size %d", storage.ErrInvalid, size)
	}
	if _, ok := s.api.(uploadAPI); !ok {
		return storage.Upload{}, fmt.Errorf("s3 upload begin: %w: the client cannot delete or list versions", storage.ErrUnavailable)
	}
	if contentType == "" {
		contentType = DefaultContentType
	}
	if err := ctx.Err(); err != nil {
		return storage.Upload{}, translate("upload begin", err)
	}
	partSize := s.partSizeFor(size)
	st := resumeState{Token: uuid.Must(uuid.NewV7()).String()}
	if size > partSize {
		created, err := s.api.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
			Bucket:            aws.String(bucket),
			Key:               aws.String(key),
			ContentType:       aws.String(contentType),
			ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
		}, withoutFlexibleChecksums)
		if err != nil {
			return storage.Upload{}, translate("CreateMultipartUpload", err)
		}
		st.UploadID = aws.ToString(created.UploadId)
	}
	state, err := json.Marshal(st)
	if err != nil {
		return storage.Upload{}, fmt.Errorf("s3 upload begin: %w", err)
	}
	return storage.Upload{Bucket: bucket, Key: key, ContentType: contentType, Size: size,
		SHA256: storage.NewSHA256State(), PartSize: partSize, State: state}, nil
}

// resumed is one call on an upload: its state, and the Put machinery
// (sendPart, complete, single) for its key.
type resumed struct {
	upload
	api uploadAPI
	u   storage.Upload
	st  resumeState
}

// resume checks u against what this store could have made of it.
func (s *Store) resume(u storage.Upload) (*resumed, error) {
	var st resumeState
	if err := json.Unmarshal(u.State, &st); err != nil {
		return nil, fmt.Errorf("s3 upload: %w: state: %v", storage.ErrInvalid, err)
	}
	if _, err := uuid.Parse(st.Token); err != nil {
		return nil, fmt.Errorf("s3 upload: %w: state has no token", storage.ErrInvalid)
	}
	bucket, err := s.resolve(u.Bucket, u.Key)
	if err != nil {
		return nil, err
	}
	api, ok := s.api.(uploadAPI)
	if !ok {
		return nil, fmt.Errorf("s3 upload: %w: the client cannot delete or list versions", storage.ErrUnavailable)
	}
	r := &resumed{upload: upload{s: s, bucket: bucket, key: u.Key, contentType: u.ContentType, digest: true}, api: api, u: u, st: st}
	// Every part is whole but the last, which ends the upload.
	held := min(int64(len(st.Parts))*u.PartSize, u.Size)
	if r.st.Tail != nil {
		held += r.st.Tail.Size
	}
	switch {
	case u.PartSize <= 0 || u.Offset < 0 || u.Offset > u.Size:
		return nil, fmt.Errorf("s3 upload: %w: part size %d, offset %d of %d", storage.ErrInvalid, u.PartSize, u.Offset, u.Size)
	case held != u.Offset:
		return nil, fmt.Errorf("s3 upload: %w: state holds %d bytes, offset is %d", storage.ErrInvalid, held, u.Offset)
	case (r.st.UploadID == "") != (u.Size <= u.PartSize):
		return nil, fmt.Errorf("s3 upload: %w: a %d-byte upload in parts of %d", storage.ErrInvalid, u.Size, u.PartSize)
	}
	return r, nil
}

// UploadAppend sends body in whole parts through one buffer of the part
// size, the bytes of the temporary object in front of its first part, and
// keeps what is left short of a part as a new temporary object; the last
// bytes of the upload go as its last part. A body that brings no bytes
// costs no request. Errors: as storage.Uploader.
func (s *Store) UploadAppend(ctx context.Context, u storage.Upload, body io.Reader) (storage.Upload, error) {
	r, err := s.resume(u)
	if err != nil {
		return u, err
	}
	whole, err := storage.ResumeSHA256(u.SHA256)
	if err != nil {
		return u, err
	}
	buf := s.buffer(u.PartSize)
	defer s.release(buf)
	part := *buf

	// One byte beyond what is left shows a body that is too long.
	src := io.LimitReader(body, u.Size-u.Offset+1)
	held := int64(0) // bytes of the part under way already in part
	if r.st.Tail != nil {
		held = r.st.Tail.Size
	}
	n, err := readPart(src, part[held:])
	if err != nil || n == 0 {
		return u, err
	}
	r.collect(ctx) // the kept state is u's: what it calls garbage is
	next := r.st
	next.Parts = append([]resumePart(nil), r.st.Parts...)
	next.Garbage = nil
	if r.st.Tail != nil {
		if err := r.readTemp(ctx, *r.st.Tail, part[:held]); err != nil {
			return u, err
		}
		next.Tail = nil
		next.Garbage = append(next.Garbage, *r.st.Tail)
	}
	offset := u.Offset
	for n > 0 {
		if offset+n > u.Size {
			return u, fmt.Errorf("s3 upload append: %w: body is longer than the %d bytes left of %d", storage.ErrInvalid, u.Size-u.Offset, u.Size)
		}
		fill := held + n
		offset += n
		if next.UploadID == "" || (fill < int64(len(part)) && offset < u.Size) {
			// Short of a part, and not the last: the body has ended.
			whole.Write(part[held:fill])
			tail, err := r.writeTemp(ctx, offset, part[:fill])
			if err != nil {
				return u, err
			}
			next.Tail = &tail
			break
		}
		cp, err := r.sendPart(ctx, aws.String(next.UploadID), int32(len(next.Parts)+1), part[:fill], part[held:fill], whole)
		if err != nil {
			return u, err
		}
		next.Parts = append(next.Parts, resumePart{ETag: aws.ToString(cp.ETag), Checksum: aws.ToString(cp.ChecksumSHA256)})
		held = 0
		if n, err = readPart(src, part); err != nil {
			return u, err
		}
	}
	if offset == u.Size {
		if extra, _ := io.ReadFull(src, make([]byte, 1)); extra > 0 {
			return u, fmt.Errorf("s3 upload append: %w: body is longer than the %d bytes left of %d", storage.ErrInvalid, u.Size-u.Offset, u.Size)
		}
	}
	state, err := json.Marshal(next)
	if err != nil {
		return u, fmt.Errorf("s3 upload append: %w", err)
	}
	out := u
	out.Offset, out.SHA256, out.State = offset, storage.SHA256State(whole), state
	return out, nil
}

// UploadFinish completes the multipart upload, naming each part's ETag
// and checksum (S3 refuses a part whose stored checksum is not the one
// named), or stores an upload of one part with one PutObject, and then
// deletes the upload's temporary objects. Errors: as storage.Uploader;
// storage.ErrNotFound when the multipart upload is gone.
func (s *Store) UploadFinish(ctx context.Context, u storage.Upload) (storage.Version, error) {
	if u.Offset != u.Size {
		return storage.Version{}, fmt.Errorf("s3 upload finish: %w: %d of %d bytes uploaded", storage.ErrInvalid, u.Offset, u.Size)
	}
	r, err := s.resume(u)
	if err != nil {
		return storage.Version{}, err
	}
	whole, err := storage.ResumeSHA256(u.SHA256)
	if err != nil {
		return storage.Version{}, err
	}
	var v storage.Version
	if r.st.UploadID == "" {
		buf := s.buffer(u.PartSize)
		defer s.release(buf)
		data := (*buf)[:u.Size]
		if r.st.Tail != nil {
			if err := r.readTemp(ctx, *r.st.Tail, data); err != nil {
				return storage.Version{}, err
			}
		}
		v, err = r.single(ctx, data)
	} else {
		parts := make([]types.CompletedPart, len(r.st.Parts))
		for i, p := range r.st.Parts {
			parts[i] = types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: aws.String(p.ETag), ChecksumSHA256: aws.String(p.Checksum)}
		}
		v, err = r.complete(ctx, aws.String(r.st.UploadID), parts, u.Size)
	}
	if err != nil {
		return storage.Version{}, err
	}
	sum := hex.EncodeToString(whole.Sum(nil))
	if v.SHA256 != "" && v.SHA256 != sum {
		// single hashed the bytes it stored: they are not the ones the
		// appends hashed (readTemp checks each temporary object, so this
		// is a bug, never a damaged store).
		return storage.Version{}, fmt.Errorf("s3 upload finish: stored bytes have SHA-256 %s, the appends hashed %s", v.SHA256, sum)
	}
	v.SHA256 = sum
	// The version is stored: a temporary object left behind costs space,
	// not correctness, and must not fail the upload.
	_ = r.removeTemps(ctx)
	return v, nil
}

// UploadAbort aborts the multipart upload (one already gone counts as
// aborted) and deletes every version of the upload's temporary objects.
// Errors: storage.ErrTimeout, storage.ErrUnavailable.
func (s *Store) UploadAbort(ctx context.Context, u storage.Upload) error {
	r, err := s.resume(u)
	if err != nil {
		return err
	}
	if r.st.UploadID != "" {
		_, err := s.api.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
			Bucket: aws.String(r.bucket), Key: aws.String(r.key), UploadId: aws.String(r.st.UploadID)})
		if err := translate("AbortMultipartUpload", err); err != nil && !errors.Is(err, storage.ErrNotFound) {
			return err
		}
	}
	return r.removeTemps(ctx)
}

// tempKey names the temporary object that holds the upload's bytes after
// its last part up to offset.
func (r *resumed) tempKey(offset int64) string {
	return TempPrefix + r.st.Token + "." + strconv.FormatInt(offset, 10)
}

// writeTemp stores data, the upload's bytes after its last part up to
// offset, as a temporary object, with its SHA-256 as its checksum.
func (r *resumed) writeTemp(ctx context.Context, offset int64, data []byte) (tempObject, error) {
	sum := sha256.Sum256(data)
	checksum := base64.StdEncoding.EncodeToString(sum[:])
	key := r.tempKey(offset)
	out, err := r.s.api.PutObject(ctx, &s3.PutObjectInput{
		Bucket:         aws.String(r.bucket),
		Key:            aws.String(key),
		Body:           bytes.NewReader(data),
		ContentLength:  aws.Int64(int64(len(data))),
		ChecksumSHA256: aws.String(checksum),
	}, withoutFlexibleChecksums, withPayloadHash(sum[:]))
	if err != nil {
		return tempObject{}, translate("PutObject (upload's bytes short of a part)", err)
	}
	return tempObject{Key: key, VersionID: versionID(out.VersionId), Size: int64(len(data)), Checksum: checksum}, nil
}

// readTemp reads temporary object t whole into dst (len(dst) == t.Size)
// and checks its bytes against the SHA-256 they were written with: the
// upload's digest already counts them. Errors: storage.ErrNotFound (it is
// gone), storage.ErrChanged (other bytes), storage.ErrTimeout,
// storage.ErrUnavailable.
func (r *resumed) readTemp(ctx context.Context, t tempObject, dst []byte) error {
	if int64(len(dst)) != t.Size {
		return fmt.Errorf("s3 upload: %w: temporary object of %d bytes read into %d", storage.ErrInvalid, t.Size, len(dst))
	}
	if t.Size == 0 {
		return nil
	}
	out, err := r.s.api.GetObject(ctx, &s3.GetObjectInput{
		Bucket:    aws.String(r.bucket),
		Key:       aws.String(t.Key),
		VersionId: versionParam(t.VersionID),
	}, withoutResponseChecksums)
	if err != nil {
		return translateVersioned("GetObject (upload's bytes short of a part)", err, t.VersionID)
	}
	defer out.Body.Close()
	if _, err := io.ReadFull(out.Body, dst); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
			return fmt.Errorf("s3 upload: %w: temporary object %s is shorter than %d bytes", storage.ErrChanged, t.Key, t.Size)
		}
		return translate("GetObject (upload's bytes short of a part)", err)
	}
	sum := sha256.Sum256(dst)
	if base64.StdEncoding.EncodeToString(sum[:]) != t.Checksum {
		return fmt.Errorf("s3 upload: %w: temporary object %s does not have the bytes written", storage.ErrChanged, t.Key)
	}
	return nil
}

// collect deletes the temporary objects that the kept state calls
// garbage. What it fails to delete is found again by removeTemps.
func (r *resumed) collect(ctx context.Context) {
	for _, g := range r.st.Garbage {
		_, _ = r.api.DeleteObject(ctx, &s3.DeleteObjectInput{
			Bucket: aws.String(r.bucket), Key: aws.String(g.Key), VersionId: versionParam(g.VersionID)})
	}
}

// removeTemps deletes every version (and delete marker) under the
// upload's temporary prefix: in a versioned bucket a plain delete would
// only hide an object behind a marker, and every version it ever had
// would stay.
func (r *resumed) removeTemps(ctx context.Context) error {
	in := &s3.ListObjectVersionsInput{Bucket: aws.String(r.bucket), Prefix: aws.String(TempPrefix + r.st.Token + ".")}
	for {
		out, err := r.api.ListObjectVersions(ctx, in)
		if err != nil {
			return translate("ListObjectVersions", err)
		}
		type entry struct{ key, vid *string }
		var all []entry
		for _, v := range out.Versions {
			all = append(all, entry{v.Key, v.VersionId})
		}
		for _, m := range out.DeleteMarkers {
			all = append(all, entry{m.Key, m.VersionId})
		}
		for _, e := range all {
			_, err := r.api.DeleteObject(ctx, &s3.DeleteObjectInput{
				Bucket: aws.String(r.bucket), Key: e.key, VersionId: versionParam(versionID(e.vid))})
			if err := translate("DeleteObject", err); err != nil && !errors.Is(err, storage.ErrNotFound) {
				return err
			}
		}
		if !aws.ToBool(out.IsTruncated) {
			return nil
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
}
