package testenv

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

const whatS3 = "versitygw (S3 server, installed into ./bin by `go install`)"

// S3 is a private versitygw serving a posix directory, with bucket versioning
// available, or a SeaweedFS cluster (StartSeaweedFS). Clients must use
// path-style addressing. The shared one may instead be an operator's own
// server (EnvS3Endpoint).
type S3 struct {
	Endpoint  string // "http://127.0.0.1:PORT"
	Region    string // "us-east-1"
	AccessKey string
	SecretKey string
	// Gateways are the endpoints of the S3 gateways behind Endpoint, a
	// load balancer, on a SeaweedFS cluster; empty for a single server.
	Gateways []string

	bin      string
	addr     string
	dir      string
	logPath  string
	shared   bool
	external bool // EnvS3Endpoint's: neither started nor stopped here

	mu       sync.Mutex // guards proc and closed
	proc     *process
	closed   bool
	shutOnce sync.Once

	client func() *s3.Client

	weed *weedCluster // a SeaweedFS cluster's processes, in place of proc

	tls *s3TLS // WithTLS: https with a test's certificate
}

// StartS3 starts a private versitygw for tb on a free port, with random
// credentials, and stops it, removing its data, in tb.Cleanup. A missing
// versitygw stops the test through Require. Options: WithTLS.
func StartS3(tb testing.TB, opts ...S3Option) *S3 {
	tb.Helper()
	return startPrivateS3(tb, whatS3, func() (*S3, error) { return startS3(opts...) })
}

// startPrivateS3 starts a private server for tb (versitygw or a SeaweedFS
// cluster, what says which for Require) and stops it, removing its data,
// in tb.Cleanup; a failed test gets the tails of its logs.
func startPrivateS3(tb testing.TB, what string, start func() (*S3, error)) *S3 {
	tb.Helper()
	s, err := start()
	Require(tb, what, err)
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("testenv: S3 server log tails (%s):\n%s", s.Endpoint, s.logTails())
		}
		s.shutdown()
	})
	return s
}

// logTails is the end of the server's logs.
func (s *S3) logTails() string {
	if s.weed != nil {
		return s.weed.tails(10)
	}
	return logTail(s.logPath, 15)
}

func (s *S3) markShared() { s.shared = true }

// SharedS3 returns the versitygw shared by all tests of this test binary,
// starting it on first use. Tests isolate themselves with NewBucket. The
// package's TestMain must call Main, which stops the server. Tests that stop
// or restart the server must use StartS3 instead. When EnvS3Endpoint is
// set, it is the server that names instead; one it cannot reach fails the
// test.
func SharedS3(tb testing.TB) *S3 {
	tb.Helper()
	requireMain(tb, "SharedS3")
	s, err := sharedS3.get(func() (*S3, error) {
		if s, ok, err := externalS3(); ok {
			return s, err
		}
		return startShared(func() (*S3, error) { return startS3() })()
	})
	if os.Getenv(EnvS3Endpoint) != "" && err != nil {
		tb.Fatalf("testenv: %v", err) // asked for, so never a skip
	}
	Require(tb, whatS3, err)
	return s
}

// Client returns an S3 client for this server: path-style addressing, static
// credentials, region us-east-1. The same client keeps working across
// Stop and Restart, since the endpoint does not change.
func (s *S3) Client() *s3.Client { return s.client() }

// clientOf is an S3 client of endpoint, one of this server's (Endpoint,
// a SeaweedFS gateway's), with s's credentials (and TLS roots).
func (s *S3) clientOf(endpoint string) *s3.Client {
	return s3.New(s3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	}, s.useTLS)
}

// newS3 is the S3 of a server to start in dir, with fresh credentials.
func newS3(dir string) *S3 {
	s := &S3{
		Region:    "us-east-1",
		AccessKey: "AK" + strings.ToUpper(randHex(9)),
		SecretKey: randHex(20),
		dir:       dir,
	}
	s.client = sync.OnceValue(s.newClient)
	return s
}

func (s *S3) newClient() *s3.Client { return s.clientOf(s.Endpoint) }

// NewBucket creates a bucket with a fresh name, derived from the test's name,
// and returns the name. With versioned, versioning is enabled on it, so every
// PUT makes a new version with its own VersionId. On our own server the
// bucket is not deleted: it dies with the server. On an external one it is
// emptied and deleted when the test ends.
func (s *S3) NewBucket(tb testing.TB, versioned bool) string {
	tb.Helper()
	name := uniqueName(tb, '-', 63)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := s.Client()
	if _, err := c.CreateBucket(ctx, s.createBucketInput(name)); err != nil {
		tb.Fatalf("testenv: create bucket %s on %s: %v", name, s.Endpoint, err)
	}
	if s.external {
		s.removeLater(tb, name)
	}
	if versioned {
		_, err := c.PutBucketVersioning(ctx, &s3.PutBucketVersioningInput{
			Bucket:                  aws.String(name),
			VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled},
		})
		if err != nil {
			tb.Fatalf("testenv: enable versioning on bucket %s: %v", name, err)
		}
	}
	return name
}

