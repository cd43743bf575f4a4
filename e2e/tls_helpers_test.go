package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
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

// testCA signs every certificate the e2e tests make for the gateway.
// plainClient trusts it (init below), so the admin helpers work on an
// https admin listener as they do on a plain one.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	PEMFile string // the CA certificate, for curl --cacert and --admin-ca
	Pool    *x509.CertPool
}

var e2eCA = mustNewCA()

func init() {
	plainClient.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: e2eCA.Pool}
}

func mustNewCA() *testCA {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dlgate e2e CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(48 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	cert, _ := x509.ParseCertificate(der)
	f, err := os.CreateTemp("", "dlgate-e2e-ca-*.pem")
	if err != nil {
		panic(err)
	}
	defer f.Close()
	pem.Encode(f, &pem.Block{Type: "CERTIFICATE", Bytes: der}) //nolint:errcheck // a temp file
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &testCA{cert: cert, key: key, PEMFile: f.Name(), Pool: pool}
}

// MustWritePair writes a certificate for 127.0.0.1 and localhost with
// serial into dir as tls.crt and tls.key, replacing them by rename as
// certbot and Kubernetes do. mismatched writes the key of another
// certificate: a pair the gateway must refuse.
func (ca *testCA) MustWritePair(tb testing.TB, dir string, serial int64, mismatched bool) (certFile, keyFile string) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	if mismatched {
		if key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
			tb.Fatal(err)
		}
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	mustReplace(tb, keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
	mustReplace(tb, certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	return certFile, keyFile
}

func mustReplace(tb testing.TB, name string, data []byte) {
	tb.Helper()
	if err := os.WriteFile(name+".tmp", data, 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.Rename(name+".tmp", name); err != nil {
		tb.Fatal(err)
	}
}

// MustStartTLSGateway starts one `gateway serve` whose listeners serve
// TLS (env sets the certificates), on fresh ports, and waits for its https
// /readyz. It is stopped at cleanup; a failed test shows its stderr.
func MustStartTLSGateway(tb testing.TB, name string, env map[string]string) *Gateway {
	tb.Helper()
	bin := MustGatewayBinary(tb)
	dir := tb.TempDir()
	full := map[string]string{
		"GATEWAY_LISTEN":         fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(tb)),
		"GATEWAY_ADMIN_LISTEN":   fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(tb)),
		"GATEWAY_DATA_DIR":       filepath.Join(dir, "data"),
		"GATEWAY_ADMIN_TOKEN":    randomHex(24),
		"GATEWAY_SHUTDOWN_GRACE": "2s",
		"GATEWAY_LOG_LEVEL":      "debug",
	}
	for k, v := range env {
		full[k] = v
	}
	g := &Gateway{
		Name: name, PublicAddr: full["GATEWAY_LISTEN"], AdminAddr: full["GATEWAY_ADMIN_LISTEN"],
		AdminToken: full["GATEWAY_ADMIN_TOKEN"],
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
	cmd := exec.Command(bin, "serve")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, childEnv(full), stdout, stderr
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
		r, err := fetch(http.MethodGet, "https://"+g.AdminAddr+"/readyz", nil)
		if err == nil && r.Status == http.StatusOK {
			return g
		}
		if g.Exited() || time.Now().After(deadline) {
			tb.Fatalf("%s not ready over https (%v, %v); stderr:\n%s", name, r, err, tail(g.StderrPath, 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// HTTPSAdmin is the admin API of a gateway whose admin listener serves TLS.
func (g *Gateway) HTTPSAdmin() *Admin {
	return &Admin{Base: "https://" + g.AdminAddr, Token: g.AdminToken}
}

// h2Client speaks HTTP/2 only, trusting roots, following no redirect.
func h2Client(roots *x509.CertPool) *http.Client {
	var p http.Protocols
	p.SetHTTP2(true)
	return &http.Client{
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots}, Protocols: &p,
			DisableCompression: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// servedSerial is the serial of the certificate a new handshake with addr
// shows, for serverName.
func servedSerial(tb testing.TB, addr, serverName string, roots *x509.CertPool) *big.Int {
	tb.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{RootCAs: roots, ServerName: serverName})
	if err != nil {
		tb.Fatalf("handshake with %s (%s): %v", addr, serverName, err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber
}

// waitLog waits up to d for a line containing substr in the file.
func waitLog(tb testing.TB, path, substr string, d time.Duration) string {
	tb.Helper()
	deadline := time.Now().Add(d)
	for {
		b, _ := os.ReadFile(path)
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, substr) {
				return line
			}
		}
		if time.Now().After(deadline) {
			tb.Fatalf("no line with %q in %s within %v; last lines:\n%s", substr, filepath.Base(path), d, tail(path, 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// getH2 sends a GET with ctx over c and checks it was answered over HTTP/2.
func getH2(tb testing.TB, ctx context.Context, c *http.Client, rawURL string, hdr ...string) *http.Response {
	tb.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatalf("GET %s: %v", redact(rawURL), err)
	}
	if resp.ProtoMajor != 2 {
		resp.Body.Close()
		tb.Fatalf("GET %s answered over %s, want HTTP/2", redact(rawURL), resp.Proto)
	}
	return resp
}
