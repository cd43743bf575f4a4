package tlsserve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ocsp"
)

// MustServe serves TLS with c on a loopback port until the test ends and
// returns the address.
func MustServe(tb testing.TB, c *tls.Config) string {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{TLSConfig: c, HTTP2: HTTP2Config(), Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, r.Proto) //nolint:errcheck // test
	})}
	go srv.ServeTLS(l, "", "") //nolint:errcheck // closed at cleanup
	tb.Cleanup(func() { srv.Close() })
	return l.Addr().String()
}

func handshake(tb testing.TB, addr string, roots *x509.CertPool, c *tls.Config) tls.ConnectionState {
	tb.Helper()
	if c == nil {
		c = &tls.Config{}
	}
	c.RootCAs, c.ServerName = roots, "localhost"
	conn, err := tls.Dial("tcp", addr, c)
	if err != nil {
		tb.Fatalf("handshake with %s: %v", addr, err)
	}
	defer conn.Close()
	return conn.ConnectionState()
}

func TestServerReloadsChangedFilesAndKeepsARefusedPairOut(t *testing.T) {
	ca := MustCA(t)
	dir := t.TempDir()
	certFile, keyFile := ca.MustWritePair(t, dir, 7, time.Now().Add(time.Hour), "")
	s, err := New(context.Background(), Options{CertFile: certFile, KeyFile: keyFile, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	addr := MustServe(t, s.PublicConfig())
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	servedSerial := func() int64 { return handshake(t, addr, roots, nil).PeerCertificates[0].SerialNumber.Int64() }
	if got := servedSerial(); got != 7 {
		t.Fatalf("serial %d, want 7", got)
	}
	ca.MustWritePair(t, dir, 8, time.Now().Add(time.Hour), "")
	waitFor(t, func() bool { return servedSerial() == 8 }, "the new serial 8 served")

	MustReplace(t, keyFile, []byte("garbage"))
	time.Sleep(100 * time.Millisecond) // ten polls
	if got := servedSerial(); got != 8 {
		t.Errorf("after a bad key was written: serial %d, want the old 8", got)
	}
	if s.AdminConfig() == nil {
		t.Errorf("AdminConfig() = nil; the admin listener defaults to the public pair")
	}
}

func TestPolicyIsTLS12PlusWithH2(t *testing.T) {
	ca := MustCA(t)
	certFile, keyFile := ca.MustWritePair(t, t.TempDir(), 1, time.Now().Add(time.Hour), "")
	s, err := New(context.Background(), Options{CertFile: certFile, KeyFile: keyFile})
	if err != nil {
		t.Fatal(err)
	}
	addr := MustServe(t, s.PublicConfig())
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)

	if st := handshake(t, addr, roots, &tls.Config{NextProtos: []string{"h2", "http/1.1"}}); st.NegotiatedProtocol != "h2" || st.Version != tls.VersionTLS13 {
		t.Errorf("negotiated %q over %s, want h2 over TLS 1.3", st.NegotiatedProtocol, tls.VersionName(st.Version))
	}
	for _, tc := range []struct {
		name string
		c    *tls.Config
	}{
		{"TLS11", &tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}},
		{"CBCOnly", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.c.RootCAs, tc.c.ServerName = roots, "localhost"
			if conn, err := tls.Dial("tcp", addr, tc.c); err == nil {
				conn.Close()
				t.Errorf("handshake with %s succeeded, want it refused", tc.name)
			}
		})
	}
	if st := handshake(t, addr, roots, &tls.Config{MaxVersion: tls.VersionTLS12}); st.CipherSuite != tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256 {
		t.Errorf("TLS 1.2 suite %s, want ECDHE-ECDSA-AES128-GCM-SHA256", tls.CipherSuiteName(st.CipherSuite))
	}
}

func TestOCSPStapleFromTheResponder(t *testing.T) {
	ca := MustCA(t)
	var asked atomic.Int32
	responder := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		body, _ := io.ReadAll(r.Body)
		req, err := ocsp.ParseRequest(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		resp, err := ocsp.CreateResponse(ca.cert, ca.cert, ocsp.Response{
			Status: ocsp.Good, SerialNumber: req.SerialNumber,
			ThisUpdate: time.Now().Add(-time.Minute), NextUpdate: time.Now().Add(time.Hour),
		}, ca.key)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/ocsp-response")
		w.Write(resp) //nolint:errcheck // test
	}))
	defer responder.Close()
	certFile, keyFile := ca.MustWritePair(t, t.TempDir(), 42, time.Now().Add(time.Hour), responder.URL)
	s, err := New(context.Background(), Options{CertFile: certFile, KeyFile: keyFile, Poll: 10 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Run(ctx)
	addr := MustServe(t, s.PublicConfig())
	roots := x509.NewCertPool()
	roots.AddCert(ca.cert)
	waitFor(t, func() bool { return len(handshake(t, addr, roots, nil).OCSPResponse) > 0 }, "an OCSP staple in the handshake")
	st := handshake(t, addr, roots, nil)
	resp, err := ocsp.ParseResponseForCert(st.OCSPResponse, st.PeerCertificates[0], ca.cert)
	if err != nil || resp.Status != ocsp.Good || resp.SerialNumber.Cmp(big.NewInt(42)) != 0 {
		t.Errorf("stapled response %+v, %v; want good for serial 42", resp, err)
	}
	if n := asked.Load(); n != 1 {
		t.Errorf("responder asked %d times, want once (the next is half-way to nextUpdate)", n)
	}
}

func waitFor(tb testing.TB, cond func() bool, what string) {
	tb.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("no %s within 5 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
