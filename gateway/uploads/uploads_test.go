package uploads_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlgate/dlgate/gateway/uploads"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/storage"
)

// size is an upload of two and a half S3 parts of the tests' 5 MiB.
const size = 12<<20 + 12345

func randomBytes(seed byte, n int) []byte {
	var key [32]byte
	key[0] = seed
	b := make([]byte, n)
	rand.NewChaCha8(key).Read(b) //nolint:errcheck // never fails
	return b
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// wantStored fails unless o, what GET answered, is a version of data
// under key in p's store, recorded by the Record callback as it is.
func (e *env) wantStored(t *testing.T, p *process, o object, key string, data []byte, contentType string) {
	t.Helper()
	if o.Key != key || o.Size != int64(len(data)) || o.SHA256 == nil || *o.SHA256 != sha256Hex(data) || o.VersionID == "" ||
		o.ETag == "" || o.ContentType != contentType || o.Bucket == "" {
		t.Fatalf("GET = %+v, want %s, %d bytes of SHA-256 %s, type %s", o, key, len(data), sha256Hex(data), contentType)
	}
	v, err := p.store.Stat(t.Context(), storage.Ref{Bucket: o.Bucket, Key: o.Key, VersionID: o.VersionID})
	if err != nil || v.ETag != o.ETag || v.Size != o.Size {
		t.Fatalf("Stat of the uploaded version = %+v, %v, want ETag %s", v, err, o.ETag)
	}
	rc, err := p.store.Open(t.Context(), v, 0, v.Size)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the stored object holds other bytes (SHA-256 %s, %v), want %s", sha256Hex(got), err, sha256Hex(data))
	}
	recorded := false
	for _, r := range e.versions() {
		recorded = recorded || (r.VersionID == o.VersionID && r.SHA256 == *o.SHA256 && r.Key == key)
	}
	if !recorded {
		t.Errorf("Record was not called with version %s and its SHA-256 (got %+v)", o.VersionID, e.versions())
	}
	so, err := p.db.ObjectGet(t.Context(), o.Bucket, o.Key, o.VersionID)
	if err != nil || so.SHA256 != *o.SHA256 || so.ETag != o.ETag {
		t.Errorf("ObjectGet = %+v, %v, want the version recorded with its SHA-256", so, err)
	}
}

func TestAWholeUploadIsStoredAsPutStoresIt(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		p := e.start(t)
		data := randomBytes(1, size)
		url := create(t, p, size, meta("key", "incoming/whole.bin", "filename", "Whole Report.bin", "content_type", "application/x-test"))
		resp := patch(t, url, 0, bytes.NewReader(data))
		if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Upload-Offset") != strconv.Itoa(size) {
			t.Fatalf("PATCH = %d (offset %s) %s, want 204 at %d", resp.StatusCode, resp.Header.Get("Upload-Offset"), readBody(t, resp), size)
		}
		e.wantStored(t, p, mustObject(t, url), "incoming/whole.bin", data, "application/x-test")
		if got := offsetOf(t, url); got != size {
			t.Errorf("HEAD of a finished upload: offset %d, want %d", got, size)
		}
		head := do(t, http.MethodHead, url, nil)
		if m := head.Header.Get("Upload-Metadata"); !strings.Contains(m, "filename ") || !strings.Contains(m, "key ") {
			t.Errorf("HEAD Upload-Metadata = %q, want the key and the filename", m)
		}
		e.wantNoLeftovers(t, "after the upload")

		// creation-with-upload: the body comes with the POST.
		small := []byte("one request is enough\n")
		resp = do(t, http.MethodPost, p.url, bytes.NewReader(small), "Upload-Length", strconv.Itoa(len(small)),
			"Upload-Metadata", meta("key", "small.txt", "content_type", "text/plain"), "Content-Type", "application/offset+octet-stream")
		if resp.StatusCode != http.StatusCreated || resp.Header.Get("Upload-Offset") != strconv.Itoa(len(small)) {
			t.Fatalf("POST with the body = %d (offset %s), want 201 at %d", resp.StatusCode, resp.Header.Get("Upload-Offset"), len(small))
		}
		e.wantStored(t, p, mustObject(t, resp.Header.Get("Location")), "small.txt", small, "text/plain")

		// An empty file is finished by its creation.
		url = create(t, p, 0, meta("key", "empty"))
		e.wantStored(t, p, mustObject(t, url), "empty", nil, uploads.DefaultContentType)
	})
}

