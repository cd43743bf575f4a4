package testenv_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/go-sql-driver/mysql"

	"github.com/dlgate/dlgate/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// fakeTB records how Require ended a test instead of ending it. The embedded
// interface satisfies testing.TB's private method; calling anything not
// overridden here panics, which would flag an unexpected call.
type fakeTB struct {
	testing.TB
	skipped, fatal string
}

func (f *fakeTB) Helper()                          {}
func (f *fakeTB) Skipf(format string, args ...any) { f.skipped = fmt.Sprintf(format, args...) }
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
}

func TestRequire(t *testing.T) {
	missing := errors.New("mariadbd not found")
	tests := []struct {
		name      string
		strict    string
		err       error
		wantSkip  bool
		wantFatal bool
	}{
		{"NoErrorDoesNothing", "", nil, false, false},
		{"NoErrorDoesNothingInStrictMode", "1", nil, false, false},
		{"MissingSkipsByDefault", "", missing, true, false},
		{"MissingSkipsWhenStrictIsOff", "0", missing, true, false},
		{"MissingFailsInStrictMode", "1", missing, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GATEWAY_TEST_STRICT", tt.strict)
			f := &fakeTB{}
			testenv.Require(f, "MariaDB (Debian package mariadb-server)", tt.err)
			if got := f.skipped != ""; got != tt.wantSkip {
				t.Errorf("Require(strict=%q, %v) skipped = %v (%q), want %v", tt.strict, tt.err, got, f.skipped, tt.wantSkip)
			}
			if got := f.fatal != ""; got != tt.wantFatal {
				t.Errorf("Require(strict=%q, %v) failed = %v (%q), want %v", tt.strict, tt.err, got, f.fatal, tt.wantFatal)
			}
			for _, msg := range []string{f.skipped, f.fatal} {
				if msg == "" {
					continue
				}
				for _, want := range []string{"MariaDB", "mariadbd not found", "make test"} {
					if !strings.Contains(msg, want) {
						t.Errorf("Require message %q lacks %q", msg, want)
					}
				}
			}
		})
	}
}

func TestRepoRootHoldsGoMod(t *testing.T) {
	root := testenv.RepoRoot()
	if root == "" {
		t.Fatal("RepoRoot() = \"\"")
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("module github.com/dlgate/dlgate")) {
		t.Errorf("RepoRoot() = %q, whose go.mod is not this module's", root)
	}
}

func TestFindBinary(t *testing.T) {
	extra := t.TempDir()
	fake := filepath.Join(extra, "sh")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := testenv.FindBinary("sh", extra); err != nil || got != fake {
		t.Errorf("FindBinary(sh, %s) = %q, %v; want %q (extra dirs first)", extra, got, err, fake)
	}
	if got, err := testenv.FindBinary("sh"); err != nil || got == "" {
		t.Errorf("FindBinary(sh) = %q, %v; want a path", got, err)
	}
	if _, err := testenv.FindBinary("dlgate-no-such-binary"); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("FindBinary(missing) error = %v, want exec.ErrNotFound", err)
	}
}

func TestFreePortIsUniqueAndBindable(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		p := testenv.FreePort(t)
		if seen[p] {
			t.Fatalf("FreePort returned %d twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatalf("FreePort() = %d, not bindable: %v", p, err)
		}
		l.Close()
	}
}

func TestWaitTCPGivesUpWhenNothingListens(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	if err := testenv.WaitTCP(ctx, addr); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("WaitTCP(%s) = %v, want context.DeadlineExceeded", addr, err)
	}
}

func mustOpen(tb testing.TB, dsn string) *sql.DB {
	tb.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}

