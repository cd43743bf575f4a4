package e2e

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Hostile clients over HTTP/2 (issue 18): what hostile_test.go holds for
// HTTP/1.1 (issue 9), on a gateway serving TLS. A request that cannot be
// answered claims nothing; a body that never finishes is refused within
// GATEWAY_BODY_TIMEOUT; a header block is bounded as MaxHeaderBytes bounds
// an HTTP/1.1 head; a connection carries at most tlsserve.MaxStreams
// requests; idle connections past GATEWAY_MAX_CONNECTIONS wait in the
// kernel's backlog. The test speaks HTTP/2 frame by frame (x/net/http2's
// Framer), as an attacker would: Go's client refuses to send most of it.
//
// A connection that completes TLS with ALPN h2 and never sends the
// client preface is closed by net/http's preface timeout (10 s):
// TestHTTP2AConnectionThatNeverSendsThePrefaceIsClosed. Not here, because
// they take minutes: a header block left unfinished and an idle
// connection (preface and SETTINGS sent, then nothing) are closed after
// the server's IdleTimeout (2 min); nothing tests those two.

// TestHTTP2SlowBodiesHugeHeadersAndStreamFloods runs each attack on its
// own connection while normal HTTP/2 downloads go on beside it.
func TestHTTP2SlowBodiesHugeHeadersAndStreamFloods(t *testing.T) {
	t.Parallel()
	certFile, keyFile := e2eCA.MustWritePair(t, t.TempDir(), 5001, false)
	g := MustStartTLSGateway(t, "hostile-h2", map[string]string{
		"GATEWAY_TLS_CERT": certFile, "GATEWAY_TLS_KEY": keyFile,
		"GATEWAY_BODY_TIMEOUT": "1s",
	})
	admin := g.HTTPSAdmin()
	obj := admin.MustUpload(t, "hostile-h2/normal.bin", 256<<10)
	normal := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 100000})
	downloads := startH2Downloads(t, normal.URL, obj)

	t.Run("AGETWithABodyIs400AndClaimsNothing", func(t *testing.T) {
		target := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 5})
		c := dialH2(t, g.PublicAddr)
		id := c.request(t, "GET", "/d/"+target.Token, false, "content-length", "200000")
		c.fr.WriteData(id, false, []byte("x")) //nolint:errcheck // the answer is what counts
		if got := c.outcomes(t, id)[id]; got.status != 400 {
			t.Errorf("GET with a 200,000-byte body over HTTP/2: %v, want 400", got)
		}
		admin.checkCounts(t, target.ID, 5, 0, 0)
	})

	t.Run("AMintWhoseBodyNeverEndsIs408AndClaimsNothing", func(t *testing.T) {
		mint := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 5})
		c := dialH2(t, g.PublicAddr)
		id := c.request(t, "POST", "/d/"+mint.Token+"/sessions", false, "content-length", "1000")
		c.fr.WriteData(id, false, []byte("{")) //nolint:errcheck // as above
		if got := c.outcomes(t, id)[id]; got.status != 408 {
			t.Errorf("a mint whose body stops after 1 of 1,000 bytes: %v, want 408 (GATEWAY_BODY_TIMEOUT)", got)
		}
		admin.checkCounts(t, mint.ID, 5, 0, 0)
	})

	t.Run("StreamsPastTheLimitAreResetAndClaimNothing", func(t *testing.T) {
		mint := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 5})
		c := dialH2(t, g.PublicAddr)
		limit := int(c.settings[http2.SettingMaxConcurrentStreams])
		if limit != 100 {
			t.Fatalf("SETTINGS_MAX_CONCURRENT_STREAMS %d, want 100 (tlsserve.MaxStreams)", limit)
		}
		// Every stream a mint whose body never comes: each holds its
		// stream until the body timeout.
		var ids []uint32
		for range limit + 20 {
			ids = append(ids, c.request(t, "POST", "/d/"+mint.Token+"/sessions", false, "content-length", "1000"))
		}
		out := c.outcomes(t, ids...)
		counts := map[string]int{}
		for _, id := range ids {
			counts[out[id].String()]++
		}
		t.Logf("%d streams of dripping mints on one connection: %v", len(ids), counts)
		if counts["408"] != limit || counts["reset PROTOCOL_ERROR"]+counts["reset REFUSED_STREAM"] != 20 {
			t.Errorf("%d streams on one connection with a limit of %d: %v, want %d × 408 and 20 reset", len(ids), limit, counts, limit)
		}
		admin.checkCounts(t, mint.ID, 5, 0, 0)
	})

	t.Run("AHeaderBlockPastTheLimitIs431AndClaimsNothing", func(t *testing.T) {
		target := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 5})
		c := dialH2(t, g.PublicAddr)
		max := c.settings[http2.SettingMaxHeaderListSize]
		// net/http's HTTP/1.1 bound (MaxHeaderBytes, 64 KiB) plus its
		// 4 KiB of slack.
		if max == 0 || max > 64<<10+4096 {
			t.Fatalf("SETTINGS_MAX_HEADER_LIST_SIZE %d, want at most 64 KiB + 4 KiB", max)
		}
		// 100 headers of 1 KiB: one block of about 100 KiB.
		var hdr []string
		for i := range 100 {
			hdr = append(hdr, "x-pad-"+strconv.Itoa(i), strings.Repeat("a", 1000))
		}
		id := c.request(t, "GET", "/d/"+target.Token, true, hdr...)
		if got := c.outcomes(t, id)[id]; got.status != 431 {
			t.Errorf("GET with 100 KiB of headers (limit %d): %v, want 431", max, got)
		}
		admin.checkCounts(t, target.ID, 5, 0, 0)
	})

	t.Run("ANeverEndingHeaderBlockClosesTheConnection", func(t *testing.T) {
		// CONTINUATION frames without END_HEADERS, forever (the
		// "CONTINUATION flood", CVE-2023-45288): the server must close the
		// connection once the block is past its limit, not buffer it.
		target := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 5})
		c := dialH2(t, g.PublicAddr)
		ended := make(chan error, 1)
		go func() {
			for {
				f, err := c.fr.ReadFrame()
				if err != nil {
					ended <- err
					return
				}
				if ga, ok := f.(*http2.GoAwayFrame); ok {
					ended <- fmt.Errorf("GOAWAY %v", ga.ErrCode)
					return
				}
			}
		}()
		block := c.encode("GET", "/d/"+target.Token)
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndStream: true}); err != nil {
			t.Fatal(err)
		}
		// Literal headers of 16 KiB frames, each a new name.
		sent, frame := 0, 0
		var werr error
		for sent < 16<<20 && werr == nil {
			select {
			case err := <-ended:
				ended <- err
				werr = errors.New("closed")
				continue
			default:
			}
			var buf bytes.Buffer
			enc := hpack.NewEncoder(&buf)
			for buf.Len() < 16<<10-600 {
				enc.WriteField(hpack.HeaderField{Name: fmt.Sprintf("x-flood-%d", frame), Value: strings.Repeat("b", 500), Sensitive: true}) //nolint:errcheck // a buffer
				frame++
			}
			werr = c.fr.WriteContinuation(1, false, buf.Bytes())
			sent += buf.Len()
		}
		err := <-ended
		t.Logf("header block flood: connection ended (%v) after %d KiB sent", err, sent>>10)
		if sent >= 16<<20 {
			t.Errorf("16 MiB of one header block sent and the connection still open")
		}
		admin.checkCounts(t, target.ID, 5, 0, 0)
	})

	downloads.checkBeside(t, "the attacks")
	checkNoTokenInLogs(t, g)
}

