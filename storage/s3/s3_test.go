package s3_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/storage/s3"
	"github.com/dlgate/dlgate/storage/storagetest"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// eachServer runs test once for each S3 server of the suite
// (testenv.S3Servers: versitygw and a SeaweedFS cluster, or the server
// DLGATE_TEST_S3_ENDPOINT names), as a subtest named after it.
func eachServer(t *testing.T, test func(t *testing.T, env *testenv.S3)) {
	t.Helper()
	for _, srv := range testenv.S3Servers() {
		t.Run(srv.Name, func(t *testing.T) { test(t, srv.Get(t)) })
	}
}

// MustStore returns a store on a fresh bucket of env, and the bucket's
// name.
func MustStore(tb testing.TB, env *testenv.S3, versioned bool, opts ...s3.Option) (*s3.Store, string) {
	tb.Helper()
	bucket := env.NewBucket(tb, versioned)
	return s3.NewFromClient(env.Client(), bucket, opts...), bucket
}

func TestStoreConformance(t *testing.T) {
	eachServer(t, func(t *testing.T, env *testenv.S3) {
		storagetest.Exercise(t, func(t *testing.T) (storage.Store, string) {
			return MustStore(t, env, true)
		})
	})
}

func TestUnversionedBucketRefusesAReplacedObject(t *testing.T) {
	eachServer(t, func(t *testing.T, env *testenv.S3) {
		st, bucket := MustStore(t, env, false)
		first := storagetest.MustPut(t, st, bucket, "k", []byte("first"), "")
		if first.VersionID != "null" {
			t.Fatalf("Put on a bucket without versioning: VersionID = %q, want \"null\"", first.VersionID)
		}
		pinned := storagetest.MustStat(t, st, storage.Ref{Bucket: bucket, Key: "k"})
		if pinned.VersionID != "null" || pinned.ETag != first.ETag {
			t.Fatalf("Stat = %+v, want version \"null\" with ETag %s", pinned, first.ETag)
		}

		// Same size, other bytes: only the ETag tells them apart.
		second := storagetest.MustPut(t, st, bucket, "k", []byte("other"), "")
		rc, err := st.Open(t.Context(), pinned, 0, pinned.Size)
		if err == nil {
			b, _ := io.ReadAll(rc)
			rc.Close()
			t.Fatalf("Open(replaced pinned version) served %q, want ErrChanged", b)
		}
		if !errors.Is(err, storage.ErrChanged) {
			t.Errorf("Open(replaced pinned version) = %v, want ErrChanged", err)
		}
		if b := storagetest.MustRead(t, st, second, 0, second.Size); string(b) != "other" {
			t.Errorf("Open(current) = %q, want \"other\"", b)
		}
		got := storagetest.MustStat(t, st, storage.Ref{Bucket: bucket, Key: "k", VersionID: "null"})
		if got.ETag != second.ETag {
			t.Errorf("Stat(version null) ETag = %s, want the current %s", got.ETag, second.ETag)
		}
	})
}

func TestNullVersionOfAVersionedKeyIsNotFound(t *testing.T) {
	eachServer(t, func(t *testing.T, env *testenv.S3) {
		st, bucket := MustStore(t, env, true)
		storagetest.MustPut(t, st, bucket, "k", []byte("versioned"), "")

		_, err := st.Stat(t.Context(), storage.Ref{Bucket: bucket, Key: "k", VersionID: "null"})
		if !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Stat(version null) of a key with only real versions = %v, want ErrNotFound", err)
		}
	})
}

func TestUploadOfUnknownSizeBeyondOnePartUsesMultipart(t *testing.T) {
	eachServer(t, func(t *testing.T, env *testenv.S3) {
		st, bucket := MustStore(t, env, true, s3.WithPartSize(s3.MinPartSize))
		const size = 2*s3.MinPartSize + 1234

		v, err := st.Put(t.Context(), bucket, "multi", storagetest.OnlyReader(storagetest.PseudoRandom(7, size)), -1, "")
		if err != nil {
			t.Fatalf("Put = %v", err)
		}
		if !strings.HasSuffix(v.ETag, `-3"`) {
			t.Errorf("ETag = %s, want a multipart ETag of 3 parts", v.ETag)
		}
		got := storagetest.MustStat(t, st, storage.Ref{Bucket: bucket, Key: "multi"})
		if got.Size != size || got.ETag != v.ETag || got.VersionID != v.VersionID {
			t.Errorf("Stat = %+v, want size %d, ETag %s, version %s", got, size, v.ETag, v.VersionID)
		}
	})
}

func TestUploadOfKnownSizeBeyondOnePartUsesMultipart(t *testing.T) {
	eachServer(t, func(t *testing.T, env *testenv.S3) {
		st, bucket := MustStore(t, env, true, s3.WithPartSize(s3.MinPartSize))
		const size = s3.MinPartSize + 1

		v, err := st.Put(t.Context(), bucket, "multi", storagetest.OnlyReader(storagetest.PseudoRandom(8, size)), size, "")
		if err != nil {
			t.Fatalf("Put = %v", err)
		}
		if !strings.HasSuffix(v.ETag, `-2"`) {
			t.Errorf("ETag = %s, want a multipart ETag of 2 parts", v.ETag)
		}
		if b := storagetest.MustRead(t, st, v, size-3, 3); len(b) != 3 {
			t.Errorf("Open(last 3 bytes) returned %d bytes", len(b))
		}
	})
}

