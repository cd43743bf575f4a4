package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlgate/dlgate/internal/testenv"
)

// Resumable uploads (SPEC §11, tus 1.0) end to end: the CLI killed half
// way resumes where the gateway stopped, an upload begun on one gateway
// process ends on another, and an unfinished upload's bytes are removed
// from the store when it expires.

// tusClient speaks the three tus requests a test needs to one admin base.
type tusClient struct {
	base, token string
}

func (c tusClient) do(tb testing.TB, method, u string, body io.Reader, hdr ...string) *http.Response {
	tb.Helper()
	if !strings.HasPrefix(u, "http") {
		u = c.base + u
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Authorization", "Bearer "+c.token)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	if r, ok := body.(*bytes.Reader); ok {
		req.ContentLength = int64(r.Len())
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, u, err)
	}
	return resp
}

// create starts an upload of size bytes under key and returns its path.
func (c tusClient) create(tb testing.TB, key string, size int) string {
	tb.Helper()
	meta := "key " + base64.StdEncoding.EncodeToString([]byte(key))
	resp := c.do(tb, http.MethodPost, "/v1/uploads/", nil, "Upload-Length", strconv.Itoa(size), "Upload-Metadata", meta)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(resp.Body)
		tb.Fatalf("POST /v1/uploads/ = %d %s", resp.StatusCode, b)
	}
	u, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		tb.Fatal(err)
	}
	return u.Path
}

// patch sends data at offset and demands 204 and the new offset.
func (c tusClient) patch(tb testing.TB, up string, offset int, data []byte) {
	tb.Helper()
	resp := c.do(tb, http.MethodPatch, up, bytes.NewReader(data), "Upload-Offset", strconv.Itoa(offset), "Content-Type", "application/offset+octet-stream")
	defer resp.Body.Close()
	if got := resp.Header.Get("Upload-Offset"); resp.StatusCode != http.StatusNoContent || got != strconv.Itoa(offset+len(data)) {
		b, _ := io.ReadAll(resp.Body)
		tb.Fatalf("PATCH %s at %d (%d bytes) = %d, Upload-Offset %q %s", up, offset, len(data), resp.StatusCode, got, b)
	}
}

// offset is HEAD's Upload-Offset, or -status when the upload is not there.
func (c tusClient) offset(tb testing.TB, up string) int {
	tb.Helper()
	resp := c.do(tb, http.MethodHead, up, nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return -resp.StatusCode
	}
	n, err := strconv.Atoi(resp.Header.Get("Upload-Offset"))
	if err != nil {
		tb.Fatalf("HEAD %s: Upload-Offset %q", up, resp.Header.Get("Upload-Offset"))
	}
	return n
}

