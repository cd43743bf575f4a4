package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlgate/dlgate/storage"
)

// Open returns a reader of length bytes of version v from offset: one
// GetObject naming v's VersionId (unless it is "null"), with If-Match v's
// ETag and Range bytes=offset-(offset+length-1), so no prefix is ever read
// and discarded. Length 0 makes no request at all.
//
// ctx governs the whole body, not only the request: cancelling it aborts a
// read in progress, so pass the context of the transfer.
//
// On a Store made by New with a plain-HTTP endpoint, the reader also has
// WriteNTo and SetReadDeadline (splicingBody): it can hand its connection
// to a net/http response, which has the kernel move the bytes.
//
// Errors: storage.ErrInvalidKey; storage.ErrNotFound; storage.ErrChanged
// when the object no longer matches v's ETag or size; storage.ErrTimeout,
// storage.ErrUnavailable, also from the reader's Read; a plain error when
// offset and length do not fit in v.Size or v has no ETag.
func (s *Store) Open(ctx context.Context, v storage.Version, offset, length int64) (io.ReadCloser, error) {
	bucket, err := s.resolve(v.Bucket, v.Key)
	if err != nil {
		return nil, err
	}
	if offset < 0 || length < 0 || offset > v.Size || length > v.Size-offset {
		return nil, fmt.Errorf("s3 open: range %d+%d outside a %d-byte object", offset, length, v.Size)
	}
	if v.ETag == "" {
		// If-Match is the only guard on a bucket without versioning.
		return nil, errors.New("s3 open: version has no ETag to match")
	}
	if length == 0 {
		if err := ctx.Err(); err != nil {
			return nil, translate("GetObject", err)
		}
		return io.NopCloser(strings.NewReader("")), nil
	}
	end := offset + length - 1
	out, err := s.api.GetObject(withConnBody(ctx), &s3.GetObjectInput{
		Bucket:    aws.String(bucket),
		Key:       aws.String(v.Key),
		VersionId: versionParam(v.VersionID),
		IfMatch:   aws.String(v.ETag),
		Range:     aws.String(fmt.Sprintf("bytes=%d-%d", offset, end)),
	}, withoutResponseChecksums)
	if err != nil {
		return nil, translateVersioned("GetObject", err, v.VersionID)
	}
	if err := checkRange(out, offset, end, v.Size); err != nil {
		out.Body.Close()
		return nil, err
	}
	if cb, ok := out.Body.(*connBody); ok {
		return &splicingBody{body: newBody(cb, length), cb: cb}, nil
	}
	b := newBody(out.Body, length)
	return &b, nil
}

// withoutResponseChecksums turns off response checksum validation for
// ranged reads: a checksum covers the whole object, never a slice, and
// some servers send one anyway.
func withoutResponseChecksums(o *s3.Options) {
	o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
}

// checkRange verifies that the server sent the bytes asked for. A server
// that ignores Range answers 200 with the whole object; sending that as
// the slice would corrupt the download.
func checkRange(out *s3.GetObjectOutput, start, end, size int64) error {
	cr := aws.ToString(out.ContentRange)
	if cr == "" {
		if start != 0 || end != size-1 {
			return fmt.Errorf("s3 GetObject: %w: server ignored the Range header", storage.ErrUnavailable)
		}
		// A 200 carries the whole object, which is what was asked for.
	} else {
		gotStart, gotEnd, gotSize, ok := parseContentRange(cr)
		if ok && gotSize != size {
			return fmt.Errorf("s3 GetObject: %w: object has %d bytes, pinned %d", storage.ErrChanged, gotSize, size)
		}
		if !ok || gotStart != start || gotEnd != end {
			return fmt.Errorf("s3 GetObject: %w: asked for bytes %d-%d, server sends %q", storage.ErrUnavailable, start, end, cr)
		}
	}
	if n := aws.ToInt64(out.ContentLength); out.ContentLength != nil && n != end-start+1 {
		return fmt.Errorf("s3 GetObject: %w: asked for %d bytes, server sends %d", storage.ErrUnavailable, end-start+1, n)
	}
	return nil
}

// parseContentRange parses "bytes START-END/SIZE" (RFC 9110 §14.4).
func parseContentRange(s string) (start, end, size int64, ok bool) {
	rest, found := strings.CutPrefix(s, "bytes ")
	if !found {
		return 0, 0, 0, false
	}
	span, total, found := strings.Cut(rest, "/")
	if !found {
		return 0, 0, 0, false
	}
	first, last, found := strings.Cut(span, "-")
	if !found {
		return 0, 0, 0, false
	}
	var err1, err2, err3 error
	start, err1 = strconv.ParseInt(first, 10, 64)
	end, err2 = strconv.ParseInt(last, 10, 64)
	size, err3 = strconv.ParseInt(total, 10, 64)
	return start, end, size, err1 == nil && err2 == nil && err3 == nil
}

// body is a GetObject response body whose failures are storage errors, and
// which refuses to end early: a connection that ends before the range's
// last byte is errShortBody.
type body struct {
	rc io.ReadCloser
	storage.ExactReader
}

// errShortBody is the Short of a GetObject body (storage.ExactReader).
var errShortBody = fmt.Errorf("s3 GetObject body: %w", storage.ErrUnavailable)

func newBody(rc io.ReadCloser, length int64) body {
	return body{rc: rc, ExactReader: storage.ExactReader{R: rc, N: length, Short: errShortBody}}
}

func (b *body) Read(p []byte) (int, error) {
	n, err := b.ExactReader.Read(p)
	if err != nil && err != io.EOF && !errors.Is(err, errShortBody) {
		err = translate("GetObject body", err)
	}
	return n, err
}

func (b *body) Close() error { return b.rc.Close() }

// splicingBody is a body on one of connClient's connections: besides
// reading, it can move its bytes to a net/http response in the kernel
// (connBody.WriteNTo), which the gateway's copy prefers.
type splicingBody struct {
	body
	cb *connBody
}

// WriteNTo writes the next n bytes of the body to w (see connBody.WriteNTo):
// fewer only with an error, and never past the range that was opened.
func (b *splicingBody) WriteNTo(w io.Writer, n int64) (int64, error) {
	n = min(n, b.N)
	k, err := b.cb.WriteNTo(w, n)
	b.N -= k
	return k, err
}

// SetReadDeadline bounds the wait for the store's next bytes, as
// net.Conn's does (see connBody.SetReadDeadline).
func (b *splicingBody) SetReadDeadline(t time.Time) error { return b.cb.SetReadDeadline(t) }