// failingBody yields data[:n] and then fails, as a connection that drops.
type failingBody struct {
	r *bytes.Reader
}

func cutAfter(data []byte, n int) io.Reader {
	return &failingBody{r: bytes.NewReader(data[:n])}
}

func (b *failingBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, errors.New("connection dropped")
	}
	return n, err
}

// patchCut sends data from offset through a body that fails after cut
// bytes: the request fails on the client's side.
func patchCut(t *testing.T, url string, offset int64, data []byte, cut int) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPatch, url, cutAfter(data, cut))
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(data))
	req.Header.Set("Tus-Resumable", "1.0.0")
	req.Header.Set("Upload-Offset", strconv.FormatInt(offset, 10))
	req.Header.Set("Content-Type", "application/offset+octet-stream")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("PATCH whose body broke off = %d, want the request to fail", resp.StatusCode)
	}
}

func TestAnUploadCutHalfWayResumesFromTheServersOffset(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		p := e.start(t)
		data := randomBytes(2, size)
		url := create(t, p, size, meta("key", "resumed.bin"))
		patchCut(t, url, 0, data, size/2)
		offset := offsetOf(t, url)
		if offset <= 0 || offset > size/2 {
			t.Fatalf("HEAD after a cut at %d: offset %d, want what arrived, in (0, %d]", size/2, offset, size/2)
		}
		t.Logf("cut at %d, resumed at %d", size/2, offset)
		resp := patch(t, url, offset, bytes.NewReader(data[offset:]))
		if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Upload-Offset") != strconv.Itoa(size) {
			t.Fatalf("PATCH from %d = %d (offset %s) %s", offset, resp.StatusCode, resp.Header.Get("Upload-Offset"), readBody(t, resp))
		}
		e.wantStored(t, p, mustObject(t, url), "resumed.bin", data, uploads.DefaultContentType)
		e.wantNoLeftovers(t, "after the upload")
	})
}

func TestAnUploadResumesOnAnotherProcess(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		a, b := e.start(t), e.start(t)
		data := randomBytes(3, size)
		url := create(t, a, size, meta("key", "moved.bin"))
		patchCut(t, url, 0, data, size/2)
		// The balancer sends the rest to the other process, which has
		// never seen this upload: its own store value, ledger pool and
		// handler.
		onB := strings.Replace(url, a.srv.URL, b.srv.URL, 1)
		offset := offsetOf(t, onB)
		if offset <= 0 {
			t.Fatalf("HEAD on the other process: offset %d, want what the first received", offset)
		}
		third := offset + (size-offset)/3
		if resp := patch(t, onB, offset, bytes.NewReader(data[offset:third])); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("PATCH on the other process = %d %s", resp.StatusCode, readBody(t, resp))
		}
		// And the last third back to the first.
		if resp := patch(t, url, third, bytes.NewReader(data[third:])); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("PATCH back on the first process = %d %s", resp.StatusCode, readBody(t, resp))
		}
		e.wantStored(t, b, mustObject(t, onB), "moved.bin", data, uploads.DefaultContentType)
		e.wantNoLeftovers(t, "after the upload")
	})
}

// gatedBody yields its first free bytes at once (the request's headers
// leave the client only with some body) and the rest once the gate opens.
type gatedBody struct {
	data *bytes.Reader
	free int
	gate chan struct{}
}

func (g *gatedBody) Read(p []byte) (int, error) {
	if g.free > 0 {
		n, err := g.data.Read(p[:min(len(p), g.free)])
		g.free -= n
		return n, err
	}
	<-g.gate
	return g.data.Read(p)
}

