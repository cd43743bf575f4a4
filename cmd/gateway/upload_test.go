package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/gorilla/mux"

	"github.com/dlgate/dlgate/client"
	"github.com/dlgate/dlgate/config"
	"github.com/dlgate/dlgate/gateway/uploads"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlite"
	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/storage/fs"
)

// tusGateway is an admin API whose /v1/uploads/ is the real uploads
// handler (SQLite ledger, fs store) and whose link creation is the fake's.
type tusGateway struct {
	url  string
	h    *uploads.Handler
	fake *fakeAdmin
	// onPatch sees every byte of PATCH bodies as the handler reads them.
	onPatch atomic.Pointer[func(n int)]

	mu      sync.Mutex
	patches []string // Upload-Offset of each PATCH
}

func MustTusGateway(t *testing.T) *tusGateway {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.db")
	db, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := sqlite.Migrate(t.Context(), db.SQL(), path); err != nil {
		t.Fatal(err)
	}
	st, err := fs.New(filepath.Join(dir, "objects"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := uploads.New(uploads.Config{Store: st, Ledger: db, BasePath: "/v1/uploads/",
		Expiry: config.DefaultUploadExpiry, MaxSize: config.DefaultUploadMaxSize, LockLease: config.DefaultUploadLockLease,
		LockWait: config.DefaultUploadLockWait, Checkpoint: config.DefaultUploadCheckpoint,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Record: func(ctx context.Context, v storage.Version) error {
			return db.ObjectRecord(ctx, ledger.Object{Bucket: v.Bucket, Key: v.Key, VersionID: v.VersionID, Size: v.Size,
				ETag: v.ETag, ContentType: v.ContentType, SHA256: v.SHA256})
		}})
	if err != nil {
		t.Fatal(err)
	}
	g := &tusGateway{h: h, fake: MustFakeAdmin(t)}
	fakeURL := g.fake.URL
	// The tus handler routed as the admin listener routes it: the
	// collection and {id}, matched on the escaped path.
	tus := mux.NewRouter().UseEncodedPath()
	tus.Handle("/v1/uploads/", h)
	tus.Handle("/v1/uploads/{id}", h)
	routes := http.NewServeMux()
	routes.Handle("/v1/uploads/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+testToken {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPatch {
			g.mu.Lock()
			g.patches = append(g.patches, r.Header.Get("Upload-Offset"))
			g.mu.Unlock()
			r.Body = &watched{ReadCloser: r.Body, g: g}
		}
		tus.ServeHTTP(w, r)
	}))
	routes.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Links go to the fake, which records them.
		req, _ := http.NewRequestWithContext(r.Context(), r.Method, fakeURL+r.URL.RequestURI(), r.Body)
		req.Header = r.Header.Clone()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		io.Copy(w, resp.Body)
	}))
	srv := httptest.NewServer(routes)
	t.Cleanup(srv.Close)
	g.url = srv.URL
	return g
}

type watched struct {
	io.ReadCloser
	g *tusGateway
}

func (w *watched) Read(p []byte) (int, error) {
	n, err := w.ReadCloser.Read(p)
	if f := w.g.onPatch.Load(); f != nil && n > 0 {
		(*f)(n)
	}
	return n, err
}

func (g *tusGateway) patchOffsets() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.patches...)
}

// runCLI runs the gateway command in-process under ctx.
func runCLI(ctx context.Context, env map[string]string, args ...string) result {
	var stdout, stderr bytes.Buffer
	m := &Main{Stdout: &stdout, Stderr: &stderr, Env: func(k string) string { return env[k] }}
	err := m.Run(ctx, args)
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err}
}

