package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/dlgate/dlgate/storage"
)

// abortTimeout bounds the AbortMultipartUpload sent after a failure, which
// runs even when the caller's context is what failed.
const abortTimeout = 30 * time.Second

// Put streams body into a new version of key. The body is read one part
// at a time into a buffer of the part size, so memory stays bounded by
// the part size whatever the object's: a body that fits in one part goes
// out as one PutObject, anything longer as a multipart upload. A body
// shorter or longer than a known size is refused before the last byte is
// sent, so no version is made. A failed multipart upload is aborted.
//
// Every request carries the SHA-256 of its body as its S3 checksum
// (x-amz-checksum-sha256), so the server verifies what it received and
// refuses (BadDigest) what does not match; it keeps the checksum, which
// HeadObject in checksum mode reports: the object's own for a single
// PutObject, a composite of the parts' for a multipart upload (S3 has no
// full-object SHA-256 for those). The same digest signs the body (SigV4),
// instead of the SDK hashing it once more. The returned Version's SHA256
// is the whole object's, computed beside the parts' in the same pass.
//
// A part is buffered before it is sent because its checksum goes in its
// request's headers: the SDK sends a checksum after the body (a trailer)
// only over TLS.
//
// The returned Version has no LastModified (S3 does not return it on
// upload; Stat does). Errors: storage.ErrInvalidKey, storage.ErrInvalid,
// storage.ErrTimeout, storage.ErrUnavailable (BadDigest too: the bytes
// changed on their way); an error wrapping io.ErrUnexpectedEOF for a short
// body, storage.ErrTooLong for a long one; the body's own read error,
// wrapped.
func (s *Store) Put(ctx context.Context, bucket, key string, body io.Reader, size int64, contentType string) (storage.Version, error) {
	bucket, err := s.resolve(bucket, key)
	if err != nil {
		return storage.Version{}, err
	}
	if size < -1 {
		return storage.Version{}, fmt.Errorf("s3 put: negative size %d", size)
	}
	if contentType == "" {
		contentType = DefaultContentType
	}
	up := upload{s: s, bucket: bucket, key: key, contentType: contentType, digest: !s.noDigest}
	partSize := s.partSizeFor(size)
	if size >= 0 {
		// Shorter or longer than size is refused before the last byte of
		// the last part leaves, so no version is made.
		body = &storage.ExactReader{R: body, N: size, Whole: true}
	}
	buf := s.buffer(partSize)
	defer s.release(buf)

	first := *buf
	if size >= 0 && size < int64(len(first)) {
		first = first[:size]
	}
	n, err := readPart(body, first)
	if err != nil {
		return storage.Version{}, err
	}
	if n < int64(len(*buf)) || n == size {
		return up.single(ctx, (*buf)[:n])
	}
	return up.multipart(ctx, body, *buf)
}

// partSizeFor is the part size of an upload of size bytes (-1: unknown):
// the store's, unless size is known to need more than S3's 10,000 parts,
// then just enough more (and so a buffer that large), in whole MiB.
func (s *Store) partSizeFor(size int64) int64 {
	if size > s.partSize*maxParts {
		return ((size+maxParts-1)/maxParts + 1<<20 - 1) &^ (1<<20 - 1)
	}
	return s.partSize
}

func (s *Store) buffer(size int64) *[]byte {
	if size == s.partSize {
		return s.bufs.Get().(*[]byte)
	}
	b := make([]byte, size)
	return &b
}

func (s *Store) release(b *[]byte) {
	if int64(len(*b)) == s.partSize {
		s.bufs.Put(b)
	}
}

// readPart fills buf from body and returns how much it holds: less than
// len(buf) only at the end of body. The body's failures (a length that
// is not the declared one among them) are the caller's, not the store's.
func readPart(body io.Reader, buf []byte) (int64, error) {
	n, err := io.ReadFull(body, buf)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return int64(n), nil
	case err != nil:
		return int64(n), fmt.Errorf("s3 put: reading body: %w", err)
	}
	return int64(n), nil
}

// upload is one Put in progress.
type upload struct {
	s           *Store
	bucket, key string
	contentType string
	digest      bool // compute the whole object's SHA-256 (Version.SHA256)
}

// single stores data, the whole body, with one PutObject; its checksum is
// the object's SHA-256.
func (u upload) single(ctx context.Context, data []byte) (storage.Version, error) {
	sum := sha256.Sum256(data)
	out, err := u.s.api.PutObject(ctx, &s3.PutObjectInput{
		Bucket:         aws.String(u.bucket),
		Key:            aws.String(u.key),
		Body:           bytes.NewReader(data),
		ContentLength:  aws.Int64(int64(len(data))),
		ContentType:    aws.String(u.contentType),
		ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum[:])),
	}, withoutFlexibleChecksums, withPayloadHash(sum[:]))
	if err != nil {
		return storage.Version{}, translate("PutObject", err)
	}
	v, err := u.version(out.VersionId, out.ETag, int64(len(data)))
	if u.digest {
		v.SHA256 = hex.EncodeToString(sum[:])
	}
	return v, err
}

// withoutFlexibleChecksums stops the SDK from adding a checksum of its own
// (a CRC) to uploads: each request carries the SHA-256 the store computes
// (ChecksumSHA256), which the SDK then leaves alone.
func withoutFlexibleChecksums(o *s3.Options) {
	o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
}

