package s3_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/storage/s3"
	"github.com/dlgate/dlgate/storage/storagetest"
)

// storedChecksum is the SHA-256 checksum the server keeps for key, as
// HeadObject in checksum mode reports it, with its type.
func storedChecksum(tb testing.TB, env *testenv.S3, bucket, key string) (string, types.ChecksumType) {
	tb.Helper()
	out, err := env.Client().HeadObject(tb.Context(), &awss3.HeadObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled,
	})
	if err != nil {
		tb.Fatalf("HeadObject(%s, checksum mode) = %v", key, err)
	}
	return aws.ToString(out.ChecksumSHA256), out.ChecksumType
}

func TestServerKeepsTheSHA256OfASinglePutObject(t *testing.T) {
	eachServer(t, func(t *testing.T, env *testenv.S3) {
		st, bucket := MustStore(t, env, true)
		data := []byte("a file a download manager will check")

		v := storagetest.MustPut(t, st, bucket, "one", data, "")
		sum := sha256.Sum256(data)
		want := base64.StdEncoding.EncodeToString(sum[:])
		// A single PUT's checksum is the object's: "For PutObject
		// uploads, the checksum type is always FULL_OBJECT" (S3 API
		// Reference, PutObject). AWS and versitygw say so; SeaweedFS
		// names no type, which for a single-part object means the same.
		if got, typ := storedChecksum(t, env, bucket, "one"); got != want || typ != types.ChecksumTypeFullObject && typ != "" {
			t.Errorf("the server's checksum = %q (%s), want ours %q (FULL_OBJECT, or untyped)", got, typ, want)
		}
		if v.SHA256 != storagetest.SHA256Hex(data) {
			t.Errorf("Put SHA256 = %q, want %s", v.SHA256, storagetest.SHA256Hex(data))
		}
		if got := storagetest.MustStat(t, st, storage.Ref{Bucket: bucket, Key: "one"}); got.SHA256 != v.SHA256 {
			t.Errorf("Stat SHA256 = %q, want the server's full-object checksum %s", got.SHA256, v.SHA256)
		}
	})
}

func TestServerKeepsTheCompositeOfThePartsSHA256OfAMultipartUpload(t *testing.T) {
	eachServer(t, func(t *testing.T, env *testenv.S3) {
		st, bucket := MustStore(t, env, true, s3.WithPartSize(s3.MinPartSize))
		const size = 2*s3.MinPartSize + 1234
		data, _ := io.ReadAll(storagetest.PseudoRandom(11, size))

		v, err := st.Put(t.Context(), bucket, "multi", storagetest.OnlyReader(bytes.NewReader(data)), -1, "")
		if err != nil {
			t.Fatalf("Put = %v", err)
		}
		// S3's COMPOSITE checksum: the SHA-256 of the parts' SHA-256s, and
		// their count.
		var sums []byte
		for off := 0; off < len(data); off += s3.MinPartSize {
			part := sha256.Sum256(data[off:min(off+s3.MinPartSize, len(data))])
			sums = append(sums, part[:]...)
		}
		composite := sha256.Sum256(sums)
		want := base64.StdEncoding.EncodeToString(composite[:]) + "-3"
		if got, typ := storedChecksum(t, env, bucket, "multi"); got != want || typ != types.ChecksumTypeComposite {
			t.Errorf("the server's checksum = %q (%s), want the composite of ours %q (COMPOSITE)", got, typ, want)
		}
		if v.SHA256 != storagetest.SHA256Hex(data) {
			t.Errorf("Put SHA256 = %q, want the whole object's %s", v.SHA256, storagetest.SHA256Hex(data))
		}
		if got := storagetest.MustStat(t, st, storage.Ref{Bucket: bucket, Key: "multi"}); got.SHA256 != "" {
			t.Errorf("Stat SHA256 = %q, want none: a composite checksum is not the object's digest", got.SHA256)
		}
	})
}

// damaging is a transport that flips one byte of every upload's body on
// its way to the server, after the store hashed it.
type damaging struct{ next http.RoundTripper }

func (d damaging) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut && r.Body != nil && r.ContentLength > 0 {
		r = r.Clone(r.Context())
		r.Body = &flipFirst{ReadCloser: r.Body}
	}
	return d.next.RoundTrip(r)
}

type flipFirst struct {
	io.ReadCloser
	done bool
}

func (f *flipFirst) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	if n > 0 && !f.done {
		p[0] ^= 0xff
		f.done = true
	}
	return n, err
}

func TestServerRefusesABodyDamagedOnTheWay(t *testing.T) {
	eachServer(t, func(t *testing.T, env *testenv.S3) {
		bucket := env.NewBucket(t, true)
		client := awss3.New(awss3.Options{
			Region: env.Region, BaseEndpoint: aws.String(env.Endpoint), UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(env.AccessKey, env.SecretKey, ""),
			HTTPClient:  &http.Client{Transport: damaging{http.DefaultTransport}},
		})
		st := s3.NewFromClient(client, bucket, s3.WithPartSize(s3.MinPartSize))
		for _, size := range []int64{100, s3.MinPartSize + 100} {
			_, err := st.Put(t.Context(), "", "damaged", storagetest.PseudoRandom(3, size), size, "")
			if !errors.Is(err, storage.ErrUnavailable) {
				t.Errorf("Put(%d bytes damaged on the way) = %v, want ErrUnavailable", size, err)
			}
		}
		clean := s3.NewFromClient(env.Client(), bucket)
		if _, err := clean.Stat(t.Context(), storage.Ref{Key: "damaged"}); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Stat(damaged uploads) = %v, want ErrNotFound: the server stored nothing", err)
		}
	})
}

func TestStatOfAForeignObjectReportsOnlyAFullObjectSHA256(t *testing.T) {
	eachServer(t, func(t *testing.T, env *testenv.S3) {
		st, bucket := MustStore(t, env, true)
		c := env.Client()
		data := []byte("put there by someone else")
		sum := sha256.Sum256(data)
		noSDKChecksum := func(o *awss3.Options) { o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired }
		for _, tt := range []struct {
			key  string
			in   awss3.PutObjectInput
			want string
		}{
			{"with-sha256", awss3.PutObjectInput{ChecksumSHA256: aws.String(base64.StdEncoding.EncodeToString(sum[:]))}, storagetest.SHA256Hex(data)},
			{"with-crc32", awss3.PutObjectInput{ChecksumAlgorithm: types.ChecksumAlgorithmCrc32}, ""},
			{"without", awss3.PutObjectInput{}, ""},
		} {
			in := tt.in
			in.Bucket, in.Key, in.Body = aws.String(bucket), aws.String(tt.key), bytes.NewReader(data)
			opts := []func(*awss3.Options){}
			if in.ChecksumAlgorithm == "" {
				opts = append(opts, noSDKChecksum)
			}
			if _, err := c.PutObject(t.Context(), &in, opts...); err != nil {
				t.Fatalf("PutObject(%s) = %v", tt.key, err)
			}
			if got := storagetest.MustStat(t, st, storage.Ref{Key: tt.key}); got.SHA256 != tt.want {
				t.Errorf("Stat(%s) SHA256 = %q, want %q", tt.key, got.SHA256, tt.want)
			}
		}
	})
}
