package tlsserve

import (
	"bytes"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2Server serves body at / over TLS and HTTP/2 as the gateway does
// (serveOn, baseServer): a BatchListener and EnableHTTP2Batching, with
// writeTimeout as HTTP/2's WriteByteTimeout. batched counts the
// connections whose writes were batched.
func h2Server(t *testing.T, body []byte, writeTimeout time.Duration) (addr string, roots *x509.CertPool, batched *atomic.Int32) {
	t.Helper()
	ca := MustCA(t)
	certPEM, keyPEM := ca.leaf(t, 2, time.Now().Add(time.Hour), "")
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conf := HTTP2Config()
	conf.WriteByteTimeout = writeTimeout
	batched = new(atomic.Int32)
	srv := &http.Server{
		TLSConfig: serverConfig(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &pair, nil }),
		HTTP2:     conf,
		ConnState: func(c net.Conn, s http.ConnState) {
			was := isBatched(c)
			EnableHTTP2Batching(c, s)
			if !was && isBatched(c) {
				batched.Add(1)
			}
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.Write(body) //nolint:errcheck // the client checks what came
		}),
	}
	go srv.ServeTLS(BatchListener(l), "", "") //nolint:errcheck // closed at cleanup
	t.Cleanup(func() { srv.Close() })
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	return l.Addr().String(), pool, batched
}

func isBatched(c net.Conn) bool {
	tc, ok := c.(*tls.Conn)
	if !ok {
		return false
	}
	b, ok := tc.NetConn().(*batchConn)
	if !ok {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.on
}

// Concurrent HTTP/2 downloads on one batched connection arrive
// byte-exact; HTTP/1.1 connections of the same server are not batched.
func TestHTTP2DownloadsOverABatchedConnectionAreByteExact(t *testing.T) {
	body := make([]byte, 4<<20)
	rand.Read(body)
	addr, roots, batched := h2Server(t, body, time.Minute)
	for _, h2 := range []bool{true, false} {
		var p http.Protocols
		p.SetHTTP2(h2)
		p.SetHTTP1(!h2)
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "localhost"}, Protocols: &p}
		client := &http.Client{Transport: tr}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := client.Get("https://" + addr + "/")
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				got, err := io.ReadAll(resp.Body)
				if err != nil || !bytes.Equal(got, body) || resp.ProtoMajor != map[bool]int{true: 2, false: 1}[h2] {
					t.Errorf("%s: %d bytes, %v; want the %d-byte body", resp.Proto, len(got), err, len(body))
				}
			}()
		}
		wg.Wait()
		tr.CloseIdleConnections()
	}
	if n := batched.Load(); n != 1 {
		t.Errorf("%d connections batched, want 1 (the HTTP/2 one; the HTTP/1.1 ones stay unbatched)", n)
	}
}

// An HTTP/2 client that stops reading the socket is cut off after the
// WriteByteTimeout, batched or not: nothing stays blocked for ever.
func TestHTTP2ClientThatStopsReadingIsCutAtTheWriteByteTimeout(t *testing.T) {
	body := make([]byte, 64<<20)
	addr, roots, batched := h2Server(t, body, 500*time.Millisecond)
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.(*net.TCPConn).SetReadBuffer(16 << 10) //nolint:errcheck // a small window stalls the server sooner
	conn := tls.Client(raw, &tls.Config{RootCAs: roots, ServerName: "localhost", NextProtos: []string{"h2"}})
	if err := conn.Handshake(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(conn, conn)
	// Windows wide open, so that only the socket can hold the server back.
	fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1}) //nolint:errcheck // checked by the read below
	fr.WriteWindowUpdate(0, 1<<31-1-65535)                                              //nolint:errcheck // as above
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":authority", "localhost"}, {":path", "/"}} {
		enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]}) //nolint:errcheck // a bytes.Buffer
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	// Read a little, so the download is under way, then nothing.
	if _, err := io.CopyN(io.Discard, conn, 64<<10); err != nil {
		t.Fatal(err)
	}
	if batched.Load() != 1 {
		t.Fatal("the HTTP/2 connection is not batched")
	}
	time.Sleep(3 * time.Second)                           // six times the WriteByteTimeout
	raw.SetReadDeadline(time.Now().Add(30 * time.Second)) //nolint:errcheck // bounds the drain
	n, err := io.Copy(io.Discard, conn)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the server kept the connection open (%d bytes drained): it should have closed it", n)
	}
	if err != nil && !isReset(err) {
		t.Fatalf("draining the connection: %v after %d bytes", err, n)
	}
	if n >= int64(len(body)) {
		t.Fatalf("the server wrote all %d bytes to a client that stopped reading for 6 write timeouts: not cut", n)
	}
}

// isReset: the server closed the connection under the reader's feet (a
// reset, or an end without close_notify).
func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) || errors.Is(err, io.ErrUnexpectedEOF)
}
