package testenv

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	gomysql "github.com/go-sql-driver/mysql"
)

// The settings that point the shared servers at an operator's own (SPEC
// §7), so that the conformance suites run against their MySQL 8.4, TiDB
// or S3 instead of the MariaDB and versitygw testenv starts.
const (
	// EnvMySQLDSN is a go-sql-driver DSN of a server on which the user
	// may CREATE and DROP databases, e.g. "root@tcp(127.0.0.1:4000)/"
	// for a TiDB; its database name, if any, is ignored. Each test gets a
	// database of its own, dropped when the test ends.
	EnvMySQLDSN = "DLGATE_TEST_MYSQL_DSN"
	// EnvS3Endpoint is the URL of an S3 server, reached path-style with
	// the SDK's credentials from AWS_ACCESS_KEY_ID and
	// AWS_SECRET_ACCESS_KEY, in AWS_REGION (default us-east-1). Each test
	// gets a bucket of its own, emptied and deleted when the test ends.
	EnvS3Endpoint = "DLGATE_TEST_S3_ENDPOINT"
)

// externalMySQL connects to the server EnvMySQLDSN names, if any.
func externalMySQL() (*MariaDB, bool, error) {
	dsn := os.Getenv(EnvMySQLDSN)
	if dsn == "" {
		return nil, false, nil
	}
	c, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return nil, true, fmt.Errorf("%s: %w", EnvMySQLDSN, err)
	}
	c.DBName = ""
	if c.Timeout == 0 {
		c.Timeout = 10 * time.Second
	}
	admin, err := sql.Open("mysql", c.FormatDSN())
	if err != nil {
		return nil, true, err
	}
	admin.SetMaxOpenConns(4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := admin.PingContext(ctx); err != nil {
		_ = admin.Close()
		return nil, true, fmt.Errorf("%s (%s): %w", EnvMySQLDSN, c.Addr, err)
	}
	return &MariaDB{Addr: c.Addr, admin: admin, shared: true, external: c}, true, nil
}

// dropLater drops database name when tb ends, on an external server,
// where nothing else would: after the test's own cleanups, registered
// later, have closed its pools.
func (m *MariaDB) dropLater(tb testing.TB, name string) {
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := m.admin.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+name+"`"); err != nil {
			tb.Logf("testenv: drop database %s on %s: %v", name, m.Addr, err)
		}
	})
}

// externalS3 describes the server EnvS3Endpoint names, if any.
func externalS3() (*S3, bool, error) {
	endpoint := os.Getenv(EnvS3Endpoint)
	if endpoint == "" {
		return nil, false, nil
	}
	s := &S3{
		Endpoint:  strings.TrimRight(endpoint, "/"),
		Region:    os.Getenv("AWS_REGION"),
		AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"),
		SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY"),
		shared:    true,
		external:  true,
	}
	if s.Region == "" {
		s.Region = "us-east-1"
	}
	if s.AccessKey == "" || s.SecretKey == "" {
		return nil, true, fmt.Errorf("%s is set: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY must be too", EnvS3Endpoint)
	}
	s.client = sync.OnceValue(s.newClient)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Client().ListBuckets(ctx, &s3.ListBucketsInput{}); err != nil {
		return nil, true, fmt.Errorf("%s (%s): %w", EnvS3Endpoint, s.Endpoint, err)
	}
	return s, true, nil
}

// createBucketInput names the bucket's region where S3 wants it (every
// region but us-east-1).
func (s *S3) createBucketInput(name string) *s3.CreateBucketInput {
	in := &s3.CreateBucketInput{Bucket: aws.String(name)}
	if s.external && s.Region != "us-east-1" {
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{
			LocationConstraint: types.BucketLocationConstraint(s.Region),
		}
	}
	return in
}

// removeLater empties and deletes bucket when tb ends, on an external
// server, where nothing else would: every version and delete marker,
// every unfinished multipart upload, then the bucket.
func (s *S3) removeLater(tb testing.TB, bucket string) {
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := s.removeBucket(ctx, bucket); err != nil {
			tb.Logf("testenv: remove bucket %s on %s: %v", bucket, s.Endpoint, err)
		}
	})
}

func (s *S3) removeBucket(ctx context.Context, bucket string) error {
	c := s.Client()
	ups, err := c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err == nil {
		for _, u := range ups.Uploads {
			_, _ = c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: u.Key, UploadId: u.UploadId})
		}
	}
	p := s3.NewListObjectVersionsPaginator(c, &s3.ListObjectVersionsInput{Bucket: aws.String(bucket)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		var ids []types.ObjectIdentifier
		for _, v := range page.Versions {
			ids = append(ids, types.ObjectIdentifier{Key: v.Key, VersionId: v.VersionId})
		}
		for _, m := range page.DeleteMarkers {
			ids = append(ids, types.ObjectIdentifier{Key: m.Key, VersionId: m.VersionId})
		}
		for _, id := range ids {
			if _, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: id.Key, VersionId: id.VersionId}); err != nil {
				return err
			}
		}
	}
	_, err = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(bucket)})
	return err
}