// Stop shuts the server down, as an outage would; its data stays for
// Restart. It is idempotent. A shared server cannot be stopped by a test;
// Stop panics on one.
func (s *S3) Stop() {
	if s.shared {
		panic("testenv: Stop on the shared S3 server; use StartS3 for a server a test may stop")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.weed != nil {
		s.weed.stop()
		return
	}
	s.proc.Stop(10 * time.Second)
}

// Restart starts the server again on the same port with the same data and
// credentials, stopping it first if it is running. It fails the test when the
// server does not come back (for example because another process took the
// port meanwhile).
func (s *S3) Restart(tb testing.TB) {
	tb.Helper()
	mustBePrivate(tb, s.shared, "Restart", "S3 server", "StartS3")
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		tb.Fatalf("testenv: Restart after the S3 server was cleaned up")
	}
	if s.weed != nil {
		if err := s.weed.restart(); err != nil {
			tb.Fatalf("testenv: restart SeaweedFS behind %s: %v", s.addr, err)
		}
		return
	}
	s.proc.Stop(10 * time.Second)
	// The port was ours a moment ago; a brief conflict is worth waiting out.
	if err := retryBind(20, 250*time.Millisecond, s.launch, s.lostPort); err != nil {
		tb.Fatalf("testenv: restart versitygw on %s: %v", s.addr, err)
	}
}

// lostPort reports whether versitygw failed to start because another
// process holds its port.
func (s *S3) lostPort(err error) bool { return errors.Is(err, errExited) && bindConflict(s.logPath) }

// shutdown stops the server for good and removes its directory, once.
func (s *S3) shutdown() {
	s.shutOnce.Do(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.closed = true
		if s.external {
			return
		}
		if s.weed != nil {
			s.weed.stop()
		}
		if s.proc != nil {
			s.proc.Stop(10 * time.Second)
		}
		_ = os.RemoveAll(s.dir)
	})
}

func startS3(opts ...S3Option) (*S3, error) {
	bin, err := FindBinary("versitygw")
	if err != nil {
		return nil, err
	}
	dir, err := xattrTempDir("dlgate-s3-")
	if err != nil {
		return nil, err
	}
	s := newS3(dir)
	s.bin, s.logPath = bin, filepath.Join(dir, "versitygw.log")
	for _, o := range opts {
		o(s)
	}
	for _, d := range []string{s.rootDir(), s.versionsDir()} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	err = retryBind(3, 0, func() error {
		port, err := freePort()
		if err != nil {
			return err
		}
		s.addr = "127.0.0.1:" + strconv.Itoa(port)
		s.Endpoint = s.scheme() + s.addr
		return s.launch()
	}, s.lostPort)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *S3) rootDir() string     { return filepath.Join(s.dir, "root") }
func (s *S3) versionsDir() string { return filepath.Join(s.dir, "versions") }

// launch starts versitygw on s.addr and waits until it answers HTTP. The
// caller holds s.mu or owns s exclusively.
func (s *S3) launch() error {
	p, err := startProcess(s.logPath, s.bin, append(s.tlsArgs(),
		"--access", s.AccessKey,
		"--secret", s.SecretKey,
		"--region", s.Region,
		"--port", s.addr,
		"--quiet",
		"posix",
		"--versioning-dir", s.versionsDir(),
		s.rootDir(),
	)...)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Second, Transport: s.transport()}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = p.waitReady(ctx, func(ctx context.Context) error {
		// Any HTTP answer (403 for an unsigned request) means it serves.
		return answers(ctx, hc, s.Endpoint+"/")
	})
	if err != nil {
		p.Stop(10 * time.Second)
		return withLog(fmt.Errorf("versitygw on %s: %w", s.addr, err), s.logPath)
	}
	s.proc = p
	return nil
}

// xattrTempDir makes a temporary directory on a filesystem that stores user
// extended attributes, which versitygw's posix backend requires. $TMPDIR may
// be a tmpfs without them on older kernels, so /var/tmp and the repository's
// bin/ (ignored by git) are fallbacks.
func xattrTempDir(prefix string) (string, error) {
	parents := []string{tempParent(), "/var/tmp"}
	if root := RepoRoot(); root != "" {
		parents = append(parents, filepath.Join(root, "bin", "tmp"))
	}
	var errs []error
	for _, parent := range parents {
		if err := os.MkdirAll(parent, 0o755); err != nil {
			errs = append(errs, err)
			continue
		}
		dir, err := mkServerDir(parent, prefix)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := probeXattr(dir); err != nil {
			_ = os.RemoveAll(dir)
			errs = append(errs, fmt.Errorf("%s: no user xattrs: %w", parent, err))
			continue
		}
		return dir, nil
	}
	return "", fmt.Errorf("no temporary directory with extended attributes: %w", errors.Join(errs...))
}
