package s3_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/storage/s3"
	"github.com/dlgate/dlgate/storage/storagetest"
)

// pinned is a 10-byte version as a link records it.
var pinned = storage.Version{Bucket: "bucket", Key: "dir/k", VersionID: "v1", Size: 10, ETag: `"etag1"`}

func TestOpenNamesVersionETagAndRange(t *testing.T) {
	for _, tt := range []struct {
		versionID   string
		wantVersion *string
	}{
		{"v1", aws.String("v1")},
		{"null", nil},
		{"", nil},
	} {
		var got *awss3.GetObjectInput
		api := &fakeAPI{getObject: func(in *awss3.GetObjectInput) (*awss3.GetObjectOutput, error) {
			got = in
			return &awss3.GetObjectOutput{
				Body:          io.NopCloser(strings.NewReader("3456")),
				ContentLength: aws.Int64(4),
				ContentRange:  aws.String("bytes 3-6/10"),
			}, nil
		}}
		st := s3.NewFromClient(api, "default")
		v := pinned
		v.VersionID = tt.versionID
		rc, err := st.Open(t.Context(), v, 3, 4)
		if err != nil {
			t.Fatalf("Open(version %q) = %v", tt.versionID, err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if string(b) != "3456" || err != nil {
			t.Errorf("Open(version %q) read %q, %v", tt.versionID, b, err)
		}
		if aws.ToString(got.Bucket) != "bucket" || aws.ToString(got.Key) != "dir/k" ||
			aws.ToString(got.VersionId) != aws.ToString(tt.wantVersion) || (got.VersionId == nil) != (tt.wantVersion == nil) ||
			aws.ToString(got.IfMatch) != `"etag1"` || aws.ToString(got.Range) != "bytes=3-6" {
			t.Errorf("Open(version %q) sent bucket %q key %q version %v If-Match %q Range %q; want bucket, dir/k, %v, \"etag1\", bytes=3-6",
				tt.versionID, aws.ToString(got.Bucket), aws.ToString(got.Key), aws.ToString(got.VersionId),
				aws.ToString(got.IfMatch), aws.ToString(got.Range), aws.ToString(tt.wantVersion))
		}
	}
}

func TestOpenOfNothingSendsNoRequest(t *testing.T) {
	st := s3.NewFromClient(&fakeAPI{}, "bucket") // every call fails
	for _, offset := range []int64{0, 5, 10} {
		rc, err := st.Open(t.Context(), pinned, offset, 0)
		if err != nil {
			t.Fatalf("Open(%d, 0) = %v", offset, err)
		}
		if b, err := io.ReadAll(rc); len(b) != 0 || err != nil {
			t.Errorf("Open(%d, 0) read %q, %v, want nothing", offset, b, err)
		}
		rc.Close()
	}
}

func TestOpenChecksWhatTheServerSends(t *testing.T) {
	tests := []struct {
		name           string
		offset, length int64
		contentLength  int64
		contentRange   string
		want           error // nil: accepted
	}{
		{"the slice asked for", 2, 3, 3, "bytes 2-4/10", nil},
		{"a 200 with the whole object", 0, 10, 10, "", nil},
		{"a 200 instead of a slice", 2, 3, 10, "", storage.ErrUnavailable},
		{"another slice", 2, 3, 3, "bytes 3-5/10", storage.ErrUnavailable},
		{"a longer object", 2, 3, 3, "bytes 2-4/11", storage.ErrChanged},
		{"a shorter object", 0, 10, 9, "bytes 0-8/9", storage.ErrChanged},
		{"a garbled Content-Range", 2, 3, 3, "bytes two-four/10", storage.ErrUnavailable},
		{"a wrong Content-Length", 2, 3, 4, "bytes 2-4/10", storage.ErrUnavailable},
	}
	for _, tt := range tests {
		closed := false
		api := &fakeAPI{getObject: func(*awss3.GetObjectInput) (*awss3.GetObjectOutput, error) {
			out := &awss3.GetObjectOutput{
				Body:          closeFunc{strings.NewReader(strings.Repeat("x", int(tt.contentLength))), func() { closed = true }},
				ContentLength: aws.Int64(tt.contentLength),
			}
			if tt.contentRange != "" {
				out.ContentRange = aws.String(tt.contentRange)
			}
			return out, nil
		}}
		st := s3.NewFromClient(api, "bucket")
		rc, err := st.Open(t.Context(), pinned, tt.offset, tt.length)
		if tt.want == nil {
			if err != nil {
				t.Errorf("Open answered by %s = %v, want success", tt.name, err)
			} else {
				rc.Close()
			}
			continue
		}
		if !errors.Is(err, tt.want) {
			t.Errorf("Open answered by %s = %v, want %v", tt.name, err, tt.want)
		}
		if !closed {
			t.Errorf("Open answered by %s left the response body open", tt.name)
		}
	}
}

type closeFunc struct {
	io.Reader
	close func()
}

func (c closeFunc) Close() error { c.close(); return nil }

func TestOpenRefusesAVersionWithoutETag(t *testing.T) {
	st := s3.NewFromClient(&fakeAPI{}, "bucket")
	v := pinned
	v.ETag = ""
	if rc, err := st.Open(t.Context(), v, 0, 1); err == nil {
		rc.Close()
		t.Errorf("Open(version without ETag) succeeded; nothing would guard a replaced object")
	}
}

func TestStatReportsTheResponse(t *testing.T) {
	api := &fakeAPI{headObject: func(in *awss3.HeadObjectInput) (*awss3.HeadObjectOutput, error) {
		if in.VersionId != nil {
			return nil, fmt.Errorf("sent VersionId %q for the current version", *in.VersionId)
		}
		return &awss3.HeadObjectOutput{
			ContentLength: aws.Int64(10),
			ETag:          aws.String(`"e"`),
			ContentType:   aws.String("text/plain"),
		}, nil
	}}
	st := s3.NewFromClient(api, "bucket")
	got, err := st.Stat(t.Context(), storage.Ref{Key: "k"})
	want := storage.Version{Bucket: "bucket", Key: "k", VersionID: "null", Size: 10, ETag: `"e"`, ContentType: "text/plain"}
	if err != nil || got != want {
		t.Errorf("Stat = %+v, %v, want %+v", got, err, want)
	}
}

func TestBucketsAreValidatedButTheDefaultIsTrusted(t *testing.T) {
	calls := 0
	api := &fakeAPI{headObject: func(*awss3.HeadObjectInput) (*awss3.HeadObjectOutput, error) {
		calls++
		return &awss3.HeadObjectOutput{ContentLength: aws.Int64(1), ETag: aws.String(`"e"`)}, nil
	}}
	st := s3.NewFromClient(api, "Legacy_Bucket")
	for _, bucket := range []string{"", "Legacy_Bucket", "modern-bucket"} {
		if _, err := st.Stat(t.Context(), storage.Ref{Bucket: bucket, Key: "k"}); err != nil {
			t.Errorf("Stat(bucket %q) = %v", bucket, err)
		}
	}
	for _, bucket := range []string{"Other_Legacy", "../x", "a/b"} {
		_, err := st.Stat(t.Context(), storage.Ref{Bucket: bucket, Key: "k"})
		if !errors.Is(err, storage.ErrInvalidKey) {
			t.Errorf("Stat(bucket %q) = %v, want ErrInvalidKey", bucket, err)
		}
	}
	if calls != 3 {
		t.Errorf("%d HeadObject calls, want 3: invalid buckets must not reach the server", calls)
	}
}

func TestSmallBodyOfKnownSizeIsOnePutObjectWithItsSHA256(t *testing.T) {
	var sent []byte
	var got *awss3.PutObjectInput
	api := &fakeAPI{putObject: func(in *awss3.PutObjectInput) (*awss3.PutObjectOutput, error) {
		got = in
		var err error
		sent, err = io.ReadAll(in.Body)
		return &awss3.PutObjectOutput{ETag: aws.String(`"e"`), VersionId: aws.String("v9")}, err
	}}
	st := s3.NewFromClient(api, "bucket", s3.WithPartSize(16))
	v, err := st.Put(t.Context(), "", "k", storagetest.OnlyReader(strings.NewReader("exactly 16 bytes")), 16, "text/plain")
	if err != nil {
		t.Fatalf("Put = %v", err)
	}
	if string(sent) != "exactly 16 bytes" || aws.ToInt64(got.ContentLength) != 16 || aws.ToString(got.ContentType) != "text/plain" {
		t.Errorf("PutObject got %q, length %d, type %q", sent, aws.ToInt64(got.ContentLength), aws.ToString(got.ContentType))
	}
	if want := sha256Base64("exactly 16 bytes"); aws.ToString(got.ChecksumSHA256) != want {
		t.Errorf("PutObject x-amz-checksum-sha256 = %q, want %q: the server must be able to verify the body", aws.ToString(got.ChecksumSHA256), want)
	}
	if got.ContentMD5 != nil {
		t.Errorf("PutObject Content-MD5 = %q, want none: the SHA-256 checksum is the integrity check", aws.ToString(got.ContentMD5))
	}
	want := storage.Version{Bucket: "bucket", Key: "k", VersionID: "v9", Size: 16, ETag: `"e"`, ContentType: "text/plain",
		SHA256: storagetest.SHA256Hex([]byte("exactly 16 bytes"))}
	if v != want {
		t.Errorf("Put = %+v, want %+v", v, want)
	}
}

func TestSmallBodyOfUnknownSizeIsOnePutObjectWithItsSHA256(t *testing.T) {
	var got *awss3.PutObjectInput
	api := &fakeAPI{putObject: func(in *awss3.PutObjectInput) (*awss3.PutObjectOutput, error) {
		got = in
		return &awss3.PutObjectOutput{ETag: aws.String(`"e"`)}, nil
	}}
	st := s3.NewFromClient(api, "bucket", s3.WithPartSize(16))
	v, err := st.Put(t.Context(), "", "k", storagetest.OnlyReader(strings.NewReader("short")), -1, "")
	if err != nil {
		t.Fatalf("Put = %v", err)
	}
	if _, ok := got.Body.(io.Seeker); !ok {
		t.Errorf("PutObject body is %T, want a seekable buffer the SDK can retry", got.Body)
	}
	if want := sha256Base64("short"); aws.ToString(got.ChecksumSHA256) != want {
		t.Errorf("x-amz-checksum-sha256 = %q, want %q", aws.ToString(got.ChecksumSHA256), want)
	}
	if aws.ToString(got.ContentType) != s3.DefaultContentType {
		t.Errorf("Content-Type = %q, want %q", aws.ToString(got.ContentType), s3.DefaultContentType)
	}
	if v.Size != 5 || v.VersionID != "null" || v.SHA256 != storagetest.SHA256Hex([]byte("short")) {
		t.Errorf("Put = %+v, want size 5, version null, the SHA-256 of \"short\"", v)
	}
}

func sha256Base64(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// multipartFake records a multipart upload in memory.
type multipartFake struct {
	fakeAPI
	parts     []string
	completed []int32
	aborted   []string
	abortCtx  error
	failPart  int32 // UploadPart of this number fails
	onPart    func(int32)
}

func newMultipartFake() *multipartFake {
	f := &multipartFake{}
	f.createMultipartUpload = func(in *awss3.CreateMultipartUploadInput) (*awss3.CreateMultipartUploadOutput, error) {
		if in.ChecksumAlgorithm != types.ChecksumAlgorithmSha256 {
			return nil, apiError("CreateMultipartUpload", 400, "InvalidRequest")
		}
		return &awss3.CreateMultipartUploadOutput{UploadId: aws.String("up1")}, nil
	}
	f.uploadPart = func(in *awss3.UploadPartInput) (*awss3.UploadPartOutput, error) {
		num := aws.ToInt32(in.PartNumber)
		if f.onPart != nil {
			f.onPart(num)
		}
		if num == f.failPart {
			return nil, apiError("UploadPart", 500, "InternalError")
		}
		b, _ := io.ReadAll(in.Body)
		if aws.ToString(in.ChecksumSHA256) != sha256Base64(string(b)) {
			return nil, apiError("UploadPart", 400, "BadDigest")
		}
		f.parts = append(f.parts, string(b))
		return &awss3.UploadPartOutput{ETag: aws.String(fmt.Sprintf(`"p%d"`, num))}, nil
	}
	f.completeMultipartUpload = func(in *awss3.CompleteMultipartUploadInput) (*awss3.CompleteMultipartUploadOutput, error) {
		for i, p := range in.MultipartUpload.Parts {
			if aws.ToString(p.ETag) != fmt.Sprintf(`"p%d"`, i+1) || aws.ToString(p.ChecksumSHA256) != sha256Base64(f.parts[i]) {
				return nil, apiError("CompleteMultipartUpload", 400, "InvalidPart")
			}
			f.completed = append(f.completed, aws.ToInt32(p.PartNumber))
		}
		return &awss3.CompleteMultipartUploadOutput{ETag: aws.String(`"all-3"`), VersionId: aws.String("v2")}, nil
	}
	f.abortMultipartUpload = func(ctx context.Context, in *awss3.AbortMultipartUploadInput) (*awss3.AbortMultipartUploadOutput, error) {
		f.aborted = append(f.aborted, aws.ToString(in.UploadId))
		f.abortCtx = ctx.Err()
		return &awss3.AbortMultipartUploadOutput{}, nil
	}
	return f
}

func TestLargeBodyGoesUpOnePartAtATime(t *testing.T) {
	for _, size := range []int64{-1, 10} {
		f := newMultipartFake()
		st := s3.NewFromClient(f, "bucket", s3.WithPartSize(4))
		v, err := st.Put(t.Context(), "", "k", storagetest.OnlyReader(strings.NewReader("abcdefghij")), size, "")
		if err != nil {
			t.Fatalf("Put(size %d) = %v", size, err)
		}
		if strings.Join(f.parts, "|") != "abcd|efgh|ij" || fmt.Sprint(f.completed) != "[1 2 3]" {
			t.Errorf("Put(size %d) uploaded parts %q, completed %v; want abcd|efgh|ij, [1 2 3]", size, f.parts, f.completed)
		}
		want := storage.Version{Bucket: "bucket", Key: "k", VersionID: "v2", Size: 10, ETag: `"all-3"`, ContentType: s3.DefaultContentType,
			SHA256: storagetest.SHA256Hex([]byte("abcdefghij"))}
		if v != want {
			t.Errorf("Put(size %d) = %+v, want %+v", size, v, want)
		}
		if len(f.aborted) != 0 {
			t.Errorf("Put(size %d) aborted a successful upload", size)
		}
	}
}

func TestBodyOfExactlyWholePartsEndsCleanly(t *testing.T) {
	f := newMultipartFake()
	st := s3.NewFromClient(f, "bucket", s3.WithPartSize(4))
	v, err := st.Put(t.Context(), "", "k", strings.NewReader("abcdefgh"), -1, "")
	if err != nil || v.Size != 8 || strings.Join(f.parts, "|") != "abcd|efgh" {
		t.Errorf("Put(8 bytes, 4-byte parts) = %+v, %v with parts %q, want 2 full parts", v, err, f.parts)
	}
}

func TestFailedPartAbortsTheUpload(t *testing.T) {
	f := newMultipartFake()
	f.failPart = 2
	st := s3.NewFromClient(f, "bucket", s3.WithPartSize(4))
	_, err := st.Put(t.Context(), "", "k", strings.NewReader("abcdefghij"), -1, "")
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Put with a failing part = %v, want ErrUnavailable", err)
	}
	if fmt.Sprint(f.aborted) != "[up1]" || f.completed != nil {
		t.Errorf("aborted %v, completed %v; want [up1], none", f.aborted, f.completed)
	}
}

func TestUploadAbortedEvenWhenTheCallerGaveUp(t *testing.T) {
	f := newMultipartFake()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	f.onPart = func(num int32) {
		if num == 2 {
			cancel()
		}
	}
	f.failPart = 2
	st := s3.NewFromClient(f, "bucket", s3.WithPartSize(4))
	if _, err := st.Put(ctx, "", "k", strings.NewReader("abcdefghij"), -1, ""); err == nil {
		t.Fatal("Put succeeded")
	}
	if fmt.Sprint(f.aborted) != "[up1]" || f.abortCtx != nil {
		t.Errorf("aborted %v with context error %v; want [up1] on a live context", f.aborted, f.abortCtx)
	}
}

func TestBodyOfTheWrongSizeAbortsTheUpload(t *testing.T) {
	for _, body := range []string{"abcdefghi", "abcdefghijk"} {
		f := newMultipartFake()
		st := s3.NewFromClient(f, "bucket", s3.WithPartSize(4))
		_, err := st.Put(t.Context(), "", "k", strings.NewReader(body), 10, "")
		if err == nil {
			t.Errorf("Put(%d bytes, size 10) succeeded", len(body))
		}
		if errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("Put(%d bytes, size 10) = %v, a fault of the body, not the store", len(body), err)
		}
		if fmt.Sprint(f.aborted) != "[up1]" || f.completed != nil {
			t.Errorf("Put(%d bytes, size 10): aborted %v, completed %v; want [up1], none", len(body), f.aborted, f.completed)
		}
		if len(f.parts) > 2 {
			t.Errorf("Put(%d bytes, size 10) sent its last part %q", len(body), f.parts[2])
		}
	}
}

func TestBodyLongerThanItsSizeIsRefusedBeforeAnythingIsSent(t *testing.T) {
	calls := 0
	api := &fakeAPI{putObject: func(in *awss3.PutObjectInput) (*awss3.PutObjectOutput, error) {
		calls++
		return &awss3.PutObjectOutput{ETag: aws.String(`"e"`)}, nil
	}}
	st := s3.NewFromClient(api, "bucket", s3.WithPartSize(16))
	_, err := st.Put(t.Context(), "", "k", bytes.NewReader([]byte("0123456789")), 5, "")
	if err == nil {
		t.Fatalf("Put(10 bytes, size 5) succeeded")
	}
	if calls != 0 {
		t.Errorf("Put(10 bytes, size 5) sent %d PutObject: the part is read, and the extra byte seen, before it goes out", calls)
	}
}

func TestBadDigestIsTheStoreFailingNotTheRequest(t *testing.T) {
	api := &fakeAPI{putObject: func(in *awss3.PutObjectInput) (*awss3.PutObjectOutput, error) {
		return nil, apiError("PutObject", 400, "BadDigest")
	}}
	st := s3.NewFromClient(api, "bucket")
	_, err := st.Put(t.Context(), "", "k", strings.NewReader("x"), 1, "")
	if !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Put answered BadDigest = %v, want ErrUnavailable (damaged on the way; a retry can pass)", err)
	}
}

