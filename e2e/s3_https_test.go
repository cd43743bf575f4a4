package e2e

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlgate/dlgate/internal/testenv"
)

// TestS3OverHTTPSWithAPrivateCA runs the store over https (issue 18): a
// versitygw serving a certificate of the test's own CA, which the system
// does not trust. With GATEWAY_S3_CA naming the CA (or the SDK's
// AWS_CA_BUNDLE), uploads go through and a link downloads byte-exact;
// without it the store is refused: /readyz names the store, the log says
// why, and a GET answers 502 with its claim refunded.
func TestS3OverHTTPSWithAPrivateCA(t *testing.T) {
	t.Parallel()
	certFile, keyFile := e2eCA.MustWritePair(t, t.TempDir(), 3001, false)
	s3 := testenv.StartS3(t, testenv.WithTLS(certFile, keyFile, e2eCA.Pool))
	if !strings.HasPrefix(s3.Endpoint, "https://") {
		t.Fatalf("versitygw endpoint %s, want https", s3.Endpoint)
	}
	if got := servedSerial(t, strings.TrimPrefix(s3.Endpoint, "https://"), "localhost", e2eCA.Pool); got.Int64() != 3001 {
		t.Fatalf("versitygw serves serial %v, want the test's 3001", got)
	}
	env := s3Env(t, s3)
	env["GATEWAY_S3_CA"] = e2eCA.PEMFile
	g := MustStartGateways(t, GatewaySpec{Name: "s3-https", Env: env})[0]
	admin := g.Admin()
	obj := admin.MustUpload(t, "s3-https/file.bin", 9<<20) // two parts of a multipart upload
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 2})
	checkBody(t, MustFetch(t, http.MethodGet, g.On(link.URL)), obj)
	s := MustMintSession(t, g.PublicBase(), link)
	r := MustFetch(t, http.MethodGet, g.On(s.SessionURL), "Range", "bytes=5000000-5999999")
	if r.Status != http.StatusPartialContent || string(r.Body) != string(obj.Data[5000000:6000000]) {
		t.Errorf("a session range over the https store: %v with %d bytes, want 206 with bytes 5000000-5999999", r, len(r.Body))
	}
	admin.checkCounts(t, link.ID, 0, 2, 0)

	t.Run("AWSCABundleWorksToo", func(t *testing.T) {
		env := maps.Clone(env)
		delete(env, "GATEWAY_S3_CA")
		env["AWS_CA_BUNDLE"] = e2eCA.PEMFile
		other := MustStartGateways(t, GatewaySpec{Name: "aws-ca-bundle", Env: env})[0]
		l := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1})
		checkBody(t, MustFetch(t, http.MethodGet, other.On(l.URL)), obj)
	})

	t.Run("WithoutTheCATheStoreIsRefused", func(t *testing.T) {
		env := maps.Clone(env)
		delete(env, "GATEWAY_S3_CA")
		other := mustStartUnready(t, "no-s3-ca", env)
		ready := MustFetch(t, http.MethodGet, "http://"+other.AdminAddr+"/readyz")
		if ready.Status != http.StatusServiceUnavailable || !strings.Contains(string(ready.Body), `"store":"unavailable"`) ||
			!strings.Contains(string(ready.Body), `"database":"ok"`) {
			t.Errorf("/readyz without the CA: %d %s, want 503 naming the store alone", ready.Status, ready.Body)
		}
		line := waitLog(t, other.StderrPath, "readiness: store", 15*time.Second)
		if !strings.Contains(line, "certificate signed by unknown authority") {
			t.Errorf("the store's refusal is logged as %q, which does not say the certificate is not trusted", line)
		}
		l := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1})
		checkProblem(t, MustFetch(t, http.MethodGet, other.On(l.URL)), http.StatusBadGateway, "storage-unavailable")
		admin.checkCounts(t, l.ID, 1, 0, 1)
	})
	checkNoTokenInLogs(t, g)
}

// s3Env configures gateways on a fresh database of the shared MariaDB
// and a fresh versioned bucket of s3, sharing their secret and admin
// token.
func s3Env(tb testing.TB, s3 *testenv.S3) map[string]string {
	tb.Helper()
	return map[string]string{
		"GATEWAY_ADMIN_TOKEN":    randomHex(24),
		"GATEWAY_SECRET":         randomHex(32),
		"GATEWAY_DB_DRIVER":      "mysql",
		"GATEWAY_DB_DSN":         testenv.SharedMariaDB(tb).NewDatabase(tb),
		"GATEWAY_STORE":          "s3",
		"GATEWAY_S3_BUCKET":      s3.NewBucket(tb, true),
		"GATEWAY_S3_ENDPOINT":    s3.Endpoint,
		"GATEWAY_S3_REGION":      s3.Region,
		"GATEWAY_S3_PATH_STYLE":  "true",
		"GATEWAY_SHUTDOWN_GRACE": "2s",
		"GATEWAY_LOG_LEVEL":      "debug",
		"AWS_ACCESS_KEY_ID":      s3.AccessKey,
		"AWS_SECRET_ACCESS_KEY":  s3.SecretKey,
		"AWS_REGION":             s3.Region,
		// Keep the SDK away from the developer's ~/.aws and from IMDS.
		"AWS_CONFIG_FILE":             os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
		"AWS_EC2_METADATA_DISABLED":   "true",
	}
}

// mustStartUnready starts one gateway with env and waits until its admin
// listener answers /readyz, whatever the answer: for a process whose
// store or database is refused, which MustStartGateways would wait on.
func mustStartUnready(tb testing.TB, name string, env map[string]string) *Gateway {
	tb.Helper()
	dir := tb.TempDir()
	env = maps.Clone(env)
	env["GATEWAY_LISTEN"] = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(tb))
	env["GATEWAY_ADMIN_LISTEN"] = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(tb))
	env["GATEWAY_DATA_DIR"] = filepath.Join(dir, "data")
	g := &Gateway{
		Name: name, PublicAddr: env["GATEWAY_LISTEN"], AdminAddr: env["GATEWAY_ADMIN_LISTEN"], AdminToken: env["GATEWAY_ADMIN_TOKEN"],
		StdoutPath: filepath.Join(dir, name+".stdout"), StderrPath: filepath.Join(dir, name+".stderr"),
	}
	stdout, err := os.Create(g.StdoutPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer stdout.Close()
	stderr, err := os.Create(g.StderrPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer stderr.Close()
	cmd := exec.Command(MustGatewayBinary(tb), "serve")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, childEnv(env), stdout, stderr
	if g.Proc, err = testenv.StartProc(cmd); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		g.Stop(15 * time.Second)
		if tb.Failed() {
			tb.Logf("--- %s (pid %d): last lines of stderr ---\n%s", g.Name, g.Pid(), tail(g.StderrPath, 40))
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := fetch(http.MethodGet, "http://"+g.AdminAddr+"/readyz", nil); err == nil {
			return g
		}
		if g.Exited() || time.Now().After(deadline) {
			tb.Fatalf("%s does not answer /readyz; stderr:\n%s", name, tail(g.StderrPath, 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
