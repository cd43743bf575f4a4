package compare

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlgate/dlgate/internal/testenv"
)

// nginx is a private nginx serving root with sendfile on 127.0.0.1, with
// as many workers as cores, no access log and unlimited keep-alive.
// tcp_nopush stays off (nginx's default): with it, every 64 KiB range
// waited ~40 ms for a delayed ACK (376/s instead of 8,700/s here), and
// 1 GiB files were no faster.
type nginx struct {
	URL  string
	cmd  *exec.Cmd
	done chan struct{}
}

// nginxHTTP is the start of every nginx configuration of the bench, up to
// its server block: one process tree in the foreground, files in %[1]s,
// no access log, sendfile, long keep-alive.
const nginxHTTP = `daemon off;
master_process on;
worker_processes auto;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  keepalive_requests 1000000;
  keepalive_timeout 300s;
  default_type application/octet-stream;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
`

// nginxConf serves %[3]s on %[2]s.
const nginxConf = nginxHTTP + `  server {
    listen %[2]s;
    root %[3]s;
  }
}
`

// startNginx serves root (which nginx's workers must be able to read) and
// stops nginx in tb.Cleanup.
func startNginx(tb testing.TB, root string) *nginx {
	tb.Helper()
	bin, err := testenv.FindBinary("nginx")
	testenv.Require(tb, "nginx (Debian package nginx; scripts/bench-compare.sh installs it as root)", err)
	dir := tb.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(tb))
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxConf, dir, addr, root), 0o644); err != nil {
		tb.Fatal(err)
	}
	// -e: nginx would otherwise open the system's error log before
	// reading the configuration.
	cmd := exec.Command(bin, "-e", filepath.Join(dir, "error.log"), "-p", dir, "-c", conf)
	cmd.SysProcAttr = testenv.SysProcAttr()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start nginx: %v", err)
	}
	n := &nginx{URL: "http://" + addr, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(n.done) }() //nolint:errcheck // its exit is seen through done
	tb.Cleanup(n.stop)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := testenv.WaitTCP(ctx, addr); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
		tb.Fatalf("nginx on %s: %v\n%s", addr, err, log)
	}
	return n
}

func (n *nginx) stop() { stopProcess(n.cmd.Process, n.done, syscall.SIGQUIT, 10*time.Second) }

// stopProcess sends p sig unless it is gone (done closed), and kills it
// if it is still there after grace.
func stopProcess(p *os.Process, done <-chan struct{}, sig os.Signal, grace time.Duration) {
	select {
	case <-done:
		return
	default:
	}
	p.Signal(sig) //nolint:errcheck // gone already is fine
	select {
	case <-done:
	case <-time.After(grace):
		p.Kill() //nolint:errcheck // as above
		<-done
	}
}

// pids are nginx's master and workers, whose CPU time together is
// nginx's.
func (n *nginx) pids() []int {
	return append([]int{n.cmd.Process.Pid}, children(n.cmd.Process.Pid)...)
}

// gatewayProc is a `gateway serve` process built from this tree.
type gatewayProc struct {
	Public, Admin string // base URLs
	cmd           *exec.Cmd
	done          chan struct{}
	log           string
	env           map[string]string // the settings it was given
}

const (
	adminToken = "bench-admin-token"
	secret     = "bench-secret-0123456789abcdefghijklmnopqrstuvwxyz"
)

// build builds the command pkg of this tree (./cmd/gateway,
// ./bench/cmd/floor) into a temporary directory.
func build(tb testing.TB, pkg string) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), filepath.Base(pkg))
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = testenv.RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// floor is bench/cmd/floor, net/http alone: the gateway's 404 for an
// unknown token under /d/, the files of a root with http.ServeContent
// under /f/.
type floor struct {
	URL  string
	cmd  *exec.Cmd
	done chan struct{}
}

// startFloor runs bin on a free port serving root and stops it in
// tb.Cleanup.
func startFloor(tb testing.TB, bin, root string) *floor {
	tb.Helper()
	cmd := exec.Command(bin, "-listen", "127.0.0.1:0", "-root", root)
	cmd.SysProcAttr = testenv.SysProcAttr()
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", bin, err)
	}
	// Its first line names the address; it ends when the process does.
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
	f := &floor{URL: "http://" + addr, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(f.done) }() //nolint:errcheck // seen through done
	tb.Cleanup(f.stop)
	if err != nil || !ok {
		tb.Fatalf("floor: first line %q: %v", line, err)
	}
	return f
}

func (f *floor) stop() { stopProcess(f.cmd.Process, f.done, syscall.SIGTERM, 10*time.Second) }