// TestHTTP2IdleConnectionsWaitPastTheLimit opens more HTTP/2 connections
// than GATEWAY_MAX_CONNECTIONS and leaves them idle (preface and
// settings, then nothing): the gateway completes handshakes up to the
// limit, the others wait in the kernel's backlog, and each connection
// that goes lets one more in. The descriptors it holds stay within the
// limit.
func TestHTTP2IdleConnectionsWaitPastTheLimit(t *testing.T) {
	t.Parallel()
	const limit, extra = 32, 16
	certFile, keyFile := e2eCA.MustWritePair(t, t.TempDir(), 5002, false)
	g := MustStartTLSGateway(t, "hostile-h2-idle", map[string]string{
		"GATEWAY_TLS_CERT": certFile, "GATEWAY_TLS_KEY": keyFile,
		"GATEWAY_MAX_CONNECTIONS": strconv.Itoa(limit),
	})
	baseline := openFDs(t, g.Pid())
	fds := startFDSampler(g.Pid(), 50*time.Millisecond)

	var (
		mu    sync.Mutex
		open  []*h2Conn
		ready atomic.Int32
		wg    sync.WaitGroup
	)
	for range limit + extra {
		wg.Go(func() {
			c, err := tryDialH2(g.PublicAddr, 30*time.Second)
			if err != nil {
				return // refused, or still waiting when the test closed it
			}
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
			ready.Add(1)
		})
	}
	t.Cleanup(func() {
		mu.Lock()
		for _, c := range open {
			c.conn.Close()
		}
		mu.Unlock()
	})
	waitCount := func(want int32) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for ready.Load() < want {
			if time.Now().After(deadline) {
				t.Fatalf("%d idle HTTP/2 connections set up, want %d", ready.Load(), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitCount(limit)
	time.Sleep(500 * time.Millisecond) // room for any the limit failed to hold
	if n := ready.Load(); n != limit {
		t.Errorf("%d of %d idle HTTP/2 connections set up with GATEWAY_MAX_CONNECTIONS=%d", n, limit+extra, limit)
	}
	// Eight go; eight of the waiting come in.
	mu.Lock()
	for _, c := range open[:8] {
		c.conn.Close()
	}
	mu.Unlock()
	waitCount(limit + 8)
	time.Sleep(500 * time.Millisecond)
	if n := ready.Load(); n != limit+8 {
		t.Errorf("%d idle HTTP/2 connections set up after 8 of %d closed, want %d", n, limit, limit+8)
	}
	peak, series := fds.stop()
	t.Logf("gateway descriptors: %d before, peak %d (every 50 ms: %s)", baseline, peak, series)
	if peak > baseline+limit+2 {
		t.Errorf("peak of %d descriptors with GATEWAY_MAX_CONNECTIONS=%d and %d before", peak, limit, baseline)
	}
	mu.Lock()
	for _, c := range open {
		c.conn.Close()
	}
	mu.Unlock()
	wg.Wait()
	// Everything closed: an ordinary client is served again.
	admin := g.HTTPSAdmin()
	obj := admin.MustUpload(t, "hostile-h2/after.bin", 64<<10)
	l := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1})
	resp := getH2(t, t.Context(), h2Client(e2eCA.Pool), l.URL)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || sha256.Sum256(body) != obj.Sum {
		t.Errorf("download after the idle connections closed: %d bytes (%v), not the object", len(body), err)
	}
}

// TestHTTP2AConnectionThatNeverSendsThePrefaceIsClosed completes the TLS
// handshake with ALPN h2 and then sends nothing: the gateway writes its
// SETTINGS and closes the connection once net/http's preface timeout
// (10 s) has passed, within the test's 30 s read deadline, while HTTP/2
// downloads on another connection go on.
func TestHTTP2AConnectionThatNeverSendsThePrefaceIsClosed(t *testing.T) {
	t.Parallel()
	certFile, keyFile := e2eCA.MustWritePair(t, t.TempDir(), 5003, false)
	g := MustStartTLSGateway(t, "hostile-h2-preface", map[string]string{"GATEWAY_TLS_CERT": certFile, "GATEWAY_TLS_KEY": keyFile})
	admin := g.HTTPSAdmin()
	obj := admin.MustUpload(t, "hostile-h2/preface.bin", 256<<10)
	normal := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 100000})

	raw, err := (&net.Dialer{Timeout: 10 * time.Second}).Dial("tcp", g.PublicAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	conn := tls.Client(raw, &tls.Config{RootCAs: e2eCA.Pool, ServerName: "localhost", NextProtos: []string{"h2"}})
	conn.SetDeadline(time.Now().Add(10 * time.Second)) //nolint:errcheck // TCP
	if err := conn.Handshake(); err != nil {
		t.Fatalf("TLS handshake: %v", err)
	}
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		t.Fatalf("ALPN chose %q, not h2", p)
	}
	start := time.Now()
	downloads := startH2Downloads(t, normal.URL, obj)

	// Read what the server sends, sending nothing, until it closes the
	// connection; a read past the deadline is the failure.
	conn.SetDeadline(start.Add(30 * time.Second)) //nolint:errcheck // TCP
	fr := http2.NewFramer(io.Discard, conn)
	var frames []string
	for {
		f, err := fr.ReadFrame()
		if err == nil {
			frames = append(frames, f.Header().Type.String())
			continue
		}
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			t.Fatalf("connection without a preface still open %v after the handshake (frames read: %v)", time.Since(start).Round(time.Millisecond), frames)
		}
		t.Logf("connection without a preface closed by the server %v after the handshake (%v); frames read before: %v",
			time.Since(start).Round(time.Millisecond), err, frames)
		break
	}
	if len(frames) == 0 || frames[0] != "SETTINGS" {
		t.Errorf("frames before the close %v, want the server's SETTINGS first (an HTTP/2 connection, not a refused handshake)", frames)
	}

	downloads.checkBeside(t, "the connection without a preface")
}