// stateFiles lists the upload state files under the cache directory.
func stateFiles(t *testing.T, cache string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(cache, "dlgate", "uploads", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	return names
}

func TestLinksCreateResumesAnInterruptedUpload(t *testing.T) {
	g := MustTusGateway(t)
	cache := t.TempDir()
	env := map[string]string{"GATEWAY_ADMIN_URL": g.url, "GATEWAY_ADMIN_TOKEN": testToken, "XDG_CACHE_HOME": cache}
	const size = 24<<20 + 321
	data := make([]byte, size)
	rand.NewChaCha8([32]byte{9}).Read(data) //nolint:errcheck // never fails
	file := filepath.Join(t.TempDir(), "big.iso")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"links", "create", file, "--downloads", "1", "--expires-in", "1h"}

	// Ctrl-C once half the file reached the gateway.
	ctx, cancel := context.WithCancel(t.Context())
	var seen atomic.Int64
	stop := func(n int) {
		if seen.Add(int64(n)) >= size/2 {
			cancel()
		}
	}
	g.onPatch.Store(&stop)
	first := runCLI(ctx, env, args...)
	g.onPatch.Store(nil)
	if first.err == nil || !strings.Contains(first.err.Error(), "run the same command again to resume") {
		t.Fatalf("links create interrupted half-way = %v, want an error saying how to resume", first.err)
	}
	states := stateFiles(t, cache)
	if len(states) != 1 {
		t.Fatalf("state files after the interruption: %q, want one", states)
	}
	if fi, err := os.Stat(states[0]); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("state file %s: %v, mode %v; want 0600", states[0], err, fi.Mode().Perm())
	}
	var doc struct{ URL string }
	b, _ := os.ReadFile(states[0])
	if err := json.Unmarshal(b, &doc); err != nil || doc.URL == "" {
		t.Fatalf("state file %s = %s, want the upload's URL", states[0], b)
	}
	cl := client.NewUploads(client.New(g.url, testToken, nil))
	offset, length, err := cl.UploadOffset(t.Context(), doc.URL)
	if err != nil || length != size || offset <= 0 || offset >= size {
		t.Fatalf("the gateway's offset after the interruption = %d of %d (%v), want part of %d", offset, length, err, size)
	}

	second := runCLI(t.Context(), env, args...)
	if second.err != nil {
		t.Fatalf("links create run again = %v\nstderr: %s", second.err, second.stderr)
	}
	if want := fmt.Sprintf("resuming the upload of %s at byte %d of %d\n", file, offset, size); !strings.Contains(second.stderr, want) {
		t.Errorf("stderr = %q, want it to say %q", second.stderr, want)
	}
	if got := g.patchOffsets(); got[len(got)-1] != fmt.Sprint(offset) {
		t.Errorf("PATCH offsets %v: the run again did not start at the gateway's %d", got, offset)
	}
	obj, err := cl.UploadObject(t.Context(), doc.URL)
	sum := sha256.Sum256(data)
	if err != nil || obj.SHA256 != hex.EncodeToString(sum[:]) || obj.Size != size || obj.Key != "big.iso" {
		t.Fatalf("the uploaded object = %+v, %v; want big.iso of %d bytes and SHA-256 %x", obj, err, size, sum)
	}
	if !strings.Contains(second.stderr, "sha256 "+obj.SHA256) || second.stdout != testURL+"/hello.txt\n" {
		t.Errorf("stdout %q, stderr %q: want the link and the upload's sha256", second.stdout, second.stderr)
	}
	var pinned bool
	for _, s := range g.fake.requests() {
		pinned = pinned || (s.URI == "/v1/links" && strings.Contains(s.Body, `"version_id":"`+obj.VersionID+`"`))
	}
	if !pinned {
		t.Errorf("no link pins the uploaded version %s: %+v", obj.VersionID, g.fake.requests())
	}
	if left := stateFiles(t, cache); len(left) != 0 {
		t.Errorf("state files after the upload: %q, want none", left)
	}
}

// cutProxy forwards connections to target, and cuts the first one after
// limit bytes from the client: a connection that drops mid-upload.
func cutProxy(t *testing.T, target string, limit int64) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var first atomic.Bool
	first.Store(true)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go io.Copy(c, up) //nolint:errcheck // ends with either side
				if first.CompareAndSwap(true, false) {
					io.CopyN(up, c, limit) //nolint:errcheck // then the cut
					return
				}
				io.Copy(up, c) //nolint:errcheck // ends with either side
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

func TestLinksCreateResumesWhenTheConnectionDrops(t *testing.T) {
	g := MustTusGateway(t)
	const size = 8<<20 + 5
	data := bytes.Repeat([]byte("dropped connections resume\n"), size/27+1)[:size]
	file := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	proxy := cutProxy(t, strings.TrimPrefix(g.url, "http://"), size/2)
	env := map[string]string{"GATEWAY_ADMIN_URL": proxy, "GATEWAY_ADMIN_TOKEN": testToken, "XDG_CACHE_HOME": t.TempDir()}
	r := runCLI(t.Context(), env, "links", "create", file, "--downloads", "1", "--expires-in", "1h")
	if r.err != nil {
		t.Fatalf("links create through a connection that drops = %v\nstderr: %s", r.err, r.stderr)
	}
	if !strings.Contains(r.stderr, "upload of notes.txt interrupted") {
		t.Errorf("stderr = %q, want the interruption and the resumption noted", r.stderr)
	}
	offsets := g.patchOffsets()
	if len(offsets) < 2 || offsets[0] != "0" || offsets[len(offsets)-1] == "0" {
		t.Errorf("PATCH offsets %v, want one from 0 and a resumption from the gateway's offset", offsets)
	}
	sum := sha256.Sum256(data)
	if !strings.Contains(r.stderr, "sha256 "+hex.EncodeToString(sum[:])) {
		t.Errorf("stderr = %q, want the file's sha256 %x", r.stderr, sum)
	}
}
