package e2e

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlgate/dlgate/internal/testenv"
)

// ACME against Debian's pebble (Let's Encrypt's test CA, RFC 8555), its
// challenges really validated: pebble resolves the gateway's name through
// pebble-challtestsrv's DNS, which answers 127.0.0.1 for every name, and
// connects to the gateway's public listener (TLS-ALPN-01) and redirect
// listener (HTTP-01).

// acmeDomain is a localhost-style name; only the test's DNS knows it.
const acmeDomain = "dl.dlgate.localhost"

// Pebble is one pebble and its DNS, for one test.
type Pebble struct {
	Directory string         // the ACME directory URL
	RootFile  string         // PEM of pebble's root, which signs what it issues
	Roots     *x509.CertPool // the same, for Go clients
}

// MustStartPebble starts pebble-challtestsrv (DNS only) and pebble,
// validating challenges on tlsPort (TLS-ALPN-01) and httpPort (HTTP-01)
// of whatever address the name resolves to. Both stop at cleanup.
func MustStartPebble(tb testing.TB, tlsPort, httpPort int) *Pebble {
	tb.Helper()
	pebbleBin := testenv.MustBinary(tb, "pebble", "pebble")
	challBin := testenv.MustBinary(tb, "pebble-challtestsrv", "pebble")
	dir := tb.TempDir()
	dns := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(tb))
	startChild(tb, dir, "challtestsrv", nil, challBin, "-dns01", dns, "-management", fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(tb)),
		"-http01", "", "-https01", "", "-tlsalpn01", "", "-defaultIPv4", "127.0.0.1", "-defaultIPv6", "")
	certFile, keyFile := e2eCA.MustWritePair(tb, dir, 9001, false) // pebble's own HTTPS
	listen := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(tb))
	mgmt := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(tb))
	cfg, _ := json.Marshal(map[string]any{"pebble": map[string]any{
		"listenAddress": listen, "managementListenAddress": mgmt,
		"certificate": certFile, "privateKey": keyFile,
		"httpPort": httpPort, "tlsPort": tlsPort,
		"ocspResponderURL": "", "externalAccountBindingRequired": false,
	}})
	cfgFile := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		tb.Fatal(err)
	}
	// No sleeps before validation, no nonces refused for practice, and no
	// authorization reused: every order is validated anew.
	startChild(tb, dir, "pebble", []string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0"},
		pebbleBin, "-config", cfgFile, "-dnsserver", dns)
	p := &Pebble{Directory: "https://" + listen + "/dir"}
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := fetch(http.MethodGet, "https://"+mgmt+"/roots/0", nil)
		if err == nil && r.Status == http.StatusOK {
			p.RootFile = filepath.Join(dir, "pebble-root.pem")
			if err := os.WriteFile(p.RootFile, r.Body, 0o600); err != nil {
				tb.Fatal(err)
			}
			p.Roots = x509.NewCertPool()
			if !p.Roots.AppendCertsFromPEM(r.Body) {
				tb.Fatalf("pebble's root is no PEM: %.200q", r.Body)
			}
			return p
		}
		if time.Now().After(deadline) {
			tb.Fatalf("pebble not up after 20 s (%v, %v); its log:\n%s", r, err, tail(filepath.Join(dir, "pebble.log"), 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// startChild runs bin with args in dir, output to dir/name.log, until
// the test ends.
func startChild(tb testing.TB, dir, name string, env []string, bin string, args ...string) {
	tb.Helper()
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		tb.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = dir, log, log
	cmd.Env = append(os.Environ(), env...)
	p, err := testenv.StartProc(cmd)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		p.Stop(5 * time.Second)
		if tb.Failed() {
			tb.Logf("--- %s: last lines ---\n%s", name, tail(filepath.Join(dir, name+".log"), 30))
		}
	})
}

// acmeEnv is the environment of a gateway getting its certificate from p,
// its public listener on tlsPort and redirect listener on httpPort (0:
// none), its ACME cache in dataDir/acme. The admin listener has a pair of
// the test's CA, so that it answers before the certificate arrives.
func acmeEnv(tb testing.TB, p *Pebble, dataDir, name string, tlsPort, httpPort int) map[string]string {
	adminCert, adminKey := e2eCA.MustWritePair(tb, tb.TempDir(), 9100, false)
	env := map[string]string{
		"GATEWAY_LISTEN":         fmt.Sprintf("127.0.0.1:%d", tlsPort),
		"GATEWAY_ACME_DOMAINS":   acmeDomain,
		"GATEWAY_ACME_DIRECTORY": p.Directory,
		"GATEWAY_ACME_EMAIL":     "ops@dlgate.localhost",
		"GATEWAY_ADMIN_TLS_CERT": adminCert, "GATEWAY_ADMIN_TLS_KEY": adminKey,
		// Processes share the data directory (and so the ACME cache),
		// each with its own database and objects.
		"GATEWAY_DATA_DIR": dataDir,
		"GATEWAY_DB_DSN":   filepath.Join(dataDir, name+".db"),
		"GATEWAY_FS_ROOT":  filepath.Join(dataDir, name+"-objects"),
		"GATEWAY_SECRET":   randomHex(32),
		// pebble's directory is signed by the test's CA.
		"SSL_CERT_FILE": e2eCA.PEMFile,
	}
	if httpPort != 0 {
		env["GATEWAY_REDIRECT_LISTEN"] = fmt.Sprintf("127.0.0.1:%d", httpPort)
	}
	return env
}

// acmeSerial waits up to d for addr to serve a certificate for acmeDomain
// that pebble signed, and returns its serial in hex.
func acmeSerial(tb testing.TB, addr string, p *Pebble, d time.Duration) string {
	tb.Helper()
	deadline := time.Now().Add(d)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, &tls.Config{RootCAs: p.Roots, ServerName: acmeDomain})
		if err == nil {
			defer conn.Close()
			return conn.ConnectionState().PeerCertificates[0].SerialNumber.Text(16)
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s served no certificate of pebble's for %s within %v: %v", addr, acmeDomain, d, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// resolving is a client that reaches acmeDomain at addr, trusting roots.
func resolving(addr string, roots *x509.CertPool, keepAlive bool) *http.Client {
	d := &net.Dialer{Timeout: 5 * time.Second}
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2: true, DisableCompression: true, DisableKeepAlives: !keepAlive,
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
	}}
}