// failAfter yields n bytes of pseudo-random data, then fails.
func failAfter(n int64) io.Reader {
	return io.MultiReader(storagetest.PseudoRandom(9, n), errReader{io.ErrClosedPipe})
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }

func TestFailedMultipartUploadIsAborted(t *testing.T) {
	eachServer(t, func(t *testing.T, env *testenv.S3) {
		st, bucket := MustStore(t, env, true, s3.WithPartSize(s3.MinPartSize))

		_, err := st.Put(t.Context(), bucket, "broken", failAfter(s3.MinPartSize+100), -1, "")
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("Put(failing body) = %v, want the body's error", err)
		}
		_, err = st.Put(t.Context(), bucket, "short", strings.NewReader(strings.Repeat("x", s3.MinPartSize+100)), 2*s3.MinPartSize, "")
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("Put(short body of declared size) = %v, want io.ErrUnexpectedEOF", err)
		}

		out, err := env.Client().ListMultipartUploads(t.Context(), &awss3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
		if err != nil {
			t.Fatalf("ListMultipartUploads = %v", err)
		}
		for _, u := range out.Uploads {
			t.Errorf("upload %s of %s was left open", aws.ToString(u.UploadId), aws.ToString(u.Key))
		}
		_, err = st.Stat(t.Context(), storage.Ref{Bucket: bucket, Key: "broken"})
		if !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Stat(failed upload) = %v, want ErrNotFound", err)
		}
	})
}

func TestNewUsesTheSDKCredentialChain(t *testing.T) {
	eachServer(t, func(t *testing.T, env *testenv.S3) {
		bucket := env.NewBucket(t, true)
		t.Setenv("AWS_ACCESS_KEY_ID", env.AccessKey)
		t.Setenv("AWS_SECRET_ACCESS_KEY", env.SecretKey)
		t.Setenv("AWS_SESSION_TOKEN", "")
		t.Setenv("AWS_PROFILE", "")
		t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
		t.Setenv("AWS_SHARED_CREDENTIALS_FILE", t.TempDir()+"/none")

		st, err := s3.New(t.Context(), s3.Options{Bucket: bucket, Endpoint: env.Endpoint, Region: env.Region, PathStyle: true})
		if err != nil {
			t.Fatalf("New = %v", err)
		}
		if err := st.Ping(t.Context()); err != nil {
			t.Fatalf("Ping = %v", err)
		}
		v := storagetest.MustPut(t, st, "", "k", []byte("through New"), "text/plain")
		if b := storagetest.MustRead(t, st, v, 0, v.Size); string(b) != "through New" {
			t.Errorf("Open = %q", b)
		}
	})
}

func TestNewRefusesBadOptions(t *testing.T) {
	ctx := context.Background()
	if _, err := s3.New(ctx, s3.Options{}); err == nil {
		t.Errorf("New without a bucket succeeded")
	}
	if _, err := s3.New(ctx, s3.Options{Bucket: "b", PartSize: 1 << 20}); err == nil {
		t.Errorf("New with 1 MiB parts succeeded")
	}
}

func TestPingOfAMissingBucketIsUnavailable(t *testing.T) {
	eachServer(t, func(t *testing.T, env *testenv.S3) {
		st := s3.NewFromClient(env.Client(), "no-such-bucket-for-ping")

		if err := st.Ping(t.Context()); !errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("Ping = %v, want ErrUnavailable", err)
		}
	})
}

func TestStoppedServerIsUnavailableAndRecovers(t *testing.T) {
	for _, srv := range testenv.PrivateS3Servers() {
		t.Run(srv.Name, func(t *testing.T) { stoppedServerIsUnavailableAndRecovers(t, srv.Get(t)) })
	}
}

func stoppedServerIsUnavailableAndRecovers(t *testing.T, env *testenv.S3) {
	bucket := env.NewBucket(t, true)
	st := s3.NewFromClient(env.Client(), bucket)
	v := storagetest.MustPut(t, st, "", "k", []byte("survives"), "")

	env.Stop()
	if _, err := st.Stat(t.Context(), storage.Ref{Key: "k"}); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Stat with the server down = %v, want ErrUnavailable", err)
	}
	if rc, err := st.Open(t.Context(), v, 0, v.Size); !errors.Is(err, storage.ErrUnavailable) {
		if err == nil {
			rc.Close()
		}
		t.Errorf("Open with the server down = %v, want ErrUnavailable", err)
	}
	if err := st.Ping(t.Context()); !errors.Is(err, storage.ErrUnavailable) {
		t.Errorf("Ping with the server down = %v, want ErrUnavailable", err)
	}

	env.Restart(t)
	if b := storagetest.MustRead(t, st, v, 0, v.Size); string(b) != "survives" {
		t.Errorf("Open after restart = %q", b)
	}
}