// h2Conn is one HTTP/2 connection over TLS driven frame by frame.
type h2Conn struct {
	conn     *tls.Conn
	fr       *http2.Framer
	authHost string
	settings map[http2.SettingID]uint32 // the server's first SETTINGS
	next     uint32                     // next client stream id
}

// dialH2 connects to addr, negotiates h2 and exchanges the prefaces and
// SETTINGS.
func dialH2(tb testing.TB, addr string) *h2Conn {
	tb.Helper()
	c, err := tryDialH2(addr, 10*time.Second)
	if err != nil {
		tb.Fatalf("HTTP/2 connection to %s: %v", addr, err)
	}
	tb.Cleanup(func() { c.conn.Close() })
	return c
}

func tryDialH2(addr string, timeout time.Duration) (*h2Conn, error) {
	d := &net.Dialer{Timeout: timeout}
	raw, err := d.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	raw.SetDeadline(time.Now().Add(timeout)) //nolint:errcheck // TCP
	conn := tls.Client(raw, &tls.Config{RootCAs: e2eCA.Pool, ServerName: "localhost", NextProtos: []string{"h2"}})
	if err := conn.Handshake(); err != nil {
		raw.Close()
		return nil, err
	}
	if p := conn.ConnectionState().NegotiatedProtocol; p != "h2" {
		conn.Close()
		return nil, fmt.Errorf("ALPN chose %q, not h2", p)
	}
	c := &h2Conn{conn: conn, fr: http2.NewFramer(conn, conn), authHost: addr, next: 1, settings: map[http2.SettingID]uint32{}}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		conn.Close()
		return nil, err
	}
	if err := c.fr.WriteSettings(); err != nil {
		conn.Close()
		return nil, err
	}
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			conn.Close()
			return nil, err
		}
		if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
			s.ForeachSetting(func(s http2.Setting) error { c.settings[s.ID] = s.Val; return nil }) //nolint:errcheck // never fails
			break
		}
	}
	if err := c.fr.WriteSettingsAck(); err != nil {
		conn.Close()
		return nil, err
	}
	raw.SetDeadline(time.Time{}) //nolint:errcheck // TCP
	return c, nil
}

