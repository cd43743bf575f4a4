package compare

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/dlgate/dlgate/bench/loadgen"
	"github.com/dlgate/dlgate/internal/testenv"
)

// The TLS rows of issue 18: the gateway's own HTTPS against nginx's with
// the same certificate and the same negotiated cipher (1 GiB over
// HTTP/1.1 and over HTTP/2, 64 KiB session ranges on kept-alive
// connections), and the S3 store over https against a direct https GET
// from the same versitygw, with the gateway's memory at 200 concurrent
// downloads through it. BENCH_ONLY names: tls-h1, tls-h2, tls-h2-single
// (one download on one connection, as a browser fetches a file),
// tls-ranges64k, s3-https, memory-https.

// tlsRows runs the TLS rows the plan selects, after the plain ones.
func (e *bench) tlsRows(b *testing.B, rep *report) {
	web, s3 := e.plan.runs("tls-h1", "tls-h2", "tls-h2-single", "tls-ranges64k"), e.plan.runs("s3-https", "memory-https")
	if !web && !s3 {
		return
	}
	cert := newBenchCert(b)
	// The admin API of a gateway serving TLS is https too.
	adminClient.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: cert.pool}
	if web {
		say("starting nginx with TLS and a gateway serving TLS (the same certificate); uploading 1 GiB and 64 MiB through it")
		ng := startNginxTLS(b, e.www, cert)
		env := e.mysqlEnv(b)
		env["GATEWAY_STORE"] = "fs"
		env["GATEWAY_TLS_CERT"], env["GATEWAY_TLS_KEY"] = cert.certFile, cert.keyFile
		g := startGateway(b, e.gateway, env)
		for _, name := range []string{"big.bin", "ranges.bin"} {
			g.upload(b, name, filepath.Join(e.www, name))
		}
		if e.plan.runs("tls-h1") {
			rep.add(e.tlsLarge(b, g, ng, cert, false, e.plan.largeClients))
		}
		if e.plan.runs("tls-h2") {
			rep.add(e.tlsLarge(b, g, ng, cert, true, e.plan.largeClients))
		}
		if e.plan.runs("tls-h2-single") {
			rep.add(e.tlsLarge(b, g, ng, cert, true, 1))
		}
		if e.plan.runs("tls-ranges64k") {
			rep.add(e.tlsRanges(b, g, ng, cert))
		}
		e.profileTLS(b, g, cert)
		g.stop()
		ng.stop()
	}
	if s3 {
		e.s3HTTPS(b, rep, cert)
	}
}

// tlsLarge compares 1 GiB downloads over TLS from the gateway's fs store
// with nginx serving the same file, over HTTP/2 (h2) or HTTP/1.1, by
// clients concurrent downloads. Over HTTP/2 the clients' downloads share
// one connection to each server, as a browser's do; over HTTP/1.1 each
// has its own. One client is one download at a time on one connection:
// what a browser does when a person downloads a file.
func (e *bench) tlsLarge(b *testing.B, g *gatewayProc, ng *nginx, cert *benchCert, h2 bool, clients int) row {
	proto := map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2]
	say("1 GiB over TLS, %s, %d at once: the gateway's fs store vs nginx", proto, clients)
	client := tlsClient(cert, clients, h2)
	defer client.CloseIdleConnections()
	l := g.mustLink(b, "big.bin", `"downloads":1000000`)
	nginxURL := ng.URL + "/big.bin"
	c := e.with(client)
	c.plan.largeClients = clients
	if clients < e.plan.largeClients {
		// As many bytes per round as the concurrent rows, one at a time
		// would take as long again: half as many.
		c.plan.largeDownloads = max(2, e.plan.largeDownloads/2)
	}
	downloads := fmt.Sprintf("%d concurrent downloads", clients)
	if clients == 1 {
		downloads = "one download at a time on one connection"
	}
	c.warm(b, l.URL, nginxURL)
	gwTLS, ngTLS := negotiated(b, client, l.URL), negotiated(b, client, nginxURL)
	if gwTLS != ngTLS {
		b.Errorf("%s: the gateway negotiated %s, nginx %s: not the same cipher", proto, gwTLS, ngTLS)
	}
	gw, ref := alternate(e.plan.rounds, nil,
		func() sample { return c.download(b, l.URL, map[string][]int{"gw": {g.Pid()}}) },
		func() sample { return c.download(b, nginxURL, map[string][]int{"nginx": ng.pids()}) })
	return row{
		work:      fmt.Sprintf("1 GiB over TLS, %s, fs store (%s; %s)", proto, downloads, gwTLS),
		gateway:   gw.stat("GBps").format("%.2f") + " GB/s, " + gw.stat("cpu.gw").format("%.2f") + " CPU-s/GiB",
		reference: "nginx, the same certificate and cipher, " + ref.stat("GBps").format("%.2f") + " GB/s, " + ref.stat("cpu.nginx").format("%.2f") + " CPU-s/GiB",
		ratio:     ratios(gw, "GBps", ref, "GBps").stat("r").format("%.2f") + " (target ≥ 0.9)",
		before:    "–",
		notes: []string{fmt.Sprintf("TLS %s row: the client (this bench) used %s CPU-s/GiB against the gateway and %s against nginx; "+
			"client and server share the 2 cores, so throughput follows the sum of their CPU per GiB.",
			proto, gw.stat("cpu.client").format("%.2f"), ref.stat("cpu.client").format("%.2f"))},
	}
}