func TestOfTwoConcurrentPatchesOnlyOneWrites(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		a, b := e.start(t), e.start(t)
		data := randomBytes(4, size)
		url := create(t, a, size, meta("key", "contended.bin"))
		onB := strings.Replace(url, a.srv.URL, b.srv.URL, 1)

		// The first PATCH holds the lock while its body waits at the
		// gate; the second, on the other process, finds it held.
		first := &gatedBody{data: bytes.NewReader(data), free: 64 << 10, gate: make(chan struct{})}
		done := make(chan *http.Response, 1)
		go func() {
			req, _ := http.NewRequest(http.MethodPatch, url, first)
			req.ContentLength = size
			req.Header.Set("Tus-Resumable", "1.0.0")
			req.Header.Set("Upload-Offset", "0")
			req.Header.Set("Content-Type", "application/offset+octet-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("first PATCH: %v", err)
			}
			done <- resp
		}()
		waitLocked(t, onB)
		second := patch(t, onB, 0, bytes.NewReader(data))
		wantProblem(t, "the second PATCH while the first holds the lock", second, http.StatusLocked, "upload-locked")
		close(first.gate)
		resp := <-done
		if resp == nil {
			t.FailNow()
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Upload-Offset") != strconv.Itoa(size) {
			t.Fatalf("first PATCH = %d (offset %s), want 204 at %d", resp.StatusCode, resp.Header.Get("Upload-Offset"), size)
		}
		// A PATCH from where the upload no longer is: 409.
		late := patch(t, onB, 0, bytes.NewReader(data))
		wantProblem(t, "a PATCH from a stale offset", late, http.StatusConflict, "upload-offset-mismatch")
		e.wantStored(t, a, mustObject(t, url), "contended.bin", data, uploads.DefaultContentType)
	})
}

// waitLocked waits until a HEAD of url is refused 423: another request
// holds the upload's lock. It polls, a bounded number of times.
func waitLocked(t *testing.T, url string) {
	t.Helper()
	for range 200 {
		resp := do(t, http.MethodHead, url, nil)
		resp.Body.Close()
		if resp.StatusCode == http.StatusLocked {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the upload's lock was never held by the first PATCH")
}

func TestATerminatedUploadLeavesNothingBehind(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		p := e.start(t)
		data := randomBytes(5, size)
		url := create(t, p, size, meta("key", "terminated.bin"))
		if resp := patch(t, url, 0, bytes.NewReader(data[:size/2+7])); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("PATCH = %d", resp.StatusCode)
		}
		if len(e.leftovers(t)) == 0 {
			t.Fatal("an unfinished upload leaves nothing in the store: the check below could not fail")
		}
		if resp := do(t, http.MethodDelete, url, nil); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("DELETE = %d %s, want 204", resp.StatusCode, readBody(t, resp))
		}
		e.wantNoLeftovers(t, "after DELETE")
		wantProblem(t, "HEAD after DELETE", do(t, http.MethodHead, url, nil), http.StatusNotFound, "upload-not-found")
		wantProblem(t, "PATCH after DELETE", patch(t, url, size/2+7, bytes.NewReader(data[size/2+7:])), http.StatusNotFound, "upload-not-found")
		if _, err := p.store.Stat(t.Context(), storage.Ref{Key: "terminated.bin"}); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Stat after DELETE = %v, want ErrNotFound", err)
		}
	})
}

func TestAnExpiredUploadIsGoneAndItsBytesRemoved(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		p := e.start(t, func(c *uploads.Config) { c.Expiry = time.Hour })
		data := randomBytes(6, size)
		url := create(t, p, size, meta("key", "abandoned.bin"))
		if resp := patch(t, url, 0, bytes.NewReader(data[:size/2+3])); resp.StatusCode != http.StatusNoContent {
			t.Fatalf("PATCH = %d", resp.StatusCode)
		} else if exp, err := http.ParseTime(resp.Header.Get("Upload-Expires")); err != nil || exp.Before(e.clock.Now().Add(time.Hour-time.Second)) {
			t.Errorf("PATCH Upload-Expires = %q (%v), want an hour from the PATCH", resp.Header.Get("Upload-Expires"), err)
		}
		kept := create(t, p, 3, meta("key", "kept.bin"))
		if res, err := p.handler.Sweep(t.Context()); err != nil || res.Expired != 0 {
			t.Fatalf("Sweep before the expiry = %+v, %v, want nothing removed", res, err)
		}
		if len(e.leftovers(t)) == 0 {
			t.Fatal("an unfinished upload leaves nothing in the store: the check below could not fail")
		}
		e.clock.Add(time.Hour)
		wantProblem(t, "HEAD of an expired upload", do(t, http.MethodHead, url, nil), http.StatusGone, "")
		wantProblem(t, "PATCH of an expired upload", patch(t, url, size/2+3, bytes.NewReader(data[size/2+3:])), http.StatusGone, "upload-expired")
		res, err := p.handler.Sweep(t.Context())
		if err != nil || res.Expired != 2 {
			t.Fatalf("Sweep after the expiry = %+v, %v, want both uploads removed", res, err)
		}
		e.wantNoLeftovers(t, "after the sweep")
		wantProblem(t, "HEAD of a swept upload", do(t, http.MethodHead, kept, nil), http.StatusNotFound, "")
		if res, err := p.handler.Sweep(t.Context()); err != nil || res.Expired != 0 {
			t.Errorf("a second Sweep = %+v, %v, want nothing left to remove", res, err)
		}
	})
}