func TestStatReportsOnlyAFullObjectSHA256(t *testing.T) {
	sum := sha256.Sum256([]byte("x"))
	b64 := base64.StdEncoding.EncodeToString(sum[:])
	const single, multi = `"9dd4e461268c8034f5c8564e155c67a6"`, `"9dd4e461268c8034f5c8564e155c67a6-3"`
	for _, tt := range []struct {
		name     string
		checksum string
		typ      types.ChecksumType
		etag     string
		want     string
	}{
		{"full object", b64, types.ChecksumTypeFullObject, single, hex.EncodeToString(sum[:])},
		// A single PUT's checksum is the object's (S3 API Reference,
		// PutObject: "the checksum type is always FULL_OBJECT");
		// SeaweedFS names no type.
		{"untyped, of a single-part object", b64, "", single, hex.EncodeToString(sum[:])},
		{"composite of 3 parts", b64 + "-3", types.ChecksumTypeComposite, multi, ""},
		{"untyped composite", b64 + "-3", "", multi, ""},
		{"untyped composite under a single-part ETag", b64 + "-3", "", single, ""},
		{"untyped, of a multipart object, without its count", b64, "", multi, ""},
		{"composite without its count", b64, types.ChecksumTypeComposite, single, ""},
		{"full object of a multipart upload", b64, types.ChecksumTypeFullObject, multi, hex.EncodeToString(sum[:])},
		{"none", "", "", single, ""},
		{"not base64", "%%%", types.ChecksumTypeFullObject, single, ""},
		{"too short", base64.StdEncoding.EncodeToString(sum[:16]), types.ChecksumTypeFullObject, single, ""},
		{"untyped, too short", base64.StdEncoding.EncodeToString(sum[:16]), "", single, ""},
	} {
		var mode types.ChecksumMode
		api := &fakeAPI{headObject: func(in *awss3.HeadObjectInput) (*awss3.HeadObjectOutput, error) {
			mode = in.ChecksumMode
			out := &awss3.HeadObjectOutput{ContentLength: aws.Int64(1), ETag: aws.String(tt.etag), ChecksumType: tt.typ}
			if tt.checksum != "" {
				out.ChecksumSHA256 = aws.String(tt.checksum)
			}
			return out, nil
		}}
		v, err := s3.NewFromClient(api, "bucket").Stat(t.Context(), storage.Ref{Key: "k"})
		if err != nil || v.SHA256 != tt.want {
			t.Errorf("Stat with a %s checksum = %q, %v, want %q", tt.name, v.SHA256, err, tt.want)
		}
		if mode != types.ChecksumModeEnabled {
			t.Errorf("HeadObject ChecksumMode = %q, want ENABLED", mode)
		}
	}
}

func TestStatWithoutPermissionToSeeTheChecksumHasNoDigest(t *testing.T) {
	var modes []types.ChecksumMode
	api := &fakeAPI{headObject: func(in *awss3.HeadObjectInput) (*awss3.HeadObjectOutput, error) {
		modes = append(modes, in.ChecksumMode)
		if in.ChecksumMode != "" {
			return nil, apiError("HeadObject", 403, "AccessDenied") // no kms:Decrypt
		}
		return &awss3.HeadObjectOutput{ContentLength: aws.Int64(1), ETag: aws.String(`"e"`)}, nil
	}}
	v, err := s3.NewFromClient(api, "bucket").Stat(t.Context(), storage.Ref{Key: "k"})
	if err != nil || v.SHA256 != "" || fmt.Sprint(modes) != "[ENABLED ]" {
		t.Errorf("Stat = %+v, %v after HeadObject modes %q; want the object without a digest, asked in checksum mode, then without", v, err, modes)
	}
}