// tlsRanges compares 64 KiB ranges at random offsets of one session over
// TLS (16 clients on kept-alive HTTP/1.1 connections) with the same
// ranges from nginx over TLS.
func (e *bench) tlsRanges(b *testing.B, g *gatewayProc, ng *nginx, cert *benchCert) row {
	const size = 64 << 10
	say("64 KiB session ranges over TLS vs nginx ranges over TLS")
	client := tlsClient(cert, 16, false)
	defer client.CloseIdleConnections()
	l := g.mustLink(b, "ranges.bin", `"downloads":1,"delivery":"session","session":{"byte_budget":1125899906842624,"max_concurrency":64}`)
	session := g.mintSession(b, l)
	nginxURL := ng.URL + "/ranges.bin"
	run := func(url string) (loadgen.Result, int64) {
		q0 := e.q.read(b)
		res := loadgen.Run(e.ctx, client, loadgen.Config{Clients: 16, Duration: e.plan.rangeTime, Request: rangeOf(url, size)})
		if res.Failed > 0 || res.Status(http.StatusPartialContent) != res.Requests {
			b.Errorf("ranges of %s: %v", url, res)
		}
		return res, e.q.read(b) - q0 - 1
	}
	run(session) // connections, handshakes, the page cache
	run(nginxURL)
	measure := func(url string) func() sample {
		return func() sample {
			res, q := run(url)
			return sample{"rate": res.Rate(), "stmts": float64(q) / float64(res.Requests)}
		}
	}
	gw, ref := alternate(e.plan.rounds, nil, measure(session), measure(nginxURL))
	return row{
		work:      "64 KiB session ranges over TLS, HTTP/1.1 keep-alive, 16 clients, MariaDB (" + negotiated(b, client, nginxURL) + ")",
		gateway:   gw.stat("rate").format("%.0f") + "/s, " + gw.stat("stmts").format("%.2f") + " statements each",
		reference: "nginx ranges over TLS " + ref.stat("rate").format("%.0f") + "/s",
		ratio:     ratios(gw, "rate", ref, "rate").stat("r").format("%.2f") + " (target ≥ 0.5)",
		before:    "–",
	}
}

// s3HTTPS runs the S3-over-https rows on a versitygw of their own serving
// cert, with the gateway trusting cert's CA through GATEWAY_S3_CA. The
// gateway's public listener is plain HTTP, so each side has one TLS leg:
// versitygw to the gateway, or versitygw to the client.
func (e *bench) s3HTTPS(b *testing.B, rep *report, cert *benchCert) {
	say("starting versitygw with TLS and a gateway on it; uploading 1 GiB through the gateway")
	vgw := testenv.StartS3(b, testenv.WithTLS(cert.certFile, cert.keyFile, cert.pool))
	bucket := vgw.NewBucket(b, true)
	env := e.mysqlEnv(b)
	for k, v := range map[string]string{
		"GATEWAY_STORE": "s3", "GATEWAY_S3_BUCKET": bucket, "GATEWAY_S3_ENDPOINT": vgw.Endpoint, "GATEWAY_S3_CA": cert.caFile,
		"GATEWAY_S3_REGION": vgw.Region, "GATEWAY_S3_PATH_STYLE": "true",
		"AWS_ACCESS_KEY_ID": vgw.AccessKey, "AWS_SECRET_ACCESS_KEY": vgw.SecretKey,
	} {
		env[k] = v
	}
	g := startGateway(b, e.gateway, env)
	defer g.stop()
	g.upload(b, "big.bin", filepath.Join(e.www, "big.bin"))
	if e.plan.runs("s3-https") {
		rep.add(e.s3HTTPSLarge(b, g, vgw, bucket, cert))
		e.profile(b, g, "s3-https", "the S3 path over https", func(d time.Duration) {
			l := g.mustLink(b, "big.bin", `"downloads":1000000`)
			loadgen.Run(e.ctx, e.client, loadgen.Config{Clients: e.plan.largeClients, Duration: d, Request: get(l.URL)})
		})
	}
	if e.plan.runs("memory-https") {
		r := e.memory(b, g)
		r.work = "200 concurrent downloads, S3 store over https, gateway memory"
		rep.add(r)
	}
}

