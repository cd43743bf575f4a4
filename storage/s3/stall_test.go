package s3_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/storage/s3"
)

// stalledServer answers like a stopped S3 server whose connections stay
// open: HEAD and GET requests are accepted and then nothing comes, or, for
// GET, the headers and a first slice of the body and then nothing. It
// returns when the client gives up (the connection closes) or the test
// ends.
func stalledServer(t *testing.T, sendHeaders bool) *httptest.Server {
	t.Helper()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if sendHeaders && r.Method == http.MethodGet {
			w.Header().Set("Content-Length", "10")
			w.Header().Set("Content-Range", "bytes 0-9/10")
			w.Header().Set("ETag", `"etag1"`)
			w.WriteHeader(http.StatusPartialContent)
			w.Write([]byte("01")) //nolint:errcheck // the client may be gone
			w.(http.Flusher).Flush()
		}
		select {
		case <-r.Context().Done():
		case <-done:
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv
}

// mustStalledStore is a Store made by s3.New (the SDK's own HTTP client, as
// the gateway uses it) on srv, with a short stall timeout.
func mustStalledStore(t *testing.T, srv *httptest.Server, stall time.Duration) *s3.Store {
	t.Helper()
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "AKFAKE", "AWS_SECRET_ACCESS_KEY": "fake",
		"AWS_CONFIG_FILE": os.DevNull, "AWS_SHARED_CREDENTIALS_FILE": os.DevNull,
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_MAX_ATTEMPTS": "1",
	} {
		t.Setenv(k, v)
	}
	st, err := s3.New(t.Context(), s3.Options{Bucket: "bucket", Endpoint: srv.URL, PathStyle: true, StallTimeout: stall})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestAServerThatAnswersNothingTimesOut(t *testing.T) {
	const stall = 300 * time.Millisecond
	st := mustStalledStore(t, stalledServer(t, false), stall)
	start := time.Now()
	_, err := st.Stat(t.Context(), storage.Ref{Key: "k"})
	took := time.Since(start)
	if !errors.Is(err, storage.ErrTimeout) {
		t.Errorf("Stat on a silent server = %v, want ErrTimeout", err)
	}
	if took > 10*stall {
		t.Errorf("Stat on a silent server took %v, want about the stall timeout %v", took, stall)
	}
}

func TestABodyThatStopsArrivingTimesOut(t *testing.T) {
	const stall = 300 * time.Millisecond
	st := mustStalledStore(t, stalledServer(t, true), stall)
	rc, err := st.Open(t.Context(), pinned, 0, pinned.Size)
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	defer rc.Close()
	start := time.Now()
	b, err := io.ReadAll(rc)
	took := time.Since(start)
	if string(b) != "01" || !errors.Is(err, storage.ErrTimeout) {
		t.Errorf("reading a body that stops after 2 bytes = %q, %v; want \"01\", ErrTimeout", b, err)
	}
	if took > 10*stall {
		t.Errorf("the stalled read returned after %v, want about the stall timeout %v", took, stall)
	}
	t.Logf("stall timeout %v: the read gave up after %v", stall, took.Round(time.Millisecond))
}
