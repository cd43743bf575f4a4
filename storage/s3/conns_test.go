package s3_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/storage/s3"
	"github.com/dlgate/dlgate/storage/storagetest"
)

// splicer is what Open's reader offers on a Store made by New with a
// plain-HTTP endpoint (the gateway's connSource).
type splicer interface {
	WriteNTo(w io.Writer, n int64) (int64, error)
	SetReadDeadline(t time.Time) error
}

// TestStoreConformanceThroughNew runs the conformance suite on a Store
// made by New, as the gateway makes it: reads go out on the store's own
// connections.
func TestStoreConformanceThroughNew(t *testing.T) {
	eachServer(t, func(t *testing.T, env *testenv.S3) {
		setAWSEnv(t, env.AccessKey, env.SecretKey)
		storagetest.Exercise(t, func(t *testing.T) (storage.Store, string) {
			bucket := env.NewBucket(t, true)
			st, err := s3.New(context.Background(), s3.Options{Bucket: bucket, Endpoint: env.Endpoint, PathStyle: true})
			if err != nil {
				t.Fatal(err)
			}
			return st, bucket
		})
	})
}

func setAWSEnv(t *testing.T, access, secret string) {
	t.Helper()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": access, "AWS_SECRET_ACCESS_KEY": secret,
		"AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_MAX_ATTEMPTS": "1",
	} {
		t.Setenv(k, v)
	}
}

// objectServer serves data as every object, with Range and If-Match, like
// an S3 server, and counts the connections it accepted. pause, when not
// nil, is called in the middle of each body.
type objectServer struct {
	*httptest.Server
	data  []byte
	conns atomic.Int64
	pause func()
}

func startObjectServer(t *testing.T, data []byte) *objectServer {
	t.Helper()
	s := &objectServer{data: data}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.conns.Add(1)
		}
	}
	s.Start()
	t.Cleanup(s.Close)
	return s
}

func (s *objectServer) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("ETag", pinned.ETag)
	if s.pause == nil {
		http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(s.data))
		return
	}
	pause := func() {
		w.(http.Flusher).Flush() // the first half reaches the client first
		s.pause()
	}
	http.ServeContent(w, r, "", time.Time{}, &pausingReader{data: s.data, at: len(s.data) / 2, pause: pause})
}

// pausingReader is a bytes.Reader that calls pause once when a read
// reaches offset at.
type pausingReader struct {
	data   []byte
	off    int64
	at     int
	pause  func()
	paused bool
}

func (r *pausingReader) Read(p []byte) (int, error) {
	if r.off >= int64(len(r.data)) {
		return 0, io.EOF
	}
	if !r.paused && r.off >= int64(r.at) {
		r.paused = true
		r.pause()
	}
	end := int64(len(r.data))
	if !r.paused {
		end = min(end, int64(r.at))
	}
	n := copy(p, r.data[r.off:end])
	r.off += int64(n)
	return n, nil
}

func (r *pausingReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
		r.off = offset
	case io.SeekEnd:
		r.off = int64(len(r.data)) + offset
	default:
		r.off += offset
	}
	return r.off, nil
}

// versionOf is a pinned version of data on an objectServer.
func versionOf(data []byte) storage.Version {
	v := pinned
	v.Size = int64(len(data))
	return v
}

// splice serves rc through a real net/http response with WriteNTo, in
// slices of slice bytes, and returns what a client received.
func splice(t *testing.T, rc io.Reader, n, slice int64) []byte {
	t.Helper()
	sp, ok := rc.(splicer)
	if !ok {
		t.Fatalf("Open's reader is a %T, without WriteNTo", rc)
	}
	errc := make(chan error, 1)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var done int64
		for done < n {
			k, err := sp.WriteNTo(w, min(slice, n-done))
			done += k
			if err != nil {
				errc <- err
				return
			}
		}
		errc <- nil
	}))
	defer front.Close()
	resp, err := http.Get(front.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("WriteNTo: %v", err)
	}
	return got
}

func TestWriteNToMovesExactlyTheRangeAndReusesTheConnection(t *testing.T) {
	data := testBytes(3<<20 + 12345)
	srv := startObjectServer(t, data)
	st := mustStalledStore(t, srv.Server, 10*time.Second)
	v := versionOf(data)
	for _, tc := range []struct{ off, n, slice int64 }{
		{0, v.Size, 1 << 20},
		{5, 1000, 1 << 20},
		{1 << 20, 2<<20 + 17, 300 << 10},
	} {
		rc, err := st.Open(t.Context(), v, tc.off, tc.n)
		if err != nil {
			t.Fatal(err)
		}
		got := splice(t, rc, tc.n, tc.slice)
		if !bytes.Equal(got, data[tc.off:tc.off+tc.n]) {
			t.Errorf("WriteNTo of bytes %d+%d moved %d bytes, not the object's", tc.off, tc.n, len(got))
		}
		if b, err := io.ReadAll(rc); len(b) != 0 || err != nil {
			t.Errorf("after the range, Read = %d bytes, %v; want 0, nil", len(b), err)
		}
		rc.Close()
	}
	if n := srv.conns.Load(); n != 1 {
		t.Errorf("three ranges read to their end used %d connections, want 1 (kept alive)", n)
	}
}