func TestAFinishedUploadIsForgottenAfterItsExpiry(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		p := e.start(t, func(c *uploads.Config) { c.Expiry = time.Hour })
		url := create(t, p, 0, meta("key", "done"))
		o := mustObject(t, url)
		e.clock.Add(time.Hour)
		if res, err := p.handler.Sweep(t.Context()); err != nil || res.Purged != 1 || res.Expired != 0 {
			t.Fatalf("Sweep = %+v, %v, want the finished upload purged", res, err)
		}
		wantProblem(t, "GET of a forgotten upload", do(t, http.MethodGet, url, nil), http.StatusNotFound, "upload-not-found")
		if _, err := p.store.Stat(t.Context(), storage.Ref{Bucket: o.Bucket, Key: o.Key, VersionID: o.VersionID}); err != nil {
			t.Errorf("the object the upload became is gone with it: %v", err)
		}
	})
}

func TestBadRequestsAreRefusedAsTusSays(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		p := e.start(t, func(c *uploads.Config) { c.MaxSize = 1 << 20 })
		for _, c := range []struct {
			name   string
			header []string
			status int
			typ    string
		}{
			{"NoKey", []string{"Upload-Metadata", meta("filename", "a.bin")}, 400, "invalid-upload-metadata"},
			{"NoMetadata", nil, 400, "invalid-upload-metadata"},
			{"KeyWithDotDot", []string{"Upload-Metadata", meta("key", "a/../b")}, 400, "invalid-key"},
			{"AbsoluteKey", []string{"Upload-Metadata", meta("key", "/etc/passwd")}, 400, "invalid-key"},
			{"KeyWithEmptySegment", []string{"Upload-Metadata", meta("key", "a//b")}, 400, "invalid-key"},
			{"ValueNotBase64", []string{"Upload-Metadata", "key not*base64"}, 400, "invalid-upload-metadata"},
			{"KeyTwice", []string{"Upload-Metadata", meta("key", "a", "key", "b")}, 400, "invalid-upload-metadata"},
			{"BadContentType", []string{"Upload-Metadata", meta("key", "a", "content_type", "not a type")}, 400, "invalid-upload-metadata"},
			{"FilenameWithNewline", []string{"Upload-Metadata", meta("key", "a", "filename", "a\nb")}, 400, "invalid-upload-metadata"},
			{"NoLength", []string{"Upload-Metadata", meta("key", "a"), "Upload-Length", ""}, 400, "invalid-upload-length"},
			{"TooLarge", []string{"Upload-Metadata", meta("key", "a"), "Upload-Length", strconv.Itoa(1<<20 + 1)}, 413, "upload-too-large"},
			{"DeferredLength", []string{"Upload-Metadata", meta("key", "a"), "Upload-Length", "", "Upload-Defer-Length", "1"}, 501, "tus-extension-unsupported"},
			{"NoTusVersion", []string{"Upload-Metadata", meta("key", "a"), "Tus-Resumable", ""}, 412, "tus-version-unsupported"},
		} {
			header := append([]string{"Upload-Length", "10"}, c.header...)
			wantProblem(t, "POST "+c.name, do(t, http.MethodPost, p.url, nil, header...), c.status, c.typ)
		}
		e.wantNoLeftovers(t, "after the refused creations")

		url := create(t, p, 10, meta("key", "ten.bin"))
		for _, c := range []struct {
			name   string
			resp   *http.Response
			status int
			typ    string
		}{
			{"PatchWrongOffset", patch(t, url, 3, bytes.NewReader([]byte("abc"))), 409, "upload-offset-mismatch"},
			{"PatchTooLong", patch(t, url, 0, bytes.NewReader(make([]byte, 11))), 413, "upload-too-large"},
			{"PatchWrongType", do(t, http.MethodPatch, url, bytes.NewReader([]byte("a")), "Upload-Offset", "0", "Content-Type", "text/plain"), 400, "invalid-content-type"},
			{"GetUnfinished", do(t, http.MethodGet, url, nil), 409, "upload-incomplete"},
			{"UnknownUpload", do(t, http.MethodHead, p.url+"01a2b3c4-0000-7000-8000-000000000000", nil), 404, ""},
			{"NotAnID", patch(t, p.url+"x%2Fy", 0, bytes.NewReader([]byte("a"))), 404, "upload-not-found"},
			{"GetNotAnID", do(t, http.MethodGet, p.url+"nope", nil), 404, "upload-not-found"},
			{"PutOnTheEndpoint", do(t, http.MethodPut, p.url, nil), 405, "method-not-allowed"},
		} {
			wantProblem(t, c.name, c.resp, c.status, c.typ)
		}
		if got := offsetOf(t, url); got != 0 {
			t.Errorf("after the refused PATCHes offset = %d, want 0", got)
		}
		opts := do(t, http.MethodOptions, p.url, nil)
		if ext := opts.Header.Get("Tus-Extension"); !strings.Contains(ext, "creation") || !strings.Contains(ext, "termination") ||
			!strings.Contains(ext, "expiration") || opts.Header.Get("Tus-Version") != "1.0.0" || opts.Header.Get("Tus-Max-Size") != strconv.Itoa(1<<20) {
			t.Errorf("OPTIONS = %d, Tus-Extension %q, Tus-Version %q, Tus-Max-Size %q", opts.StatusCode, ext,
				opts.Header.Get("Tus-Version"), opts.Header.Get("Tus-Max-Size"))
		}
	})
}