// TestACMETwoProcessesShareOneCertificate starts two gateways at once on
// one data directory: one orders the certificate (pebble validating the
// challenge on the first one's listeners), the other takes it from the
// shared cache instead of ordering its own. curl then downloads a link
// over HTTP/2 and HTTP/1.1, byte-exact, one claim each.
func TestACMETwoProcessesShareOneCertificate(t *testing.T) {
	curl := MustBinary(t, "curl")
	tlsPort, httpPort := testenv.FreePort(t), testenv.FreePort(t)
	p := MustStartPebble(t, tlsPort, httpPort)
	data := filepath.Join(t.TempDir(), "data")
	g1 := MustStartTLSGateway(t, "acme1", acmeEnv(t, p, data, "acme1", tlsPort, httpPort))
	g2 := MustStartTLSGateway(t, "acme2", acmeEnv(t, p, data, "acme2", testenv.FreePort(t), testenv.FreePort(t)))
	s1 := acmeSerial(t, g1.PublicAddr, p, 60*time.Second)
	s2 := acmeSerial(t, g2.PublicAddr, p, 60*time.Second)
	if s1 != s2 {
		t.Errorf("the two processes serve serials %s and %s, want one certificate", s1, s2)
	}
	// certmagic stores a certificate, where a handshake may find it,
	// before it reports it obtained: wait up to 10 s for the report.
	obtained := 0
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		obtained = 0
		for _, g := range []*Gateway{g1, g2} {
			b, _ := os.ReadFile(g.StderrPath)
			// The gateway's own line; certmagic's "certificate obtained
			// successfully" (at debug) is not counted twice.
			obtained += strings.Count(string(b), `msg="acme: certificate obtained"`)
		}
		if obtained > 0 || time.Now().After(deadline) {
			break
		}
	}
	if obtained != 1 {
		t.Errorf("%d certificates obtained by two processes sharing a cache, want 1", obtained)
	}
	for _, path := range []string{filepath.Join(data, "acme")} {
		checkPrivateFiles(t, path)
	}

	admin := g1.HTTPSAdmin()
	obj := admin.MustUpload(t, "acme/file.bin", 4<<20)
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 2})
	if want := fmt.Sprintf("https://%s:%d/d/", acmeDomain, tlsPort); !strings.HasPrefix(link.URL, want) {
		t.Fatalf("link URL %s, want it under %s (the first ACME domain)", redact(link.URL), want)
	}
	dir := t.TempDir()
	for _, proto := range []struct{ flag, version string }{{"--http2", "2"}, {"--http1.1", "1.1"}} {
		file := filepath.Join(dir, "via"+proto.version+".bin")
		out := MustRun(t, dir, curl, "-sS", "--fail", "--cacert", p.RootFile, "--resolve", fmt.Sprintf("%s:%d:127.0.0.1", acmeDomain, tlsPort),
			proto.flag, "-o", file, "-w", "%{http_version}", link.URL)
		if strings.TrimSpace(out) != proto.version {
			t.Errorf("curl %s spoke HTTP/%s, want HTTP/%s", proto.flag, strings.TrimSpace(out), proto.version)
		}
		checkFile(t, file, obj)
	}
	admin.checkCounts(t, link.ID, 0, 2, 0)
}