func TestABodyClosedEarlyIsNotReused(t *testing.T) {
	data := testBytes(1 << 20)
	srv := startObjectServer(t, data)
	st := mustStalledStore(t, srv.Server, 10*time.Second)
	v := versionOf(data)
	rc, err := st.Open(t.Context(), v, 0, v.Size)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(rc, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	if b := storagetest.MustRead(t, st, v, 10, 100); !bytes.Equal(b, data[10:110]) {
		t.Errorf("the next read = %d bytes, not the object's", len(b))
	}
	if n := srv.conns.Load(); n != 2 {
		t.Errorf("a body closed early and the next read used %d connections, want 2", n)
	}
}

func TestAConnectionTheServerClosedWhileIdleIsReplaced(t *testing.T) {
	data := testBytes(64 << 10)
	srv := startObjectServer(t, data)
	st := mustStalledStore(t, srv.Server, 10*time.Second)
	v := versionOf(data)
	storagetest.MustRead(t, st, v, 0, v.Size)
	srv.CloseClientConnections()
	time.Sleep(50 * time.Millisecond) // let the close reach the client's socket
	if b := storagetest.MustRead(t, st, v, 1, 10); !bytes.Equal(b, data[1:11]) {
		t.Errorf("read after the server closed the idle connection = %q", b)
	}
}

func TestWriteNToStopsAtTheReadDeadlineAndGoesOn(t *testing.T) {
	data := testBytes(1 << 20)
	srv := startObjectServer(t, data)
	release := make(chan struct{})
	srv.pause = func() { <-release }
	st := mustStalledStore(t, srv.Server, 10*time.Second)
	v := versionOf(data)
	rc, err := st.Open(t.Context(), v, 0, v.Size)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	sp := rc.(splicer)
	var out bytes.Buffer
	w := readerFromBuffer{&out}
	sp.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	k, err := sp.WriteNTo(w, v.Size)
	if !errors.Is(err, os.ErrDeadlineExceeded) || k > v.Size/2 {
		t.Fatalf("WriteNTo across a pause past the deadline = %d, %v; want at most half and a deadline error", k, err)
	}
	close(release)
	sp.SetReadDeadline(time.Now().Add(10 * time.Second))
	k2, err := sp.WriteNTo(w, v.Size-k)
	if err != nil || !bytes.Equal(out.Bytes(), data) {
		t.Errorf("WriteNTo after the deadline moved = %d more bytes, %v; want the rest of the object", k2, err)
	}
}

func TestCancellingTheContextInterruptsWriteNTo(t *testing.T) {
	data := testBytes(1 << 20)
	srv := startObjectServer(t, data)
	release := make(chan struct{})
	defer close(release)
	srv.pause = func() { <-release }
	st := mustStalledStore(t, srv.Server, 10*time.Second)
	v := versionOf(data)
	ctx, cancel := context.WithCancel(t.Context())
	rc, err := st.Open(ctx, v, 0, v.Size)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err = rc.(splicer).WriteNTo(readerFromBuffer{&bytes.Buffer{}}, v.Size)
	if !errors.Is(err, context.Canceled) || time.Since(start) > 5*time.Second {
		t.Errorf("WriteNTo on a cancelled context = %v after %v, want context.Canceled at once", err, time.Since(start))
	}
}

func TestASilentStoreEndsWriteNToAfterItsStallTimeout(t *testing.T) {
	const stall = 300 * time.Millisecond
	rc, err := mustStalledStore(t, stalledServer(t, true), stall).Open(t.Context(), pinned, 0, pinned.Size)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	sp := rc.(splicer)
	start := time.Now()
	var total int64
	for {
		// Short deadlines, extended again and again, as the gateway's
		// idle windows do: the store's own limit still ends it.
		sp.SetReadDeadline(time.Now().Add(stall / 4))
		k, err := sp.WriteNTo(readerFromBuffer{&bytes.Buffer{}}, pinned.Size-total)
		total += k
		if errors.Is(err, os.ErrDeadlineExceeded) && time.Since(start) < 20*stall {
			continue
		}
		if total != 2 || !errors.Is(err, storage.ErrTimeout) {
			t.Errorf("WriteNTo from a store silent after 2 bytes = %d bytes, %v; want 2 and ErrTimeout", total, err)
		}
		break
	}
	if took := time.Since(start); took < stall {
		t.Errorf("gave up after %v, before the stall timeout %v", took, stall)
	}
}

// readerFromBuffer is a bytes.Buffer that also has ReadFrom through its
// own Write, like a response writer without a socket behind it.
type readerFromBuffer struct{ b *bytes.Buffer }

func (w readerFromBuffer) Write(p []byte) (int, error) { return w.b.Write(p) }
func (w readerFromBuffer) ReadFrom(r io.Reader) (int64, error) {
	return io.Copy(struct{ io.Writer }{w.b}, r)
}

func testBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>10)
	}
	return b
}
