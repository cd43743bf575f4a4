package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlgate/dlgate/storage"
)

// abortTimeout bounds the AbortMultipartUpload sent after a failure, which
// runs even when the caller's context is what failed.
const abortTimeout = 30 * time.Second

// Put streams body into a new version of key. A body of known size up to
// the part size goes out as one PutObject straight from body; anything
// else is read one part at a time into a buffer of the part size, so
// memory stays bounded by the part size whatever the object's. A body
// shorter or longer than a known size is refused before the last byte is
// sent, so no version is made. A failed multipart upload is aborted.
//
// The returned Version has no LastModified (S3 does not return it on
// upload; Stat does). Errors: storage.ErrInvalidKey, storage.ErrInvalid,
// storage.ErrTimeout, storage.ErrUnavailable; an error wrapping
// io.ErrUnexpectedEOF for a short body; the body's own read error, wrapped.
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
	up := upload{s: s, bucket: bucket, key: key, contentType: contentType}
	if size >= 0 {
		body = &exactReader{r: body, left: size, size: size}
	}
	if size >= 0 && size <= s.partSize {
		return up.single(ctx, body, size, streamingBody)
	}

	partSize := s.partSize
	if size > partSize*maxParts {
		// Known to need more than S3's 10,000 parts: grow the parts (and
		// this upload's buffer) just enough, in whole MiB.
		partSize = ((size+maxParts-1)/maxParts + 1<<20 - 1) &^ (1<<20 - 1)
	}
	buf := s.buffer(partSize)
	defer s.release(buf)

	n, err := readPart(body, *buf)
	if err != nil {
		return storage.Version{}, err
	}
	if n < int64(len(*buf)) {
		// An unknown size that turned out to fit in one part: it is in
		// memory already, and a seekable body lets the SDK sign it.
		return up.single(ctx, bytes.NewReader((*buf)[:n]), n, seekableBody)
	}
	return up.multipart(ctx, body, *buf)
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
// len(buf) only at the end of body.
func readPart(body io.Reader, buf []byte) (int64, error) {
	n, err := io.ReadFull(body, buf)
	var be *bodyError
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		return int64(n), nil
	case errors.As(err, &be):
		return int64(n), be.err
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
}

const (
	streamingBody = false
	seekableBody  = true
)

func (u upload) single(ctx context.Context, body io.Reader, size int64, seekable bool) (storage.Version, error) {
	in := &s3.PutObjectInput{
		Bucket:        aws.String(u.bucket),
		Key:           aws.String(u.key),
		Body:          body,
		ContentLength: aws.Int64(size),
		ContentType:   aws.String(u.contentType),
	}
	opts := []func(*s3.Options){withoutFlexibleChecksums}
	if seekable {
		b := body.(*bytes.Reader)
		in.ContentMD5 = aws.String(contentMD5(b))
	} else {
		opts = append(opts, withUnsignedPayload, withoutRetries)
	}
	out, err := u.s.api.PutObject(ctx, in, opts...)
	if err != nil {
		return storage.Version{}, putError("PutObject", err)
	}
	return u.version(out.VersionId, out.ETag, size)
}

// withoutFlexibleChecksums stops the SDK from adding a CRC checksum of its
// own to uploads. Computing it needs a seekable body or, over plain HTTP,
// is refused for a streamed one ("unseekable stream is not supported
// without TLS and trailing checksum"); and S3-compatible servers differ in
// how they treat it across multipart uploads. Integrity comes from
// Content-MD5 where the bytes are in memory.
func withoutFlexibleChecksums(o *s3.Options) {
	o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
}

// withUnsignedPayload signs a streamed body as UNSIGNED-PAYLOAD: SigV4 over
// plain HTTP would otherwise hash the body first and then rewind it, which
// a request body cannot do. Over HTTPS the SDK does the same on its own.
func withUnsignedPayload(o *s3.Options) {
	o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
}

// withoutRetries makes one attempt: a streamed body cannot be rewound for
// a second, and the SDK would report that instead of the actual failure.
func withoutRetries(o *s3.Options) {
	o.RetryMaxAttempts = 1
}

