package s3_test

import (
	"testing"

	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/storage/s3"
	"github.com/dlgate/dlgate/storage/storagetest"
)

// BenchmarkPut compares uploads with and without the whole object's
// SHA-256, in the default 8 MiB parts, on each server of
// testenv.S3Servers (versitygw or DLGATE_TEST_S3_ENDPOINT's, and SeaweedFS
// with DLGATE_TEST_SEAWEEDFS=1):
//
//	go test -run '^$' -bench Put/versitygw -benchtime 3x ./storage/s3/
func BenchmarkPut(b *testing.B) {
	for _, srv := range testenv.S3Servers() {
		b.Run(srv.Name, func(b *testing.B) {
			env := srv.Get(b)
			bucket := env.NewBucket(b, true)
			storagetest.BenchmarkPut(b, s3.NewFromClient(env.Client(), bucket), s3.NewFromClient(env.Client(), bucket, s3.WithoutDigest()), "")
		})
	}
}