// encode is a request's header block: the pseudo-headers, then hdr (name,
// value pairs).
func (c *h2Conn) encode(method, path string, hdr ...string) []byte {
	var buf bytes.Buffer
	enc := hpack.NewEncoder(&buf)
	fields := []string{":method", method, ":scheme", "https", ":authority", c.authHost, ":path", path}
	fields = append(fields, hdr...)
	for i := 0; i+1 < len(fields); i += 2 {
		enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]}) //nolint:errcheck // a buffer
	}
	return buf.Bytes()
}

// request opens a stream with one HEADERS frame and returns its id;
// endStream says the request has no body.
func (c *h2Conn) request(tb testing.TB, method, path string, endStream bool, hdr ...string) uint32 {
	tb.Helper()
	id := c.next
	c.next += 2
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.encode(method, path, hdr...), EndStream: endStream, EndHeaders: true}); err != nil {
		tb.Fatalf("HEADERS on stream %d: %v", id, err)
	}
	return id
}

// outcome is how a stream ended: a response status, or a reset.
type outcome struct {
	status int
	reset  http2.ErrCode
	isRST  bool
}

func (o outcome) String() string {
	switch {
	case o.isRST:
		return "reset " + o.reset.String()
	case o.status != 0:
		return strconv.Itoa(o.status)
	}
	return "no answer"
}