// startGateway runs bin on free ports with the settings in env (which
// name the database and the store) and waits until it is ready.
func startGateway(tb testing.TB, bin string, env map[string]string) *gatewayProc {
	tb.Helper()
	dir := tb.TempDir()
	pub := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(tb))
	adm := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(tb))
	vars := map[string]string{
		"GATEWAY_LISTEN": pub, "GATEWAY_ADMIN_LISTEN": adm,
		"GATEWAY_ADMIN_TOKEN": adminToken, "GATEWAY_SECRET": secret,
		"GATEWAY_DATA_DIR": dir, "GATEWAY_SHUTDOWN_GRACE": "2s",
		// The sweeper's statements would be counted as the requests'.
		"GATEWAY_SWEEP_INTERVAL":    "10m",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
	}
	for k, v := range env {
		vars[k] = v
	}
	cmd := exec.Command(bin, "serve")
	cmd.Env = os.Environ()
	for k, v := range vars {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	logPath := filepath.Join(dir, "gateway.log")
	logf, err := os.Create(logPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = testenv.SysProcAttr()
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	scheme := "http://"
	if vars["GATEWAY_TLS_CERT"] != "" { // both listeners then (tls_test.go)
		scheme = "https://"
	}
	g := &gatewayProc{Public: scheme + pub, Admin: scheme + adm, cmd: cmd, done: make(chan struct{}), log: logPath, env: vars}
	go func() { cmd.Wait(); close(g.done) }() //nolint:errcheck // seen through done
	tb.Cleanup(g.stop)
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := adminClient.Get(g.Admin + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return g
			}
		}
		select {
		case <-g.done:
			tb.Fatalf("gateway exited at start:\n%s", tail(logPath))
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			tb.Fatalf("gateway not ready after a minute:\n%s", tail(logPath))
		}
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-20):], "\n")
}

func (g *gatewayProc) Pid() int { return g.cmd.Process.Pid }

func (g *gatewayProc) stop() { stopProcess(g.cmd.Process, g.done, syscall.SIGTERM, 15*time.Second) }

// admin calls the admin API and decodes its JSON answer into out.
func (g *gatewayProc) admin(tb testing.TB, method, path string, body io.Reader, size int64, out any) {
	tb.Helper()
	if err := g.call(method, path, body, size, out); err != nil {
		tb.Fatal(err)
	}
}

func (g *gatewayProc) call(method, path string, body io.Reader, size int64, out any) error {
	req, err := http.NewRequest(method, g.Admin+path, body)
	if err != nil {
		return err
	}
	req.ContentLength = size
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := adminClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("%s %s: %s %s", method, path, resp.Status, msg)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

var adminClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

// upload stores the file at path as key through the admin API.
func (g *gatewayProc) upload(tb testing.TB, key, path string) {
	tb.Helper()
	f, err := os.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	fi, _ := f.Stat()
	var v struct {
		VersionID string `json:"version_id"`
	}
	g.admin(tb, http.MethodPut, "/v1/objects/"+url.PathEscape(key), f, fi.Size(), &v)
}

// link is a created link.
type link struct {
	ID    string `json:"id"`
	Token string `json:"token"`
	URL   string `json:"url"`
}

// newLink creates a link to key with the given JSON fields added.
func (g *gatewayProc) newLink(key, fields string) (link, error) {
	var l link
	body := fmt.Sprintf(`{"object":{"key":%q},"expires_in":86400,%s}`, key, fields)
	err := g.call(http.MethodPost, "/v1/links", strings.NewReader(body), int64(len(body)), &l)
	return l, err
}

func (g *gatewayProc) mustLink(tb testing.TB, key, fields string) link {
	tb.Helper()
	l, err := g.newLink(key, fields)
	if err != nil {
		tb.Fatal(err)
	}
	return l
}

// newLinks creates n links to key, 32 requests in flight.
func (g *gatewayProc) newLinks(tb testing.TB, n int, key, fields string) []link {
	tb.Helper()
	out := make([]link, n)
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range next {
				out[i], errs[i] = g.newLink(key, fields)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		tb.Fatal(err)
	}
	return out
}

// mintSession claims l's download as a session and returns its URL.
func (g *gatewayProc) mintSession(tb testing.TB, l link) string {
	tb.Helper()
	resp, err := adminClient.Post(g.Public+"/d/"+l.Token+"/sessions", "", nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	var s struct {
		URL string `json:"session_url"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || resp.StatusCode != http.StatusCreated {
		tb.Fatalf("POST /d/{token}/sessions = %s, %v", resp.Status, err)
	}
	return s.URL
}

// writeData writes size pseudo-random bytes (the same for the same seed)
// to path.
func writeData(tb testing.TB, path string, size int64, seed uint64) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	x := seed*0x9E3779B97F4A7C15 + 1
	for left := size; left > 0; left -= int64(len(buf)) {
		for i := 0; i+8 <= len(buf); i += 8 {
			// xorshift64: fast, and incompressible enough for a bench.
			x ^= x << 13
			x ^= x >> 7
			x ^= x << 17
			buf[i], buf[i+1], buf[i+2], buf[i+3] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
			buf[i+4], buf[i+5], buf[i+6], buf[i+7] = byte(x>>32), byte(x>>40), byte(x>>48), byte(x>>56)
		}
		if _, err := f.Write(buf[:min(int64(len(buf)), left)]); err != nil {
			tb.Fatal(err)
		}
	}
	if err := f.Chmod(0o644); err != nil {
		tb.Fatal(err)
	}
}