func TestMariaDBCreatesDatabasesAndEnforcesPasswords(t *testing.T) {
	t.Parallel()
	m := testenv.StartMariaDB(t)
	ctx := context.Background()

	dsn := m.NewDatabase(t)
	if !regexp.MustCompile(`^root@tcp\(127\.0\.0\.1:\d+\)/t_[a-z0-9_]+$`).MatchString(dsn) {
		t.Errorf("NewDatabase() = %q, want root@tcp(127.0.0.1:PORT)/t_...", dsn)
	}
	if other := m.NewDatabase(t); other == dsn {
		t.Errorf("NewDatabase returned %q twice", dsn)
	}
	db := mustOpen(t, dsn)
	if _, err := db.ExecContext(ctx, "CREATE TABLE links (id INT PRIMARY KEY, remaining INT NOT NULL) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "INSERT INTO links VALUES (1, 3)"); err != nil {
		t.Fatal(err)
	}
	res, err := db.ExecContext(ctx, "UPDATE links SET remaining = remaining - 1 WHERE id = 1 AND remaining > 0")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Errorf("conditional decrement affected %d rows, want 1", n)
	}
	var remaining int
	if err := db.QueryRowContext(ctx, "SELECT remaining FROM links WHERE id = 1").Scan(&remaining); err != nil || remaining != 2 {
		t.Errorf("remaining = %d, %v; want 2", remaining, err)
	}
	var charset string
	if err := db.QueryRowContext(ctx, "SELECT @@character_set_database").Scan(&charset); err != nil || charset != "utf8mb4" {
		t.Errorf("@@character_set_database = %q, %v; want utf8mb4", charset, err)
	}

	// Grant tables must be live: a wrong password is refused.
	if _, err := db.ExecContext(ctx, "CREATE USER 'gw'@'127.0.0.1' IDENTIFIED BY 'right'"); err != nil {
		t.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, "GRANT ALL ON *.* TO 'gw'@'127.0.0.1'"); err != nil {
		t.Fatal(err)
	}
	good := mustOpen(t, fmt.Sprintf("gw:right@tcp(%s)/", m.Addr))
	if err := good.PingContext(ctx); err != nil {
		t.Errorf("ping with the right password: %v", err)
	}
	bad := mustOpen(t, fmt.Sprintf("gw:wrong@tcp(%s)/", m.Addr))
	var me *mysql.MySQLError
	if err := bad.PingContext(ctx); !errors.As(err, &me) || me.Number != 1045 {
		t.Errorf("ping with a wrong password = %v, want MySQL error 1045 (access denied)", err)
	}

	m.Stop()
	m.Stop()
	if err := mustOpen(t, m.DSN("")).PingContext(ctx); err == nil {
		t.Error("ping after Stop succeeded")
	}
}

func TestSharedMariaDBIsStartedOnce(t *testing.T) {
	t.Parallel()
	a := testenv.SharedMariaDB(t)
	b := testenv.SharedMariaDB(t)
	if a != b {
		t.Errorf("SharedMariaDB returned two servers: %s and %s", a.Addr, b.Addr)
	}
	if err := mustOpen(t, a.NewDatabase(t)).Ping(); err != nil {
		t.Errorf("ping the shared server's new database: %v", err)
	}
}

func mustPut(tb testing.TB, c *s3.Client, bucket, key, body string) *s3.PutObjectOutput {
	tb.Helper()
	out, err := c.PutObject(context.Background(), &s3.PutObjectInput{
		Bucket: aws.String(bucket),
		Key:    aws.String(key),
		Body:   strings.NewReader(body),
	})
	if err != nil {
		tb.Fatalf("PutObject(%s/%s): %v", bucket, key, err)
	}
	return out
}

