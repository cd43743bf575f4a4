package s3_test

import (
	"context"
	"errors"
	"net/http"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/dlgate/dlgate/storage/s3"
)

var _ s3.API = (*fakeAPI)(nil)

// fakeAPI answers each call with its function field; a call without one
// fails with errUnexpectedCall.
type fakeAPI struct {
	headObject              func(*awss3.HeadObjectInput) (*awss3.HeadObjectOutput, error)
	getObject               func(*awss3.GetObjectInput) (*awss3.GetObjectOutput, error)
	putObject               func(*awss3.PutObjectInput) (*awss3.PutObjectOutput, error)
	createMultipartUpload   func(*awss3.CreateMultipartUploadInput) (*awss3.CreateMultipartUploadOutput, error)
	uploadPart              func(*awss3.UploadPartInput) (*awss3.UploadPartOutput, error)
	completeMultipartUpload func(*awss3.CompleteMultipartUploadInput) (*awss3.CompleteMultipartUploadOutput, error)
	abortMultipartUpload    func(context.Context, *awss3.AbortMultipartUploadInput) (*awss3.AbortMultipartUploadOutput, error)
	headBucket              func(*awss3.HeadBucketInput) (*awss3.HeadBucketOutput, error)
}

var errUnexpectedCall = errors.New("fake: unexpected call")

func (f *fakeAPI) HeadObject(_ context.Context, in *awss3.HeadObjectInput, _ ...func(*awss3.Options)) (*awss3.HeadObjectOutput, error) {
	if f.headObject == nil {
		return nil, errUnexpectedCall
	}
	return f.headObject(in)
}

func (f *fakeAPI) GetObject(_ context.Context, in *awss3.GetObjectInput, _ ...func(*awss3.Options)) (*awss3.GetObjectOutput, error) {
	if f.getObject == nil {
		return nil, errUnexpectedCall
	}
	return f.getObject(in)
}

func (f *fakeAPI) PutObject(_ context.Context, in *awss3.PutObjectInput, _ ...func(*awss3.Options)) (*awss3.PutObjectOutput, error) {
	if f.putObject == nil {
		return nil, errUnexpectedCall
	}
	return f.putObject(in)
}

func (f *fakeAPI) CreateMultipartUpload(_ context.Context, in *awss3.CreateMultipartUploadInput, _ ...func(*awss3.Options)) (*awss3.CreateMultipartUploadOutput, error) {
	if f.createMultipartUpload == nil {
		return nil, errUnexpectedCall
	}
	return f.createMultipartUpload(in)
}

func (f *fakeAPI) UploadPart(_ context.Context, in *awss3.UploadPartInput, _ ...func(*awss3.Options)) (*awss3.UploadPartOutput, error) {
	if f.uploadPart == nil {
		return nil, errUnexpectedCall
	}
	return f.uploadPart(in)
}

func (f *fakeAPI) CompleteMultipartUpload(_ context.Context, in *awss3.CompleteMultipartUploadInput, _ ...func(*awss3.Options)) (*awss3.CompleteMultipartUploadOutput, error) {
	if f.completeMultipartUpload == nil {
		return nil, errUnexpectedCall
	}
	return f.completeMultipartUpload(in)
}

func (f *fakeAPI) AbortMultipartUpload(ctx context.Context, in *awss3.AbortMultipartUploadInput, _ ...func(*awss3.Options)) (*awss3.AbortMultipartUploadOutput, error) {
	if f.abortMultipartUpload == nil {
		return nil, errUnexpectedCall
	}
	return f.abortMultipartUpload(ctx, in)
}

func (f *fakeAPI) HeadBucket(_ context.Context, in *awss3.HeadBucketInput, _ ...func(*awss3.Options)) (*awss3.HeadBucketOutput, error) {
	if f.headBucket == nil {
		return nil, errUnexpectedCall
	}
	return f.headBucket(in)
}

// apiError is what the SDK returns for an S3 error response: an operation
// error around an HTTP response error around the decoded S3 error.
func apiError(op string, status int, code string) error {
	return &smithy.OperationError{
		ServiceID:     "S3",
		OperationName: op,
		Err: &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{
				Response: &smithyhttp.Response{Response: &http.Response{StatusCode: status}},
				Err:      &smithy.GenericAPIError{Code: code, Message: "fake " + code},
			},
			RequestID: "fake-request",
		},
	}
}

// transportError is what the SDK returns when no response arrived.
func transportError(op string, err error) error {
	return &smithy.OperationError{
		ServiceID:     "S3",
		OperationName: op,
		Err:           &smithyhttp.RequestSendError{Err: err},
	}
}

// noResponse is how the SDK can also report a request that got no
// answer: a response error of status 0 around the transport's error.
func noResponse(op string, err error) error {
	return &smithy.OperationError{
		ServiceID:     "S3",
		OperationName: op,
		Err: &awshttp.ResponseError{
			ResponseError: &smithyhttp.ResponseError{Response: &smithyhttp.Response{Response: &http.Response{}}, Err: err},
		},
	}
}
