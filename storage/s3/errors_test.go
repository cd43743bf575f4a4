package s3_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/storage/s3"
)

// timeoutError is a net.Error that timed out, like a dial or read deadline.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

var translations = []struct {
	name string
	err  error
	want error // nil: no storage error
}{
	{"NoSuchKey", apiError("GetObject", 404, "NoSuchKey"), storage.ErrNotFound},
	{"NoSuchKey typed", &smithy.OperationError{Err: &types.NoSuchKey{}}, storage.ErrNotFound},
	{"NoSuchVersion", apiError("GetObject", 404, "NoSuchVersion"), storage.ErrNotFound},
	{"HEAD 404", apiError("HeadObject", 404, "NotFound"), storage.ErrNotFound},
	{"NotFound typed", &smithy.OperationError{Err: &types.NotFound{}}, storage.ErrNotFound},
	{"bare 404", apiError("GetObject", 404, ""), storage.ErrNotFound},
	{"NoSuchBucket", apiError("GetObject", 404, "NoSuchBucket"), storage.ErrNotFound},
	{"412 PreconditionFailed", apiError("GetObject", 412, "PreconditionFailed"), storage.ErrChanged},
	{"HEAD 412", apiError("HeadObject", 412, ""), storage.ErrChanged},
	{"416 InvalidRange", apiError("GetObject", 416, "InvalidRange"), storage.ErrChanged},
	{"500 InternalError", apiError("GetObject", 500, "InternalError"), storage.ErrUnavailable},
	{"503 SlowDown", apiError("GetObject", 503, "SlowDown"), storage.ErrUnavailable},
	{"403 AccessDenied", apiError("GetObject", 403, "AccessDenied"), storage.ErrUnavailable},
	{"KeyTooLong", apiError("PutObject", 400, "KeyTooLong"), storage.ErrInvalidKey},
	{"versitygw KeyTooLongError", apiError("PutObject", 400, "KeyTooLongError"), storage.ErrInvalidKey},
	{"InvalidObjectName", apiError("PutObject", 400, "InvalidObjectName"), storage.ErrInvalidKey},
	{"versitygw ExistingObjectIsDirectory", apiError("PutObject", 409, "ExistingObjectIsDirectory"), storage.ErrInvalidKey},
	{"versitygw DirectoryObjectContainsData", apiError("PutObject", 400, "DirectoryObjectContainsData"), storage.ErrInvalidKey},
	{"414 URI too long", apiError("HeadObject", 414, ""), storage.ErrInvalidKey},
	{"400 InvalidArgument", apiError("PutObject", 400, "InvalidArgument"), storage.ErrInvalid},
	{"400 EntityTooLarge", apiError("PutObject", 400, "EntityTooLarge"), storage.ErrInvalid},
	{"HEAD bare 400", apiError("HeadObject", 400, "BadRequest"), storage.ErrInvalid},
	{"413", apiError("UploadPart", 413, ""), storage.ErrInvalid},
	{"connection refused", transportError("GetObject", &url.Error{Op: "Get", URL: "http://x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}}), storage.ErrUnavailable},
	{"connection reset", transportError("GetObject", &url.Error{Op: "Get", URL: "http://x", Err: syscall.ECONNRESET}), storage.ErrUnavailable},
	{"network timeout", transportError("GetObject", &url.Error{Op: "Get", URL: "http://x", Err: timeoutError{}}), storage.ErrTimeout},
	{"no response, timed out", noResponse("HeadObject", timeoutError{}), storage.ErrTimeout},
	{"no response, reset", noResponse("GetObject", syscall.ECONNRESET), storage.ErrUnavailable},
	{"deadline", &smithy.OperationError{Err: &smithy.CanceledError{Err: context.DeadlineExceeded}}, storage.ErrTimeout},
	{"bare deadline", fmt.Errorf("wrapped: %w", context.DeadlineExceeded), storage.ErrTimeout},
	{"canceled", &smithy.OperationError{Err: &smithy.CanceledError{Err: context.Canceled}}, nil},
	{"unknown", errors.New("something odd"), storage.ErrUnavailable},
}

var storageErrors = []error{storage.ErrNotFound, storage.ErrChanged, storage.ErrInvalidKey, storage.ErrInvalid, storage.ErrTimeout, storage.ErrUnavailable}

// checkTranslation fails t unless err wraps want (and no other storage
// error) and still wraps cause, for the logs.
func checkTranslation(t *testing.T, what string, err, cause, want error) {
	t.Helper()
	if !errors.Is(err, cause) {
		t.Errorf("%s = %v, lost the cause %v", what, err, cause)
	}
	for _, e := range storageErrors {
		if errors.Is(err, e) != (e == want) {
			t.Errorf("%s = %v, want only %v among the storage errors", what, err, want)
		}
	}
}

func TestStatTranslatesSDKErrors(t *testing.T) {
	for _, tt := range translations {
		api := &fakeAPI{headObject: func(*awss3.HeadObjectInput) (*awss3.HeadObjectOutput, error) { return nil, tt.err }}
		st := s3.NewFromClient(api, "bucket")
		_, err := st.Stat(t.Context(), storage.Ref{Key: "k"})
		checkTranslation(t, "Stat with "+tt.name, err, tt.err, tt.want)
	}
}

func TestOpenTranslatesSDKErrors(t *testing.T) {
	for _, tt := range translations {
		api := &fakeAPI{getObject: func(*awss3.GetObjectInput) (*awss3.GetObjectOutput, error) { return nil, tt.err }}
		st := s3.NewFromClient(api, "bucket")
		_, err := st.Open(t.Context(), pinned, 0, 1)
		want := tt.want
		var status interface{ HTTPStatusCode() int }
		if want == storage.ErrInvalid && errors.As(tt.err, &status) && status.HTTPStatusCode() == 400 {
			want = storage.ErrNotFound // pinned names a version: see TestARefusedVersionIDIsNotFound
		}
		checkTranslation(t, "Open with "+tt.name, err, tt.err, want)
	}
}

func TestPutTranslatesSDKErrors(t *testing.T) {
	for _, tt := range translations {
		api := &fakeAPI{putObject: func(in *awss3.PutObjectInput) (*awss3.PutObjectOutput, error) { return nil, tt.err }}
		st := s3.NewFromClient(api, "bucket")
		_, err := st.Put(t.Context(), "", "k", strings.NewReader("x"), 1, "")
		checkTranslation(t, "Put with "+tt.name, err, tt.err, tt.want)
	}
}

func TestPingTranslatesSDKErrors(t *testing.T) {
	for _, tt := range translations {
		api := &fakeAPI{headBucket: func(*awss3.HeadBucketInput) (*awss3.HeadBucketOutput, error) { return nil, tt.err }}
		st := s3.NewFromClient(api, "bucket")
		want := tt.want
		if want == storage.ErrNotFound || want == storage.ErrInvalid || want == storage.ErrInvalidKey {
			want = storage.ErrUnavailable // a missing or refused bucket is a broken configuration
		}
		err := st.Ping(t.Context())
		if !errors.Is(err, tt.err) || want != nil && !errors.Is(err, want) {
			t.Errorf("Ping with %s = %v, want %v", tt.name, err, want)
		}
	}
}

func TestARefusedVersionIDIsNotFound(t *testing.T) {
	// AWS answers 400 InvalidArgument to a malformed version id; versitygw
	// answers a HEAD with a bare 400.
	for _, bad := range []error{apiError("GetObject", 400, "InvalidArgument"), apiError("HeadObject", 400, "BadRequest")} {
		api := &fakeAPI{
			headObject: func(*awss3.HeadObjectInput) (*awss3.HeadObjectOutput, error) { return nil, bad },
			getObject:  func(*awss3.GetObjectInput) (*awss3.GetObjectOutput, error) { return nil, bad },
		}
		st := s3.NewFromClient(api, "bucket")
		_, err := st.Stat(t.Context(), storage.Ref{Key: "k", VersionID: "garbage"})
		checkTranslation(t, "Stat(version garbage)", err, bad, storage.ErrNotFound)
		_, err = st.Open(t.Context(), pinned, 0, 1)
		checkTranslation(t, "Open(version garbage)", err, bad, storage.ErrNotFound)

		// Without a version id, the 400 is about something else in the
		// request: still the caller's fault, never a 502.
		_, err = st.Stat(t.Context(), storage.Ref{Key: "k"})
		checkTranslation(t, "Stat(no version)", err, bad, storage.ErrInvalid)
	}
}

func TestBodyReadFailuresAreStorageErrors(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want error
	}{
		{"reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, storage.ErrUnavailable},
		{"timeout", &net.OpError{Op: "read", Err: timeoutError{}}, storage.ErrTimeout},
		{"early EOF", io.EOF, storage.ErrUnavailable},
	} {
		api := &fakeAPI{getObject: func(*awss3.GetObjectInput) (*awss3.GetObjectOutput, error) {
			return &awss3.GetObjectOutput{
				Body:          io.NopCloser(io.MultiReader(strings.NewReader("01"), errReader{tt.err})),
				ContentLength: aws.Int64(4),
				ContentRange:  aws.String("bytes 0-3/10"),
			}, nil
		}}
		st := s3.NewFromClient(api, "bucket")
		rc, err := st.Open(t.Context(), pinned, 0, 4)
		if err != nil {
			t.Fatalf("Open = %v", err)
		}
		b, err := io.ReadAll(rc)
		rc.Close()
		if string(b) != "01" || !errors.Is(err, tt.want) {
			t.Errorf("reading a body that fails with %s = %q, %v, want \"01\", %v", tt.name, b, err, tt.want)
		}
	}
}