func mustGet(tb testing.TB, c *s3.Client, bucket, key string, versionID *string) string {
	tb.Helper()
	out, err := c.GetObject(context.Background(), &s3.GetObjectInput{
		Bucket:    aws.String(bucket),
		Key:       aws.String(key),
		VersionId: versionID,
	})
	if err != nil {
		tb.Fatalf("GetObject(%s/%s, version %v): %v", bucket, key, aws.ToString(versionID), err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

func TestS3KeepsEveryVersion(t *testing.T) {
	t.Parallel()
	for _, srv := range testenv.S3Servers() {
		t.Run(srv.Name, func(t *testing.T) {
			t.Parallel()
			s := srv.Get(t)
			if s2 := srv.Get(t); s2 != s {
				t.Errorf("the shared %s is two servers: %s and %s", srv.Name, s.Endpoint, s2.Endpoint)
			}
			keepsEveryVersion(t, s)
		})
	}
}

func keepsEveryVersion(t *testing.T, s *testenv.S3) {
	c := s.Client()
	bucket := s.NewBucket(t, true)
	if !regexp.MustCompile(`^t-[a-z0-9-]+$`).MatchString(bucket) || len(bucket) > 63 {
		t.Errorf("NewBucket() = %q, not a valid bucket name", bucket)
	}

	v1 := mustPut(t, c, bucket, "dir/report.bin", "first version")
	v2 := mustPut(t, c, bucket, "dir/report.bin", "second version, longer")
	if aws.ToString(v1.VersionId) == "" || aws.ToString(v1.VersionId) == aws.ToString(v2.VersionId) {
		t.Fatalf("version ids %q and %q, want two distinct non-empty ids", aws.ToString(v1.VersionId), aws.ToString(v2.VersionId))
	}
	for _, tt := range []struct {
		version *string
		want    string
	}{
		{v1.VersionId, "first version"},
		{v2.VersionId, "second version, longer"},
		{nil, "second version, longer"},
	} {
		if got := mustGet(t, c, bucket, "dir/report.bin", tt.version); got != tt.want {
			t.Errorf("GetObject(version %q) = %q, want %q", aws.ToString(tt.version), got, tt.want)
		}
	}

	plain := s.NewBucket(t, false)
	mustPut(t, c, plain, "k", "unversioned")
	if got := mustGet(t, c, plain, "k", nil); got != "unversioned" {
		t.Errorf("GetObject(unversioned) = %q", got)
	}

	// The gateways of a cluster keep no state of their own: what went
	// in through the balancer (versioning enabled on the bucket, the
	// versions) reads the same through each, and a version put through
	// one gateway reads through the other.
	if len(s.Gateways) > 0 && (len(s.Gateways) < 2 || slices.Contains(s.Gateways, s.Endpoint)) {
		t.Errorf("Gateways = %q behind %s, want two or more, none of them the balancer", s.Gateways, s.Endpoint)
	}
	for i, endpoint := range s.Gateways {
		gc := gatewayClient(s, endpoint)
		if got := mustGet(t, gc, bucket, "dir/report.bin", v1.VersionId); got != "first version" {
			t.Errorf("GetObject(first version) through gateway %s = %q", endpoint, got)
		}
		put := mustPut(t, gc, bucket, "dir/report.bin", fmt.Sprintf("through gateway %d", i))
		other := gatewayClient(s, s.Gateways[(i+1)%len(s.Gateways)])
		if got, want := mustGet(t, other, bucket, "dir/report.bin", nil), fmt.Sprintf("through gateway %d", i); got != want {
			t.Errorf("current version through the next gateway = %q, want %q (version %s)", got, want, aws.ToString(put.VersionId))
		}
	}
}

func TestS3RestartKeepsData(t *testing.T) {
	t.Parallel()
	for _, srv := range testenv.PrivateS3Servers() {
		t.Run(srv.Name, func(t *testing.T) {
			t.Parallel()
			restartKeepsData(t, srv.Get(t))
		})
	}
}

func restartKeepsData(t *testing.T, s *testenv.S3) {
	c := s.Client()
	bucket := s.NewBucket(t, true)
	v1 := mustPut(t, c, bucket, "a.txt", "before outage")

	s.Stop()
	s.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(bucket)}); err == nil {
		t.Fatal("HeadBucket succeeded while the server was stopped")
	}

	s.Restart(t)
	if got := mustGet(t, c, bucket, "a.txt", v1.VersionId); got != "before outage" {
		t.Errorf("after Restart, GetObject = %q, want %q", got, "before outage")
	}
	v2 := mustPut(t, c, bucket, "a.txt", "after outage")
	if got := mustGet(t, c, bucket, "a.txt", v1.VersionId); got != "before outage" {
		t.Errorf("after Restart, old version = %q", got)
	}
	if got := mustGet(t, c, bucket, "a.txt", v2.VersionId); got != "after outage" {
		t.Errorf("after Restart, new version = %q", got)
	}
	s.Restart(t) // restarting a running server works too
	if got := mustGet(t, c, bucket, "a.txt", nil); got != "after outage" {
		t.Errorf("after second Restart, GetObject = %q", got)
	}
}

// gatewayClient is a client of one S3 gateway of s itself, not of the
// balancer in front of them.
func gatewayClient(s *testenv.S3, endpoint string) *s3.Client {
	return s3.New(s3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
}