// failingFinish is the store with an UploadFinish that fails while fail
// is set: a store that is down at the moment the last byte arrives.
type failingFinish struct {
	storage.Store
	storage.Uploader
	mu   sync.Mutex
	fail bool
}

func (f *failingFinish) UploadFinish(ctx context.Context, u storage.Upload) (storage.Version, error) {
	f.mu.Lock()
	fail := f.fail
	f.mu.Unlock()
	if fail {
		return storage.Version{}, storage.ErrUnavailable
	}
	return f.Uploader.UploadFinish(ctx, u)
}

func TestAFinishThatFailedIsDoneByTheNextGet(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		var store *failingFinish
		p := e.start(t, func(c *uploads.Config) {
			store = &failingFinish{Store: c.Store, Uploader: c.Store.(storage.Uploader), fail: true}
			c.Store = store
		})
		data := randomBytes(7, 1<<20)
		url := create(t, p, int64(len(data)), meta("key", "late.bin"))
		wantProblem(t, "PATCH while the store fails", patch(t, url, 0, bytes.NewReader(data)), http.StatusBadGateway, "storage-unavailable")
		if got := offsetOf(t, url); got != int64(len(data)) {
			t.Fatalf("HEAD after the failed finish: offset %d, want every byte kept (%d)", got, len(data))
		}
		wantProblem(t, "GET while the store still fails", do(t, http.MethodGet, url, nil), http.StatusBadGateway, "storage-unavailable")
		store.mu.Lock()
		store.fail = false
		store.mu.Unlock()
		e.wantStored(t, p, mustObject(t, url), "late.bin", data, uploads.DefaultContentType)
	})
}

func TestAVersionThatCannotBeRecordedIsDeletedAgain(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		p := e.start(t, func(c *uploads.Config) {
			c.Record = func(context.Context, storage.Version) error { return ledger.ErrUnavailable }
		})
		data := randomBytes(8, 1<<20)
		url := create(t, p, int64(len(data)), meta("key", "unrecorded.bin"))
		wantProblem(t, "PATCH whose version cannot be recorded", patch(t, url, 0, bytes.NewReader(data)), http.StatusServiceUnavailable, "database-unavailable")
		if _, err := p.store.Stat(t.Context(), storage.Ref{Key: "unrecorded.bin"}); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Stat of the unrecorded version = %v, want ErrNotFound: it is deleted, as PUT /v1/objects deletes one", err)
		}
	})
}

func TestNewRefusesAStoreWithoutResumableUploads(t *testing.T) {
	type plain struct{ storage.Store }
	_, err := uploads.New(uploads.Config{Store: plain{}, Ledger: nil, BasePath: "/v1/uploads/"})
	if err == nil {
		t.Error("New with a store that is no storage.Uploader = nil error")
	}
}
