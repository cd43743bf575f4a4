// Package s3 is a storage.Store on any S3-compatible server, through
// aws-sdk-go-v2.
//
// Reads always name the pinned version: its VersionId when the bucket has
// versioning, and in every case If-Match with the recorded ETag, so that an
// object replaced in a bucket without versioning is refused
// (storage.ErrChanged) and never served in place of the pinned one.
package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlgate/dlgate/storage"
)

// The store and the abilities it has, composed once here (STYLE: tusd's
// StoreComposer): the gateway finds them by type assertion.
var (
	_ storage.Store    = (*Store)(nil)
	_ storage.Pinger   = (*Store)(nil)
	_ storage.Deleter  = (*Store)(nil)
	_ storage.Uploader = (*Store)(nil)
)

// The SDK client makes every call of API (and of deleteAPI and uploadAPI,
// beside their declarations).
var _ API = (*s3.Client)(nil)

const (
	// DefaultPartSize is the multipart part size, and the largest body
	// sent in one PutObject.
	DefaultPartSize = 8 << 20
	// MinPartSize is S3's smallest part but the last.
	MinPartSize = 5 << 20
	// maxParts is S3's limit on parts per upload.
	maxParts = 10000
	// DefaultRegion is used when Options.Region is empty.
	DefaultRegion = "us-east-1"
	// DefaultContentType is recorded when Put is given no content type,
	// rather than leaving the choice to the server.
	DefaultContentType = "application/octet-stream"
	// DefaultStallTimeout is how long a connection to the server may stay
	// silent: waiting for response headers, or between two reads of a
	// response. A stopped server with open connections (SIGSTOP, a hung
	// host) answers nothing and closes nothing, and without a bound every
	// call would wait forever. Callers bound their own waits more tightly
	// through ctx (the gateway's open and idle timeouts); this is the
	// floor under every call, Stat and Put included.
	DefaultStallTimeout = time.Minute
)

// API lists the S3 calls the Store makes; *s3.Client implements it, and
// tests substitute a fake.
type API interface {
	HeadObject(ctx context.Context, in *s3.HeadObjectInput, optFns ...func(*s3.Options)) (*s3.HeadObjectOutput, error)
	GetObject(ctx context.Context, in *s3.GetObjectInput, optFns ...func(*s3.Options)) (*s3.GetObjectOutput, error)
	PutObject(ctx context.Context, in *s3.PutObjectInput, optFns ...func(*s3.Options)) (*s3.PutObjectOutput, error)
	CreateMultipartUpload(ctx context.Context, in *s3.CreateMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.CreateMultipartUploadOutput, error)
	UploadPart(ctx context.Context, in *s3.UploadPartInput, optFns ...func(*s3.Options)) (*s3.UploadPartOutput, error)
	CompleteMultipartUpload(ctx context.Context, in *s3.CompleteMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.CompleteMultipartUploadOutput, error)
	AbortMultipartUpload(ctx context.Context, in *s3.AbortMultipartUploadInput, optFns ...func(*s3.Options)) (*s3.AbortMultipartUploadOutput, error)
	HeadBucket(ctx context.Context, in *s3.HeadBucketInput, optFns ...func(*s3.Options)) (*s3.HeadBucketOutput, error)
}

// Options configures New.
type Options struct {
	// Bucket is the default bucket, used when a caller passes "".
	// Required.
	Bucket string
	// Endpoint is the base URL of an S3-compatible server
	// ("http://127.0.0.1:7070"); empty means AWS.
	Endpoint string
	// Region defaults to DefaultRegion.
	Region string
	// PathStyle addresses buckets as http://host/bucket/key instead of
	// http://bucket.host/key; most self-hosted servers need it.
	PathStyle bool
	// PartSize is the multipart part size in bytes, at least MinPartSize;
	// 0 means DefaultPartSize. Each Put in flight holds one part in memory.
	PartSize int64
	// StallTimeout bounds how long a connection may stay silent (response
	// headers, then each read of a body); 0 means DefaultStallTimeout.
	StallTimeout time.Duration
	// CAFile is a PEM file of CA certificates trusted, besides the
	// system's, for an https Endpoint (GATEWAY_S3_CA); the SDK's own
	// AWS_CA_BUNDLE is honoured too, and CAFile wins over it.
	CAFile string
}

// Store reads and writes object versions in S3 buckets. It is safe for
// concurrent use.
type Store struct {
	api      API
	bucket   string
	partSize int64
	bufs     sync.Pool // of *[]byte of partSize
	// noDigest leaves the whole object's SHA-256 out of Put (the parts'
	// checksums stay), for BenchmarkPut's comparison only
	// (export_test.go).
	noDigest bool
}

// Option configures NewFromClient.
type Option func(*Store)

// WithPartSize sets the multipart part size (default DefaultPartSize). It
// is not checked against MinPartSize, so that tests with a fake API can use
// tiny parts.
func WithPartSize(n int64) Option {
	return func(s *Store) {
		if n > 0 {
			s.partSize = n
		}
	}
}