// withPayloadHash signs a request whose body has the SHA-256 sum, known
// already, with that digest (SigV4's x-amz-content-sha256), in place of
// the SDK's own pass over the body (or its UNSIGNED-PAYLOAD over TLS): a
// signed payload, and one hash per byte instead of two.
func withPayloadHash(sum []byte) func(*s3.Options) {
	known := hex.EncodeToString(sum)
	return func(o *s3.Options) {
		o.APIOptions = append(o.APIOptions, func(st *middleware.Stack) error {
			_, err := st.Finalize.Swap("ComputePayloadHash", middleware.FinalizeMiddlewareFunc("ComputePayloadHash",
				func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
					return next.HandleFinalize(v4.SetPayloadHash(ctx, known), in)
				}))
			return err
		})
	}
}

// multipart uploads first (a full part already in buf) and the rest of
// body, one part at a time through buf. The parts' checksums make the
// object's a composite (COMPOSITE in S3's terms), which the server
// verifies part by part.
func (u upload) multipart(ctx context.Context, body io.Reader, buf []byte) (storage.Version, error) {
	created, err := u.s.api.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket:            aws.String(u.bucket),
		Key:               aws.String(u.key),
		ContentType:       aws.String(u.contentType),
		ChecksumAlgorithm: types.ChecksumAlgorithmSha256,
	}, withoutFlexibleChecksums)
	if err != nil {
		return storage.Version{}, translate("CreateMultipartUpload", err)
	}
	uploadID := created.UploadId
	v, err := u.parts(ctx, uploadID, body, buf)
	if err != nil {
		u.abort(ctx, uploadID)
		return storage.Version{}, err
	}
	return v, nil
}

func (u upload) parts(ctx context.Context, uploadID *string, body io.Reader, buf []byte) (storage.Version, error) {
	var (
		parts []types.CompletedPart
		total int64
		n     = int64(len(buf)) // the first part is already read
		whole hash.Hash
	)
	if u.digest {
		whole = sha256.New()
	}
	for n > 0 {
		if len(parts) == maxParts {
			return storage.Version{}, fmt.Errorf("s3 put: body needs more than %d parts of %d bytes", maxParts, len(buf))
		}
		part := buf[:n]
		cp, err := u.sendPart(ctx, uploadID, int32(len(parts)+1), part, part, whole)
		if err != nil {
			return storage.Version{}, err
		}
		parts = append(parts, cp)
		total += n
		if n < int64(len(buf)) {
			break // a short read is the end of body
		}
		if n, err = readPart(body, buf); err != nil {
			return storage.Version{}, err
		}
	}
	v, err := u.complete(ctx, uploadID, parts, total)
	if whole != nil {
		v.SHA256 = hex.EncodeToString(whole.Sum(nil))
	}
	return v, err
}

// sendPart uploads data as part num of the multipart upload, with its
// SHA-256 as its checksum, and returns what CompleteMultipartUpload names
// it by. whole, when not nil, takes unseen (the part's bytes it has not
// hashed yet: all of them in a Put) while the part goes out: hashing then
// costs the upload no time.
func (u upload) sendPart(ctx context.Context, uploadID *string, num int32, data, unseen []byte, whole hash.Hash) (types.CompletedPart, error) {
	sum := sha256.Sum256(data)
	checksum := base64.StdEncoding.EncodeToString(sum[:])
	var wg sync.WaitGroup
	if whole != nil && len(unseen) > 0 {
		wg.Go(func() { whole.Write(unseen) })
	}
	out, err := u.s.api.UploadPart(ctx, &s3.UploadPartInput{
		Bucket:         aws.String(u.bucket),
		Key:            aws.String(u.key),
		UploadId:       uploadID,
		PartNumber:     aws.Int32(num),
		Body:           bytes.NewReader(data),
		ContentLength:  aws.Int64(int64(len(data))),
		ChecksumSHA256: aws.String(checksum),
	}, withoutFlexibleChecksums, withPayloadHash(sum[:]))
	wg.Wait() // before the caller reads into data again
	if err != nil {
		return types.CompletedPart{}, translate("UploadPart", err)
	}
	return types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num), ChecksumSHA256: aws.String(checksum)}, nil
}

// complete makes the multipart upload's parts, total bytes in all, the
// new version of the key.
func (u upload) complete(ctx context.Context, uploadID *string, parts []types.CompletedPart, total int64) (storage.Version, error) {
	out, err := u.s.api.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(u.bucket),
		Key:             aws.String(u.key),
		UploadId:        uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}, withoutFlexibleChecksums)
	if err != nil {
		return storage.Version{}, translate("CompleteMultipartUpload", err)
	}
	return u.version(out.VersionId, out.ETag, total)
}

// abort discards the parts of a failed upload, which S3 would otherwise
// keep (and bill) indefinitely. It runs on its own deadline because ctx
// may be the reason the upload failed.
func (u upload) abort(ctx context.Context, uploadID *string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), abortTimeout)
	defer cancel()
	// A failed abort leaves parts for the bucket's lifecycle rule to
	// collect; the upload's own error is what the caller needs.
	_, _ = u.s.api.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{
		Bucket:   aws.String(u.bucket),
		Key:      aws.String(u.key),
		UploadId: uploadID,
	})
}

func (u upload) version(vid, etag *string, size int64) (storage.Version, error) {
	if aws.ToString(etag) == "" {
		return storage.Version{}, fmt.Errorf("s3 put: %w: server returned no ETag", storage.ErrUnavailable)
	}
	return storage.Version{
		Bucket:      u.bucket,
		Key:         u.key,
		VersionID:   versionID(vid),
		Size:        size,
		ETag:        aws.ToString(etag),
		ContentType: u.contentType,
	}, nil
}
