package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlgate/dlgate/internal/testenv"
)

// Gateway is one `gateway serve` process started by a test.
type Gateway struct {
	Name       string
	PublicAddr string // 127.0.0.1:PORT
	AdminAddr  string
	AdminToken string
	StdoutPath string
	StderrPath string

	*testenv.Proc
}

// PublicBase is the process's own public listener as a URL base.
func (g *Gateway) PublicBase() string { return "http://" + g.PublicAddr }

// Admin returns a client of the process's admin API.
func (g *Gateway) Admin() *Admin {
	return &Admin{Base: "http://" + g.AdminAddr, Token: g.AdminToken}
}

// On returns rawURL (a link or session URL, whatever host it names) with
// this process's public listener as its host, to aim a request at it.
func (g *Gateway) On(rawURL string) string { return withHost(rawURL, g.PublicAddr) }

// withHost returns rawURL with host as its host.
func withHost(rawURL, host string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		panic(fmt.Sprintf("e2e: bad URL %q: %v", rawURL, err))
	}
	u.Scheme, u.Host = "http", host
	return u.String()
}

// Kill sends SIGKILL to the process (by its PID) and waits until it is
// reaped: the crash of kill -9, no shutdown code runs.
func (g *Gateway) Kill(tb testing.TB) {
	tb.Helper()
	if g.Exited() {
		tb.Fatalf("%s already exited (%v)", g.Name, g.Err())
	}
	g.Proc.Kill()
}

// errPortTaken marks a start that lost a port to another process.
var errPortTaken = errors.New("port taken before the gateway bound it")

// startGateway starts one process with env (on top of a scrubbed copy of
// ours) and waits until /readyz answers 200. The caller owns the returned
// process and must stop it, whatever the error.
func startGateway(bin, name, dir string, env map[string]string) (*Gateway, error) {
	g := &Gateway{
		Name:       name,
		PublicAddr: env["GATEWAY_LISTEN"],
		AdminAddr:  env["GATEWAY_ADMIN_LISTEN"],
		AdminToken: env["GATEWAY_ADMIN_TOKEN"],
		StdoutPath: filepath.Join(dir, name+".stdout"),
		StderrPath: filepath.Join(dir, name+".stderr"),
	}
	stdout, err := os.Create(g.StdoutPath)
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	stderr, err := os.Create(g.StderrPath)
	if err != nil {
		return nil, err
	}
	defer stderr.Close()
	cmd := exec.Command(bin, "serve")
	cmd.Dir = dir
	cmd.Env = childEnv(env)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if g.Proc, err = testenv.StartProc(cmd); err != nil {
		return nil, err
	}
	return g, g.waitReady()
}

func (g *Gateway) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	ready := "http://" + g.AdminAddr + "/readyz"
	var last error
	for {
		if g.Exited() {
			err := fmt.Errorf("%s exited during startup (%v)", g.Name, g.Err())
			if strings.Contains(strings.ToLower(tail(g.StderrPath, 20)), "address already in use") {
				err = fmt.Errorf("%w: %w", errPortTaken, err)
			}
			return err
		}
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		req, _ := http.NewRequestWithContext(rctx, http.MethodGet, ready, nil)
		resp, err := plainClient.Do(req)
		if err == nil {
			io.Copy(io.Discard, resp.Body) //nolint:errcheck // only the status matters
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				rcancel()
				return nil
			}
			err = fmt.Errorf("readyz: %s", resp.Status)
		}
		rcancel()
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready after 90s: %v", g.Name, last)
		case <-g.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// GatewaySpec describes one process for MustStartGateways. Listen
// addresses are chosen there; Env must not set them.
type GatewaySpec struct {
	Name string
	Env  map[string]string
}

// MustStartGateways starts the processes at the same time (so that their
// migrations race, as in a real rollout) and returns once every one is
// ready. Each is stopped in Cleanup (SIGTERM, then SIGKILL); when the test
// failed, the tail of each process's stderr is logged.
func MustStartGateways(tb testing.TB, specs ...GatewaySpec) []*Gateway {
	tb.Helper()
	bin := MustGatewayBinary(tb)
	// The directories (logs, data) are made first so that they are removed
	// last, after the processes stopped and their logs were quoted.
	dirs := make([]string, len(specs))
	for i := range specs {
		dirs[i] = tb.TempDir()
	}
	var started []*Gateway
	tb.Cleanup(func() {
		var wg sync.WaitGroup
		for _, g := range started {
			wg.Go(func() { g.Stop(15 * time.Second) })
		}
		wg.Wait()
		if tb.Failed() {
			for _, g := range started {
				tb.Logf("--- %s (pid %d, %v): last lines of stderr ---\n%s", g.Name, g.Pid(), g.Err(), tail(g.StderrPath, 40))
			}
		}
	})
	gws := make([]*Gateway, len(specs))
	errs := make([]error, len(specs))
	pending := make([]int, len(specs))
	for i := range pending {
		pending[i] = i
	}
	// A port can be taken between FreePort and the bind; such a start is
	// retried on fresh ports. Ports are chosen here, on the test's
	// goroutine, because FreePort may call tb.Fatal.
	for attempt := 1; len(pending) > 0 && attempt <= 3; attempt++ {
		envs := make([]map[string]string, len(specs))
		for _, i := range pending {
			env := maps.Clone(specs[i].Env)
			env["GATEWAY_LISTEN"] = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(tb))
			env["GATEWAY_ADMIN_LISTEN"] = fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(tb))
			if _, ok := env["GATEWAY_DATA_DIR"]; !ok {
				env["GATEWAY_DATA_DIR"] = filepath.Join(dirs[i], "data")
			}
			envs[i] = env
		}
		var wg sync.WaitGroup
		for _, i := range pending {
			wg.Go(func() {
				name := specs[i].Name
				if attempt > 1 {
					name += "-attempt" + strconv.Itoa(attempt)
				}
				gws[i], errs[i] = startGateway(bin, name, dirs[i], envs[i])
			})
		}
		wg.Wait()
		var again []int
		for _, i := range pending {
			if gws[i] != nil {
				started = append(started, gws[i])
			}
			if errors.Is(errs[i], errPortTaken) {
				again = append(again, i)
			}
		}
		pending = again
	}
	for i, err := range errs {
		if err != nil {
			msg := err.Error()
			if g := gws[i]; g != nil {
				msg += "\n--- last lines of stderr ---\n" + tail(g.StderrPath, 30)
			}
			tb.Fatalf("starting gateway %s: %s", specs[i].Name, msg)
		}
	}
	return gws
}