// stored is GET /v1/uploads/{id}: the object a finished upload stored.
func (c tusClient) stored(tb testing.TB, up string) (key, sum string, size int64) {
	tb.Helper()
	resp := c.do(tb, http.MethodGet, up, nil)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var o struct {
		Key    string `json:"key"`
		Size   int64  `json:"size"`
		SHA256 string `json:"sha256"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(b, &o) != nil {
		tb.Fatalf("GET %s = %d %s", up, resp.StatusCode, b)
	}
	return o.Key, o.SHA256, o.Size
}

func randomBytes(n int, seed byte) []byte {
	b := make([]byte, n)
	rand.NewChaCha8([32]byte{seed}).Read(b) //nolint:errcheck // never fails
	return b
}

func hexSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// An upload begun on one gateway process and resumed on another, with the
// S3 store, behind the test balancer, ends byte-exact with the whole
// object's SHA-256: its offset, hash state and lock are in the ledger and
// the store, not in a process. The client reaches the admin listeners
// through a proxy and the balancer; the proxy cuts the connection in the
// middle of the PATCH, whose process then leaves the balancer (as a
// process drained or gone would), so the client's next connection, where
// it asks for the offset and sends the rest, reaches the other process.
func TestAnUploadBegunOnOneProcessEndsOnAnother(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t, ClusterOptions{Processes: 2})
	first, second := c.Gateways[0], c.Gateways[1]
	lb := MustStartBalancer(t, 0, first.AdminAddr)
	data := randomBytes(20<<20+12345, 1) // several parts of S3's, and a tail
	// The proxy counts every byte towards the balancer (the POST and the
	// PATCH's head included): the cut falls about half way through the
	// PATCH's body.
	proxy := startCuttingProxy(t, lb.Addr(), int64(len(data)/2))
	tc := tusClient{proxy.Base(), first.AdminToken}
	up := tc.create(t, "cluster/upload.bin", len(data))

	cut := make(chan error, 1)
	go func() {
		req, err := http.NewRequest(http.MethodPatch, proxy.Base()+up, bytes.NewReader(data))
		if err != nil {
			cut <- err
			return
		}
		req.Header.Set("Tus-Resumable", "1.0.0")
		req.Header.Set("Authorization", "Bearer "+first.AdminToken)
		req.Header.Set("Upload-Offset", "0")
		req.Header.Set("Content-Type", "application/offset+octet-stream")
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			err = fmt.Errorf("the cut PATCH was answered %s", resp.Status)
		}
		cut <- err
	}()
	select {
	case <-proxy.held:
	case err := <-cut:
		t.Fatalf("the PATCH ended before the proxy cut it: %v", err)
	case <-time.After(2 * time.Minute):
		t.Fatal("the PATCH never reached the half through the proxy")
	}
	lb.SetBackends(second.AdminAddr)
	proxy.Release()
	if err := <-cut; err == nil {
		t.Fatal("the cut PATCH did not fail")
	}

	// Resume as a tus client does: ask for the offset, send the rest from
	// there. While the first process still finishes the cut PATCH, the
	// upload is locked (423) or its offset moves (409): asked again.
	at, deadline := -1, time.Now().Add(time.Minute)
	for {
		if at = tc.offset(t, up); at >= 0 {
			resp := tc.do(t, http.MethodPatch, up, bytes.NewReader(data[at:]), "Upload-Offset", strconv.Itoa(at),
				"Content-Type", "application/offset+octet-stream")
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusNoContent && resp.Header.Get("Upload-Offset") == strconv.Itoa(len(data)) {
				break
			}
			if resp.StatusCode != http.StatusLocked && resp.StatusCode != http.StatusConflict {
				t.Fatalf("the resumed PATCH at %d = %d %s", at, resp.StatusCode, body)
			}
		} else if at != -http.StatusLocked {
			t.Fatalf("HEAD %s after the cut answered %d", up, -at)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upload could not be resumed within a minute (last offset %d)", at)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if at <= 0 || at >= len(data) {
		t.Fatalf("the upload resumed at byte %d of %d: the cut PATCH stored nothing, and the test proves nothing", at, len(data))
	}
	t.Logf("the cut PATCH stored %d of %d bytes on %s; %s took the rest", at, len(data), first.Name, second.Name)
	if proxy.cutCount.Load() != 1 {
		t.Errorf("the proxy cut %d connections, want 1", proxy.cutCount.Load())
	}
	// Each process served its part: the first the creation and the cut
	// PATCH, the second the rest.
	for _, p := range []struct {
		g     *Gateway
		wants []string
	}{
		{first, []string{"method=POST", "method=PATCH"}},
		{second, []string{"method=HEAD", "method=PATCH status=204"}},
	} {
		for _, want := range p.wants {
			if !waitLogged(t, p.g, "route=admin_uploads", want) {
				t.Errorf("%s logged no admin_uploads request with %q", p.g.Name, want)
			}
		}
	}

	key, sum, size := tc.stored(t, up)
	if key != "cluster/upload.bin" || size != int64(len(data)) || sum != hexSHA256(data) {
		t.Fatalf("the upload stored %s, %d bytes, sha256 %s; want %d bytes, %s", key, size, sum, len(data), hexSHA256(data))
	}
	ta := tusClient{first.Admin().Base, first.AdminToken}
	if ak, asum, _ := ta.stored(t, up); ak != key || asum != sum {
		t.Errorf("the first process answers %s %s for the finished upload", ak, asum)
	}
	// The stored object downloads byte-exact through a link.
	obj := &Object{Key: key, Data: data, Sum: sha256.Sum256(data)}
	var got struct {
		VersionID string `json:"version_id"`
	}
	resp := ta.do(t, http.MethodGet, up, nil)
	json.NewDecoder(resp.Body).Decode(&got) //nolint:errcheck // checked by the link's creation
	resp.Body.Close()
	obj.VersionID = got.VersionID
	link := first.Admin().MustCreateLink(t, obj, LinkRequest{Downloads: 1})
	r := MustFetch(t, http.MethodGet, c.Balancer.On(link.URL))
	if r.Status != http.StatusOK || !bytes.Equal(r.Body, data) {
		t.Fatalf("download of the uploaded object = %v, %d bytes", r, len(r.Body))
	}
}

// waitLogged reports whether a line of g's log has every one of parts,
// waiting a little for a line being written.
func waitLogged(t *testing.T, g *Gateway, parts ...string) bool {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		for _, line := range strings.Split(readFile(t, g.StderrPath), "\n") {
			all := true
			for _, p := range parts {
				all = all && strings.Contains(line, p)
			}
			if all {
				return true
			}
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// An unfinished upload past GATEWAY_UPLOAD_EXPIRY is removed by the
// sweeper: on the fs store its partial file, on versitygw its multipart
// upload and every version of its temporary objects.
func TestAnUnfinishedUploadExpiresAndItsBytesAreGone(t *testing.T) {
	t.Parallel()
	expiring := map[string]string{"GATEWAY_UPLOAD_EXPIRY": "2s", "GATEWAY_SWEEP_INTERVAL": "300ms"}
	t.Run("FS", func(t *testing.T) {
		t.Parallel()
		dir := filepath.Join(t.TempDir(), "gateway-data")
		g := MustStartGateways(t, GatewaySpec{Name: "fs", Env: withEnv(expiring, "GATEWAY_DATA_DIR", dir, "GATEWAY_ADMIN_TOKEN", randomHex(24))})[0]
		tc := tusClient{g.Admin().Base, g.AdminToken}
		up := tc.create(t, "expiring/file.bin", 3<<20)
		tc.patch(t, up, 0, randomBytes(1<<20, 2))
		if n := len(partialFiles(t, dir)); n != 1 {
			t.Fatalf("%d partial upload files in the store while the upload is open, want 1", n)
		}
		waitGone(t, tc, up)
		if left := partialFiles(t, dir); len(left) != 0 {
			t.Errorf("the expired upload left %v in the store", left)
		}
	})
	t.Run("S3", func(t *testing.T) {
		t.Parallel()
		c := MustStartCluster(t, ClusterOptions{Processes: 1, Env: expiring})
		a := c.Admin()
		tc := tusClient{a.Base, a.Token}
		up := tc.create(t, "expiring/big.bin", 20<<20)
		tc.patch(t, up, 0, randomBytes(10<<20+7, 3)) // a whole part sent, and a tail kept aside
		s3c := testenv.SharedS3(t).Client()
		if n := len(s3Leftovers(t, s3c, c.Bucket)); n == 0 {
			t.Fatal("no multipart upload or temporary object while the upload is open: the test sees nothing")
		}
		waitGone(t, tc, up)
		if left := s3Leftovers(t, s3c, c.Bucket); len(left) != 0 {
			t.Errorf("the expired upload left %v in the bucket", left)
		}
	})
}

func withEnv(base map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

// waitGone waits, boundedly, until the expired upload is neither served
// nor kept: HEAD answers 404 or 410 and the sweeper ran after that.
func waitGone(t *testing.T, tc tusClient, up string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for tc.offset(t, up) >= 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the upload is still served a minute after its expiry")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The sweeper removes the bytes after the expiry; give it rounds of
	// its interval to do so.
	time.Sleep(2 * time.Second)
}

// partialFiles lists the fs store's partial upload files under dir.
func partialFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error { //nolint:errcheck // a missing dir lists nothing
		if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), ".upload-") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// s3Leftovers lists the bucket's multipart uploads in progress and every
// version and delete marker of the resumable uploads' temporary objects.
func s3Leftovers(t *testing.T, c *awss3.Client, bucket string) []string {
	t.Helper()
	var out []string
	ups, err := c.ListMultipartUploads(context.Background(), &awss3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range ups.Uploads {
		out = append(out, "multipart "+aws.ToString(u.Key))
	}
	vs, err := c.ListObjectVersions(context.Background(), &awss3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(".dlgate-uploads/")})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range vs.Versions {
		out = append(out, "version "+aws.ToString(v.Key))
	}
	for _, m := range vs.DeleteMarkers {
		out = append(out, "marker "+aws.ToString(m.Key))
	}
	return out
}

// `gateway links create FILE` of a 256 MiB file killed half way (its
// upload held still at the half by a proxy, then the process killed),
// then run again: it resumes from the gateway's offset, says so, and the
// stored object's SHA-256 is the file's.
func TestTheCLIResumesAnUploadKilledHalfWay(t *testing.T) {
	t.Parallel()
	const size = 256 << 20
	g := MustStartGateways(t, GatewaySpec{Name: "cli", Env: map[string]string{"GATEWAY_ADMIN_TOKEN": randomHex(24)}})[0]
	file := filepath.Join(t.TempDir(), "big.bin")
	data := randomBytes(size, 4)
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	proxy := startHoldingProxy(t, g.AdminAddr, size/2)
	bin := MustGatewayBinary(t)
	cache := t.TempDir()
	cli := func(admin string) *exec.Cmd {
		cmd := exec.Command(bin, "links", "create", file, "--downloads", "1", "--expires-in", "1h", "--admin-url", admin)
		cmd.Env = childEnv(map[string]string{"GATEWAY_ADMIN_TOKEN": g.AdminToken, "XDG_CACHE_HOME": cache, "HOME": cache})
		return cmd
	}
	var first bytes.Buffer
	cmd := cli("http://" + proxy.Addr())
	cmd.Stdout, cmd.Stderr = &first, &first
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The proxy holds the upload still at the half; the gateway stores
	// what reached it. Then the CLI is killed, as a dropped laptop is.
	tc := tusClient{g.Admin().Base, g.AdminToken}
	if !proxy.waitHeld(2 * time.Minute) {
		cmd.Process.Kill() //nolint:errcheck // ending the test
		t.Fatalf("the upload never reached the half through the proxy; the CLI said:\n%s", first.String())
	}
	cmd.Process.Signal(syscall.SIGKILL) //nolint:errcheck // it is ours
	cmd.Wait()                          //nolint:errcheck // killed
	proxy.release()
	upURL := uploadURLInState(t, cache)
	// Once the connection is gone the gateway keeps what arrived, in its
	// checkpoints: an offset past 0 (and not past what was sent).
	var at int
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if at = tc.offset(t, upURL); at > 0 || time.Now().After(deadline) {
			break
		}
	}
	if at <= 0 || at > size/2 {
		t.Fatalf("after the kill the upload is at %d, want within (0, %d]", at, size/2)
	}

	// Run again, the same command (the same gateway URL: the state is the
	// file's at that gateway), the proxy now passing everything.
	out, err := cli("http://" + proxy.Addr()).CombinedOutput()
	if err != nil {
		t.Fatalf("the second run: %v\n%s", err, out)
	}
	if want := fmt.Sprintf("at byte %d of %d", at, size); !strings.Contains(string(out), want) {
		t.Errorf("the second run did not say it resumed %s:\n%s\n(first run:\n%s)", want, out, first.String())
	}
	key, sum, n := tc.stored(t, upURL)
	if key != "big.bin" || n != size || sum != hexSHA256(data) {
		t.Fatalf("the resumed upload stored %s, %d bytes, sha256 %s; want big.bin, %d, %s", key, n, sum, size, hexSHA256(data))
	}
	if !strings.Contains(string(out), "/d/") {
		t.Errorf("the second run printed no link URL:\n%s", out)
	}
}

// uploadURLInState reads the upload URL the CLI keeps in its cache
// directory while an upload is unfinished.
func uploadURLInState(t *testing.T, cache string) string {
	t.Helper()
	var found string
	filepath.WalkDir(cache, func(p string, d os.DirEntry, err error) error { //nolint:errcheck // a missing dir finds nothing
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".json") {
			return nil
		}
		b, _ := os.ReadFile(p)
		var st map[string]any
		if json.Unmarshal(b, &st) == nil {
			for _, v := range st {
				if s, ok := v.(string); ok && strings.Contains(s, "/v1/uploads/") {
					found = s
				}
			}
		}
		return nil
	})
	if found == "" {
		t.Fatalf("no upload URL in the CLI's state under %s", cache)
	}
	u, err := url.Parse(found)
	if err != nil {
		t.Fatal(err)
	}
	return u.Path
}

// holdingProxy forwards TCP connections to a backend, and holds the
// client-to-server bytes of all of them still once limit bytes went
// through, until release (the connection then ends); after release it
// passes everything: an upload that stalls half way.
type holdingProxy struct {
	ln       net.Listener
	backend  string
	limit    int64
	sent     atomic.Int64
	held     chan struct{}
	heldOnce sync.Once
	free     chan struct{}
	freeOnce sync.Once
}

func startHoldingProxy(t *testing.T, backend string, limit int64) *holdingProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdingProxy{ln: ln, backend: backend, limit: limit, held: make(chan struct{}), free: make(chan struct{})}
	t.Cleanup(func() { ln.Close(); p.release() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

func (p *holdingProxy) Addr() string { return p.ln.Addr().String() }

func (p *holdingProxy) release() { p.freeOnce.Do(func() { close(p.free) }) }

func (p *holdingProxy) waitHeld(d time.Duration) bool {
	select {
	case <-p.held:
		return true
	case <-time.After(d):
		return false
	}
}

func (p *holdingProxy) serve(client net.Conn) {
	defer client.Close()
	server, err := net.Dial("tcp", p.backend)
	if err != nil {
		return
	}
	defer server.Close()
	go func() {
		io.Copy(client, server) //nolint:errcheck // either side closing ends it
		client.Close()
	}()
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			allowed := n
			select {
			case <-p.free: // released: everything passes
			default:
				if left := p.limit - p.sent.Load(); int64(n) > left {
					allowed = int(max(left, 0))
				}
			}
			if allowed > 0 {
				if _, werr := server.Write(buf[:allowed]); werr != nil {
					return
				}
				p.sent.Add(int64(allowed))
			}
			if allowed < n {
				p.heldOnce.Do(func() { close(p.held) })
				<-p.free // the rest never goes: the client is killed meanwhile
				return
			}
		}
		if err != nil {
			return
		}
	}
}