func contentMD5(b *bytes.Reader) string {
	h := md5.New()
	_, _ = b.WriteTo(h)
	_, _ = b.Seek(0, io.SeekStart)
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

// multipart uploads first (a full part already in buf) and the rest of
// body, one part at a time through buf.
func (u upload) multipart(ctx context.Context, body io.Reader, buf []byte) (storage.Version, error) {
	created, err := u.s.api.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket:      aws.String(u.bucket),
		Key:         aws.String(u.key),
		ContentType: aws.String(u.contentType),
	}, withoutFlexibleChecksums)
	if err != nil {
		return storage.Version{}, putError("CreateMultipartUpload", err)
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
	)
	for n > 0 {
		if len(parts) == maxParts {
			return storage.Version{}, fmt.Errorf("s3 put: body needs more than %d parts of %d bytes", maxParts, len(buf))
		}
		num := int32(len(parts) + 1)
		part := bytes.NewReader(buf[:n])
		out, err := u.s.api.UploadPart(ctx, &s3.UploadPartInput{
			Bucket:        aws.String(u.bucket),
			Key:           aws.String(u.key),
			UploadId:      uploadID,
			PartNumber:    aws.Int32(num),
			Body:          part,
			ContentLength: aws.Int64(n),
			ContentMD5:    aws.String(contentMD5(part)),
		}, withoutFlexibleChecksums)
		if err != nil {
			return storage.Version{}, putError("UploadPart", err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
		total += n
		if n < int64(len(buf)) {
			break // a short read is the end of body
		}
		if n, err = readPart(body, buf); err != nil {
			return storage.Version{}, err
		}
	}
	out, err := u.s.api.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket:          aws.String(u.bucket),
		Key:             aws.String(u.key),
		UploadId:        uploadID,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}, withoutFlexibleChecksums)
	if err != nil {
		return storage.Version{}, putError("CompleteMultipartUpload", err)
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

// putError translates err, except that a failure of the caller's body
// (which the SDK reports wrapped while sending) stays the body's error:
// the store did not fail.
func putError(op string, err error) error {
	var be *bodyError
	if errors.As(err, &be) {
		return fmt.Errorf("s3 %s: %w", op, be.err)
	}
	return translate(op, err)
}

// bodyError marks an error that came from the caller's body.
type bodyError struct{ err error }

func (e *bodyError) Error() string { return e.err.Error() }
func (e *bodyError) Unwrap() error { return e.err }

// exactReader passes size bytes of r through and fails when r holds fewer
// or more. It looks for an extra byte before handing out the last ones, so
// that an upload of a too-long body fails before its final byte is sent
// and the server stores nothing.
type exactReader struct {
	r    io.Reader
	left int64
	size int64
	done bool
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.done {
		return 0, io.EOF
	}
	if e.left == 0 {
		return 0, e.finish()
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	switch {
	case err == io.EOF && e.left > 0:
		return n, &bodyError{fmt.Errorf("s3 put: body ended %d bytes short of %d: %w", e.left, e.size, io.ErrUnexpectedEOF)}
	case err != nil && err != io.EOF:
		return n, &bodyError{fmt.Errorf("s3 put: reading body: %w", err)}
	case e.left == 0:
		if ferr := e.finish(); ferr != io.EOF {
			return 0, ferr
		}
		return n, nil
	}
	return n, nil
}

// finish probes r for bytes beyond size: io.EOF when there are none.
func (e *exactReader) finish() error {
	var probe [1]byte
	for range 100 {
		n, err := e.r.Read(probe[:])
		if n > 0 {
			return &bodyError{fmt.Errorf("s3 put: body is longer than the declared %d bytes", e.size)}
		}
		if err == io.EOF {
			e.done = true
			return io.EOF
		}
		if err != nil {
			return &bodyError{fmt.Errorf("s3 put: reading body: %w", err)}
		}
	}
	return &bodyError{fmt.Errorf("s3 put: reading body: %w", io.ErrNoProgress)}
}