// outcomes reads frames until every stream of ids has a response status
// or a reset, or the connection ends (within a minute).
func (c *h2Conn) outcomes(tb testing.TB, ids ...uint32) map[uint32]outcome {
	tb.Helper()
	c.conn.SetReadDeadline(time.Now().Add(time.Minute)) //nolint:errcheck // bounded test
	defer c.conn.SetReadDeadline(time.Time{})           //nolint:errcheck // as above
	out := map[uint32]outcome{}
	want := map[uint32]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for len(want) > 0 {
		f, err := c.fr.ReadFrame()
		if err != nil {
			tb.Logf("connection ended with %d of %d streams unanswered: %v", len(want), len(ids), err)
			return out
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if st, err := strconv.Atoi(f.PseudoValue("status")); err == nil && st >= 200 {
				out[f.StreamID] = outcome{status: st}
				delete(want, f.StreamID)
			}
		case *http2.RSTStreamFrame:
			if _, answered := out[f.StreamID]; !answered {
				out[f.StreamID] = outcome{reset: f.ErrCode, isRST: true}
			}
			delete(want, f.StreamID)
		case *http2.PingFrame:
			if !f.IsAck() {
				c.fr.WritePing(true, f.Data) //nolint:errcheck // a lost ack ends the connection, seen above
			}
		case *http2.DataFrame:
			// Small answers; keep the windows open for them anyway.
			if n := f.Length; n > 0 {
				c.fr.WriteWindowUpdate(0, n) //nolint:errcheck // as above
			}
		}
	}
	return out
}

// h2Downloads downloads a link over HTTP/2 (one client, one connection)
// one after another until stopped, checking every body.
type h2Downloads struct {
	stopc chan struct{}
	done  chan struct{}
	n     int
	errs  []string
}

func startH2Downloads(tb testing.TB, rawURL string, obj *Object) *h2Downloads {
	tb.Helper()
	d := &h2Downloads{stopc: make(chan struct{}), done: make(chan struct{})}
	client := h2Client(e2eCA.Pool)
	client.Timeout = 30 * time.Second
	go func() {
		defer close(d.done)
		for {
			resp, err := client.Get(rawURL)
			var body []byte
			if err == nil {
				body, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			switch {
			case err != nil:
				d.errs = append(d.errs, err.Error())
			case resp.ProtoMajor != 2 || resp.StatusCode != 200 || sha256.Sum256(body) != obj.Sum:
				d.errs = append(d.errs, fmt.Sprintf("%s %d with %d bytes", resp.Proto, resp.StatusCode, len(body)))
			default:
				d.n++
			}
			select {
			case <-d.stopc:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	tb.Cleanup(func() { d.stop() })
	return d
}

// stop ends the downloads (once) and returns how many completed and the
// failures.
// checkBeside stops the downloads and fails the test unless some ran and
// none failed beside what (the attack of the test).
func (d *h2Downloads) checkBeside(tb testing.TB, what string) {
	tb.Helper()
	n, failed := d.stop()
	tb.Logf("HTTP/2 downloads on another connection beside %s: %d, %d failed", what, n, len(failed))
	if len(failed) > 0 {
		tb.Errorf("%d downloads failed beside %s, first: %s", len(failed), what, failed[0])
	}
	if n == 0 {
		tb.Errorf("no download completed beside %s", what)
	}
}

func (d *h2Downloads) stop() (int, []string) {
	select {
	case <-d.stopc:
	default:
		close(d.stopc)
	}
	<-d.done
	return d.n, d.errs
}