// checkPrivateFiles checks that no file under dir but lock files may be
// read by group or others: account and certificate keys are secrets.
func checkPrivateFiles(tb testing.TB, dir string) {
	tb.Helper()
	n := 0
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error { //nolint:errcheck // reported below
		if err != nil || d.IsDir() || strings.HasSuffix(path, ".lock") {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		n++
		if fi.Mode().Perm()&0o077 != 0 {
			tb.Errorf("%s has mode %v, want 0600", path, fi.Mode().Perm())
		}
		return nil
	})
	if n == 0 {
		tb.Errorf("no file in the ACME cache %s", dir)
	}
}

// TestACMERenewalDropsNoRequest renews the certificate within seconds
// (a test-only renewal window) while downloads run on fresh connections
// back to back: every download is byte-exact, and the served serial
// changes.
func TestACMERenewalDropsNoRequest(t *testing.T) {
	tlsPort := testenv.FreePort(t)
	p := MustStartPebble(t, tlsPort, testenv.FreePort(t))
	env := acmeEnv(t, p, filepath.Join(t.TempDir(), "data"), "renew", tlsPort, 0) // TLS-ALPN-01 only
	// Renew once a certificate is past its first ten-millionth of life
	// (16 s of pebble's five years), checking every second.
	env["DLGATE_TEST_ACME_RENEWAL_RATIO"] = "0.9999999"
	env["DLGATE_TEST_ACME_RENEW_CHECK"] = "1s"
	g := MustStartTLSGateway(t, "acme-renew", env)
	first := acmeSerial(t, g.PublicAddr, p, 60*time.Second)
	admin := g.HTTPSAdmin()
	obj := admin.MustUpload(t, "acme/renew.bin", 256<<10)
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 10000})
	c := resolving(g.PublicAddr, p.Roots, false)
	downloads, renewed := 0, ""
	deadline := time.Now().Add(90 * time.Second)
	for renewed == "" || renewed == first {
		if time.Now().After(deadline) {
			t.Fatalf("serial still %s after 90 s of downloads; no renewal", first)
		}
		resp, err := c.Get(link.URL)
		if err != nil {
			t.Fatalf("download %d during renewal: %v", downloads+1, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || len(body) != len(obj.Data) {
			t.Fatalf("download %d during renewal: %s, %d bytes, %v", downloads+1, resp.Status, len(body), err)
		}
		downloads++
		renewed = resp.TLS.PeerCertificates[0].SerialNumber.Text(16)
		time.Sleep(20 * time.Millisecond) // leave the renewal a core
	}
	line := waitLog(t, g.StderrPath, "renewal=true", 5*time.Second)
	t.Logf("%d downloads on fresh connections, none failed; serial %s → %s; %s", downloads, first, renewed, line)
	admin.checkCounts(t, link.ID, 10000-downloads, downloads, 0)
}

// TestACMEHTTP01AloneGetsACertificate leaves pebble only HTTP-01 to
// validate with: it checks TLS-ALPN-01 on a port where nothing listens
// (the gateway's public listener is on another), so a TLS-ALPN-01
// attempt fails, and HTTP-01 on the gateway's redirect listener. The
// gateway gets pebble's certificate for acmeDomain, having answered
// HTTP-01 there, and serves a link over it byte-exact with one claim.
// (TLS-ALPN-01 alone is TestACMERenewalDropsNoRequest: no
// GATEWAY_REDIRECT_LISTEN, so HTTP-01 is off and pebble's HTTP port is
// one where nothing listens.)
func TestACMEHTTP01AloneGetsACertificate(t *testing.T) {
	t.Parallel()
	noTLSALPN, httpPort := testenv.FreePort(t), testenv.FreePort(t)
	p := MustStartPebble(t, noTLSALPN, httpPort)
	tlsPort := testenv.FreePort(t)
	g := MustStartTLSGateway(t, "acme-http01", acmeEnv(t, p, filepath.Join(t.TempDir(), "data"), "http01", tlsPort, httpPort))
	serial := acmeSerial(t, g.PublicAddr, p, 60*time.Second)
	// certmagic stores the certificate, where a handshake may find it,
	// before it reports it obtained: wait for the report.
	waitLog(t, g.StderrPath, `msg="acme: certificate obtained"`, 10*time.Second)
	b, _ := os.ReadFile(g.StderrPath)
	log := string(b)
	if n := strings.Count(log, `msg="acme: certificate obtained"`); n != 1 {
		t.Errorf("%d certificates obtained, want 1", n)
	}
	// certmagic's own lines (at debug): the HTTP-01 answer served on the
	// redirect listener, and no TLS-ALPN-01 certificate served, since
	// pebble cannot reach the port it would be served on.
	served, tried := "", []string{}
	for line := range strings.Lines(log) {
		if strings.Contains(line, `msg="acme: served key authentication"`) {
			served = line
		}
		if _, typ, ok := strings.Cut(line, "challenge_type="); ok && strings.Contains(line, "trying to solve challenge") {
			tried = append(tried, strings.Fields(typ)[0])
		}
	}
	t.Logf("challenges tried, in order: %v", tried)
	if !strings.Contains(served, "challenge=http-01") {
		t.Errorf("no HTTP-01 key authorization served on the redirect listener (last line: %q)", strings.TrimSpace(served))
	}
	if strings.Contains(log, "served key authentication certificate") {
		t.Errorf("a TLS-ALPN-01 challenge certificate was served, with pebble checking TLS-ALPN-01 on port %d where nothing listens", noTLSALPN)
	}

	admin := g.HTTPSAdmin()
	obj := admin.MustUpload(t, "acme/http01.bin", 1<<20)
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1})
	if want := fmt.Sprintf("https://%s:%d/d/", acmeDomain, tlsPort); !strings.HasPrefix(link.URL, want) {
		t.Fatalf("link URL %s, want it under %s (the first ACME domain)", redact(link.URL), want)
	}
	resp, err := resolving(g.PublicAddr, p.Roots, false).Get(link.URL)
	if err != nil {
		t.Fatalf("GET over the HTTP-01 certificate: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || sha256.Sum256(body) != obj.Sum {
		t.Fatalf("download: %s over %s, %d bytes (%v), not the object's %d", resp.Status, resp.Proto, len(body), err, len(obj.Data))
	}
	if got := resp.TLS.PeerCertificates[0].SerialNumber.Text(16); got != serial {
		t.Errorf("the download was served serial %s, want pebble's %s", got, serial)
	}
	admin.checkCounts(t, link.ID, 0, 1, 0)
}
