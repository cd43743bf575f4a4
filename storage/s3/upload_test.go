package s3_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/storage/s3"
	"github.com/dlgate/dlgate/storage/storagetest"
)

// TestUploaderConformance runs the resumable-upload suite on each S3
// server with S3's smallest part size, in versioned buckets: there every
// temporary object's every version must go.
func TestUploaderConformance(t *testing.T) {
	eachServer(t, func(t *testing.T, env *testenv.S3) {
		storagetest.ExerciseUploads(t, func(t *testing.T) storagetest.UploadEnv {
			st, bucket := MustStore(t, env, true, s3.WithPartSize(s3.MinPartSize))
			return storagetest.UploadEnv{
				Store:  st,
				Bucket: bucket,
				Reopen: func(*testing.T) storage.Store {
					return s3.NewFromClient(env.Client(), bucket, s3.WithPartSize(s3.MinPartSize))
				},
				Leftovers: func(t *testing.T) []string { return UploadLeftovers(t, env.Client(), bucket) },
			}
		})
	})
}

// UploadLeftovers lists the multipart uploads in progress in bucket and
// every version and delete marker under the temporary prefix of resumable
// uploads.
func UploadLeftovers(tb testing.TB, c *awss3.Client, bucket string) []string {
	tb.Helper()
	var out []string
	ups, err := c.ListMultipartUploads(tb.Context(), &awss3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		tb.Fatalf("ListMultipartUploads(%s) = %v", bucket, err)
	}
	for _, u := range ups.Uploads {
		out = append(out, "multipart upload of "+aws.ToString(u.Key))
	}
	vs, err := c.ListObjectVersions(tb.Context(), &awss3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(s3.TempPrefix)})
	if err != nil {
		tb.Fatalf("ListObjectVersions(%s) = %v", bucket, err)
	}
	for _, v := range vs.Versions {
		out = append(out, aws.ToString(v.Key)+"@"+aws.ToString(v.VersionId))
	}
	for _, m := range vs.DeleteMarkers {
		out = append(out, "delete marker "+aws.ToString(m.Key)+"@"+aws.ToString(m.VersionId))
	}
	return out
}