// New returns a Store for opts, with credentials from the SDK's default
// chain (environment, shared config files, container or instance roles).
// It returns an error when opts.Bucket is empty, PartSize is below
// MinPartSize, or the SDK configuration cannot be loaded; it does not
// contact the server (see Ping).
func New(ctx context.Context, opts Options) (*Store, error) {
	if opts.Bucket == "" {
		return nil, errors.New("s3: no bucket configured")
	}
	if opts.PartSize != 0 && opts.PartSize < MinPartSize {
		return nil, fmt.Errorf("s3: part size %d is below S3's minimum of %d", opts.PartSize, MinPartSize)
	}
	region := opts.Region
	if region == "" {
		region = DefaultRegion
	}
	stall := opts.StallTimeout
	if stall <= 0 {
		stall = DefaultStallTimeout
	}
	hc := httpClient(stall)
	load := []func(*config.LoadOptions) error{config.WithRegion(region), config.WithHTTPClient(hc)}
	if opts.CAFile != "" {
		ca, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("s3: CA file: %w", err)
		}
		load = append(load, config.WithCustomCABundle(bytes.NewReader(ca)))
	}
	cfg, err := config.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("s3: load AWS configuration: %w", err)
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) {
		if opts.Endpoint != "" {
			o.BaseEndpoint = aws.String(opts.Endpoint)
		}
		o.UsePathStyle = opts.PathStyle
		// Object bodies over plain HTTP on connections the gateway can
		// splice from; everything else through hc.
		// cfg.HTTPClient is hc with the CA bundle, if any, applied.
		o.HTTPClient = newConnClient(cfg.HTTPClient, stall)
	})
	return NewFromClient(client, opts.Bucket, WithPartSize(opts.PartSize)), nil
}

// httpClient is the SDK's HTTP client with every wait on the server
// bounded by stall: ResponseHeaderTimeout for the answer to a request, and
// a read deadline renewed before each read of the connection for a body
// that stops arriving (a slow but moving body is never cut). As many
// connections per server stay open for reuse as connClient keeps (the
// SDK's default is 10, fewer than the gateway's concurrent requests), and
// responses are never compressed: objects are sent as stored.
func httpClient(stall time.Duration) *awshttp.BuildableClient {
	return awshttp.NewBuildableClient().
		WithTransportOptions(func(tr *http.Transport) {
			tr.ResponseHeaderTimeout = stall
			tr.MaxIdleConnsPerHost = maxIdlePerHost
			tr.DisableCompression = true
		}).
		WithReadTimeout(stall)
}

// NewFromClient returns a Store that makes its calls through api, with
// defaultBucket standing for bucket "".
func NewFromClient(api API, defaultBucket string, opts ...Option) *Store {
	s := &Store{api: api, bucket: defaultBucket, partSize: DefaultPartSize}
	for _, opt := range opts {
		opt(s)
	}
	size := s.partSize
	s.bufs.New = func() any { b := make([]byte, size); return &b }
	return s
}

// Ping checks that the default bucket is reachable with the configured
// credentials. Errors: storage.ErrTimeout, storage.ErrUnavailable (also
// when the bucket does not exist: that is a configuration fault, not a
// missing object).
func (s *Store) Ping(ctx context.Context) error {
	_, err := s.api.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(s.bucket)})
	err = translate("HeadBucket", err)
	if errors.Is(err, storage.ErrNotFound) || errors.Is(err, storage.ErrInvalid) || errors.Is(err, storage.ErrInvalidKey) {
		// The bucket is the operator's, not a caller's: a missing or
		// refused one is a broken configuration.
		return fmt.Errorf("s3: bucket %s: %w: %w", s.bucket, storage.ErrUnavailable, err)
	}
	return err
}

// resolve validates bucket and key and applies the default bucket.
func (s *Store) resolve(bucket, key string) (string, error) {
	if err := storage.ValidateKey(key); err != nil {
		return "", fmt.Errorf("s3: %w", err)
	}
	if bucket == "" || bucket == s.bucket {
		// The configured bucket is the operator's choice, and may be a
		// legacy name that today's rules would refuse.
		return s.bucket, nil
	}
	if err := storage.ValidateBucket(bucket); err != nil {
		return "", fmt.Errorf("s3: %w", err)
	}
	return bucket, nil
}

// versionParam is the VersionId to send for a recorded version id. "null"
// (what S3 reports for objects in a bucket without versioning) is left
// out: not every S3-compatible server accepts it, and If-Match guards
// those reads instead.
func versionParam(id string) *string {
	if id == "" || id == nullVersion {
		return nil
	}
	return aws.String(id)
}

// nullVersion is S3's version id of an object written without versioning.
const nullVersion = "null"

func versionID(id *string) string {
	if id == nil || *id == "" {
		return nullVersion
	}
	return *id
}