// childEnv is our environment without GATEWAY_*, AWS_* and proxy settings,
// plus env: a child must see only the configuration the test chose.
func childEnv(env map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "GATEWAY_") || strings.HasPrefix(k, "AWS_") || strings.HasSuffix(strings.ToLower(k), "_proxy") {
			continue
		}
		out = append(out, kv)
	}
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}

// tail returns the last n lines of the file at path.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(unreadable: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// randomHex returns n random bytes, hex-encoded.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) //nolint:errcheck // never fails
	return hex.EncodeToString(b)
}

// Cluster is one deployment: several gateway processes sharing a MariaDB
// database, a versioned versitygw bucket, the secret and the admin token,
// behind a round-robin TCP balancer whose address is the public URL.
type Cluster struct {
	Gateways  []*Gateway
	Balancer  *Balancer
	PublicURL string
	Bucket    string
}

// Admin is the admin API of the first process; all processes serve the
// same data.
func (c *Cluster) Admin() *Admin { return c.Gateways[0].Admin() }

// ClusterOptions tune MustStartCluster.
type ClusterOptions struct {
	Processes int
	S3        *testenv.S3 // default testenv.SharedS3
	Env       map[string]string
}

// MustStartCluster starts opts.Processes gateways (default 3) on a fresh
// database of the shared MariaDB and a fresh versioned bucket.
func MustStartCluster(tb testing.TB, opts ClusterOptions) *Cluster {
	tb.Helper()
	if opts.Processes == 0 {
		opts.Processes = 3
	}
	db := testenv.SharedMariaDB(tb)
	dsn := db.NewDatabase(tb)
	s3 := opts.S3
	if s3 == nil {
		s3 = testenv.SharedS3(tb)
	}
	bucket := s3.NewBucket(tb, true)
	lb := MustStartBalancer(tb, 0)
	c := &Cluster{Balancer: lb, PublicURL: "http://" + lb.Addr(), Bucket: bucket}
	common := map[string]string{
		"GATEWAY_PUBLIC_URL":     c.PublicURL,
		"GATEWAY_ADMIN_TOKEN":    randomHex(24),
		"GATEWAY_SECRET":         randomHex(32),
		"GATEWAY_DB_DRIVER":      "mysql",
		"GATEWAY_DB_DSN":         dsn,
		"GATEWAY_STORE":          "s3",
		"GATEWAY_S3_BUCKET":      bucket,
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
	maps.Copy(common, opts.Env)
	specs := make([]GatewaySpec, opts.Processes)
	for i := range specs {
		specs[i] = GatewaySpec{Name: fmt.Sprintf("gateway%d", i+1), Env: common}
	}
	c.Gateways = MustStartGateways(tb, specs...)
	addrs := make([]string, len(c.Gateways))
	for i, g := range c.Gateways {
		addrs[i] = g.PublicAddr
	}
	lb.SetBackends(addrs...)
	return c
}

// MustStartEmbeddedDefault starts one gateway with no database, store or
// secret configuration at all: SQLite and the local store under a fresh
// data directory. The admin token is the one the process prints on its
// first start.
func MustStartEmbeddedDefault(tb testing.TB) *Gateway {
	tb.Helper()
	g := MustStartGateways(tb, GatewaySpec{Name: "embedded", Env: map[string]string{
		"GATEWAY_DATA_DIR":       filepath.Join(tb.TempDir(), "gateway-data"),
		"GATEWAY_SHUTDOWN_GRACE": "2s",
		"GATEWAY_LOG_LEVEL":      "debug",
	}})[0]
	const marker = "generated admin token"
	f, err := os.Open(g.StdoutPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if line := sc.Text(); strings.Contains(line, marker) {
			fields := strings.Fields(line)
			g.AdminToken = fields[len(fields)-1]
		}
	}
	if g.AdminToken == "" {
		tb.Fatalf("the embedded default printed no line with %q on its first start; stdout:\n%s", marker, tail(g.StdoutPath, 20))
	}
	return g
}