// s3HTTPSLarge compares 1 GiB through the gateway from versitygw over
// https with a direct https GET (a presigned URL) from the same server.
func (e *bench) s3HTTPSLarge(b *testing.B, g *gatewayProc, vgw *testenv.S3, bucket string, cert *benchCert) row {
	say("1 GiB from the S3 store over https vs a direct https GET from versitygw")
	ps, err := awss3.NewPresignClient(vgw.Client()).PresignGetObject(e.ctx,
		&awss3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("big.bin")}, awss3.WithPresignExpires(6*time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	direct := e.with(tlsClient(cert, e.plan.largeClients, false))
	l := g.mustLink(b, "big.bin", `"downloads":1000000`)
	e.warm(b, l.URL)
	direct.warm(b, ps.URL)
	pid := vgw.Pid()
	gw, ref := alternate(e.plan.rounds, nil,
		func() sample {
			s := e.download(b, l.URL, map[string][]int{"gw": {g.Pid()}, "vgw": {pid}})
			s["cpu.both"] = s["cpu.gw"] + s["cpu.vgw"]
			return s
		},
		func() sample { return direct.download(b, ps.URL, map[string][]int{"vgw": {pid}}) })
	return row{
		work: fmt.Sprintf("1 GiB, S3 store over https (%d concurrent downloads; the gateway's client side plain HTTP)", e.plan.largeClients),
		gateway: gw.stat("GBps").format("%.2f") + " GB/s; CPU-s/GiB: gateway " + gw.stat("cpu.gw").format("%.2f") +
			" + versitygw " + gw.stat("cpu.vgw").format("%.2f") + " = " + gw.stat("cpu.both").format("%.2f"),
		reference: "direct https GET from the same versitygw " + ref.stat("GBps").format("%.2f") + " GB/s, versitygw " +
			ref.stat("cpu.vgw").format("%.2f") + " CPU-s/GiB",
		ratio: ratios(gw, "GBps", ref, "GBps").stat("r").format("%.2f") + " (target ≥ 0.6); CPU (gateway + versitygw) / versitygw direct: " +
			ratios(gw, "cpu.both", ref, "cpu.vgw").stat("r").format("%.1f×"),
		before: "–",
		notes: []string{fmt.Sprintf("S3 over https row: the client used %s CPU-s/GiB through the gateway (plain HTTP) and %s direct (https).",
			gw.stat("cpu.client").format("%.2f"), ref.stat("cpu.client").format("%.2f"))},
	}
}

// profileTLS takes a CPU profile of the gateway serving 1 GiB downloads
// over TLS, on each protocol whose row ran, and 64 KiB session ranges.
func (e *bench) profileTLS(b *testing.B, g *gatewayProc, cert *benchCert) {
	if e.plan.profile == 0 {
		return
	}
	if e.plan.runs("tls-ranges64k") {
		l := g.mustLink(b, "ranges.bin", `"downloads":1,"delivery":"session","session":{"byte_budget":1125899906842624,"max_concurrency":64}`)
		session := g.mintSession(b, l)
		client := tlsClient(cert, 16, false)
		e.profile(b, g, "tls-ranges64k", "64 KiB session ranges over TLS", func(d time.Duration) {
			loadgen.Run(e.ctx, client, loadgen.Config{Clients: 16, Duration: d, Request: rangeOf(session, 64<<10)})
		})
		client.CloseIdleConnections()
	}
	for _, h2 := range []bool{false, true} {
		name := map[bool]string{false: "tls-h1", true: "tls-h2"}[h2]
		if !e.plan.runs(name) {
			continue
		}
		l := g.mustLink(b, "big.bin", `"downloads":1000000`)
		client := tlsClient(cert, e.plan.largeClients, h2)
		e.profile(b, g, name, "1 GiB downloads over TLS ("+name+")", func(d time.Duration) {
			loadgen.Run(e.ctx, client, loadgen.Config{Clients: e.plan.largeClients, Duration: d, Request: get(l.URL)})
		})
		client.CloseIdleConnections()
	}
}

// with is e measuring through client instead of e.client.
func (e *bench) with(client *http.Client) *bench {
	c := *e
	c.client = client
	return &c
}

// tlsClient is loadgen's client for n connections trusting cert's CA,
// speaking HTTP/2 only or HTTP/1.1 only. It offers X25519 alone: nginx's
// OpenSSL 3.0 has no X25519MLKEM768, which Go's server would choose
// otherwise, and the handshakes of both sides must cost the same.
func tlsClient(cert *benchCert, n int, h2 bool) *http.Client {
	c := loadgen.NewClient(n)
	t := c.Transport.(*http.Transport)
	t.TLSClientConfig = &tls.Config{RootCAs: cert.pool, CurvePreferences: []tls.CurveID{tls.X25519}}
	var p http.Protocols
	if h2 {
		p.SetHTTP2(true)
	} else {
		p.SetHTTP1(true)
	}
	t.Protocols = &p
	return c
}

// negotiated names the TLS version, cipher suite and key exchange a HEAD
// of url is answered with (a HEAD claims nothing).
func negotiated(b *testing.B, client *http.Client, url string) string {
	req, _ := http.NewRequest(http.MethodHead, url, nil)
	resp, err := client.Do(req)
	if err != nil {
		b.Fatalf("HEAD %s: %v", url, err)
	}
	resp.Body.Close()
	if resp.TLS == nil {
		b.Fatalf("HEAD %s: not over TLS", url)
	}
	s := resp.TLS
	return fmt.Sprintf("%s %s %s, %s", tls.VersionName(s.Version), tls.CipherSuiteName(s.CipherSuite), s.CurveID, resp.Proto)
}

// benchCert is the certificate every TLS server of the bench serves: an
// ECDSA P-256 leaf for 127.0.0.1 and localhost, signed by a CA made for
// the run.
type benchCert struct {
	certFile, keyFile, caFile string
	pool                      *x509.CertPool
}

func newBenchCert(tb testing.TB) *benchCert {
	tb.Helper()
	dir := tb.TempDir()
	must := func(err error) {
		if err != nil {
			tb.Fatal(err)
		}
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "dlgate bench CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(err)
	ca, err := x509.ParseCertificate(caDER)
	must(err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(err)
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(7 * 24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	must(err)
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	must(err)
	c := &benchCert{
		certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key"), caFile: filepath.Join(dir, "ca.pem"),
		pool: x509.NewCertPool(),
	}
	c.pool.AddCert(ca)
	must(os.WriteFile(c.certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	must(os.WriteFile(c.keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600))
	must(os.WriteFile(c.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644))
	return c
}

// nginxTLSConf is nginxConf's server with TLS on one port, HTTP/2 and
// HTTP/1.1 by ALPN (nginx 1.22's "listen … ssl http2"), the gateway's
// policy: TLS 1.2 and 1.3, Mozilla's intermediate suites for 1.2 (TLS
// 1.3's are OpenSSL's defaults, whose client-preferred AES-128-GCM both
// servers choose). sendfile stays on but has no effect: without kernel
// TLS (not in this kernel) nginx encrypts in user space, as Go does.
const nginxTLSConf = nginxHTTP + `  server {
    listen %[2]s ssl http2;
    ssl_certificate %[4]s;
    ssl_certificate_key %[5]s;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_ciphers ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305;
    ssl_prefer_server_ciphers off;
    root %[3]s;
  }
}
`

// startNginxTLS serves root over TLS with cert, as startNginx does over
// plain HTTP, and stops nginx in tb.Cleanup.
func startNginxTLS(tb testing.TB, root string, cert *benchCert) *nginx {
	tb.Helper()
	bin, err := testenv.FindBinary("nginx")
	testenv.Require(tb, "nginx (Debian package nginx; scripts/bench-compare.sh installs it as root)", err)
	dir := tb.TempDir()
	addr := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(tb))
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, fmt.Appendf(nil, nginxTLSConf, dir, addr, root, cert.certFile, cert.keyFile), 0o644); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "-e", filepath.Join(dir, "error.log"), "-p", dir, "-c", conf)
	cmd.SysProcAttr = testenv.SysProcAttr()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start nginx: %v", err)
	}
	n := &nginx{URL: "https://" + addr, cmd: cmd, done: make(chan struct{})}
	go func() { cmd.Wait(); close(n.done) }() //nolint:errcheck // its exit is seen through done
	tb.Cleanup(n.stop)
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: cert.pool, ServerName: "localhost"})
		if err == nil {
			c.Close()
			return n
		}
		select {
		case <-n.done:
			deadline = time.Time{}
		default:
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			tb.Fatalf("nginx with TLS on %s: %v\n%s", addr, err, strings.TrimSpace(string(log)))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
