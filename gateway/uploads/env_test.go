package uploads_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	iofs "io/fs"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/gorilla/mux"

	"github.com/dlgate/dlgate/config"
	"github.com/dlgate/dlgate/gateway/uploads"
	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/mysql"
	"github.com/dlgate/dlgate/ledger/sqlcore"
	"github.com/dlgate/dlgate/ledger/sqlite"
	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/storage/fs"
	"github.com/dlgate/dlgate/storage/s3"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// backend is one ledger and store pair the tests run against.
type backend struct {
	name string
	// open returns a ledger and a store as one gateway process opens
	// them; every call of one env's open shares the database and the
	// store's data with the others, as separate processes do.
	setup func(t testing.TB) (open func(t testing.TB) (*sqlcore.DB, storage.Store), leftovers func(t testing.TB) []string)
}

var backends = []backend{
	{"SQLiteAndFS", func(t testing.TB) (func(testing.TB) (*sqlcore.DB, storage.Store), func(testing.TB) []string) {
		dbPath, root := filepath.Join(t.TempDir(), "gateway.db"), t.TempDir()
		open := func(t testing.TB) (*sqlcore.DB, storage.Store) {
			db, err := sqlite.Open(context.Background(), dbPath)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			if err := sqlite.Migrate(context.Background(), db.SQL(), dbPath); err != nil {
				t.Fatal(err)
			}
			st, err := fs.New(root)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			return db, st
		}
		return open, func(t testing.TB) []string { return partialFiles(t, root) }
	}},
	{"MariaDBAndS3", func(t testing.TB) (func(testing.TB) (*sqlcore.DB, storage.Store), func(testing.TB) []string) {
		dsn := testenv.SharedMariaDB(t).NewDatabase(t)
		env := testenv.SharedS3(t)
		bucket := env.NewBucket(t, true)
		open := func(t testing.TB) (*sqlcore.DB, storage.Store) {
			db, err := mysql.Open(context.Background(), dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			if err := mysql.Migrate(context.Background(), db.SQL()); err != nil {
				t.Fatal(err)
			}
			return db, s3.NewFromClient(env.Client(), bucket, s3.WithPartSize(s3.MinPartSize))
		}
		return open, func(t testing.TB) []string { return s3Leftovers(t, env.Client(), bucket) }
	}},
}

// forEachBackend runs test on every backend, in parallel.
func forEachBackend(t *testing.T, test func(t *testing.T, e *env)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			open, leftovers := b.setup(t)
			test(t, &env{open: open, leftovers: leftovers, clock: newClock()})
		})
	}
}

// env is one database and store, and the gateway processes of a test.
type env struct {
	open      func(t testing.TB) (*sqlcore.DB, storage.Store)
	leftovers func(t testing.TB) []string
	clock     *clock

	mu       sync.Mutex
	recorded []storage.Version
}

// process is one gateway process: its own ledger pool, store value and
// handler behind an httptest server.
type process struct {
	db      *sqlcore.DB
	store   storage.Store
	handler *uploads.Handler
	srv     *httptest.Server
	url     string // of the uploads endpoint, with its trailing slash
}

// start starts a process; edit changes its Config before New.
func (e *env) start(t testing.TB, edit ...func(*uploads.Config)) *process {
	t.Helper()
	db, st := e.open(t)
	db.Now, db.DBClock = e.clock.Now, e.clock.Now
	// config's limits, as the gateway passes them, but a shorter wait.
	cfg := uploads.Config{Store: st, Ledger: db, BasePath: "/v1/uploads/",
		Expiry: config.DefaultUploadExpiry, MaxSize: config.DefaultUploadMaxSize, LockLease: config.DefaultUploadLockLease,
		LockWait: 2 * time.Second, Checkpoint: config.DefaultUploadCheckpoint,
		Logger: slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})),
		Record: func(ctx context.Context, v storage.Version) error {
			e.mu.Lock()
			e.recorded = append(e.recorded, v)
			e.mu.Unlock()
			return db.ObjectRecord(ctx, ledger.Object{Bucket: v.Bucket, Key: v.Key, VersionID: v.VersionID, Size: v.Size,
				ETag: v.ETag, ContentType: v.ContentType, SHA256: v.SHA256})
		}}
	for _, f := range edit {
		f(&cfg)
	}
	h, err := uploads.New(cfg)
	if err != nil {
		t.Fatalf("uploads.New = %v", err)
	}
	// Routed as the admin listener routes it (gateway/routes.go): the
	// collection and {id}, matched on the escaped path.
	router := mux.NewRouter().UseEncodedPath()
	router.Handle("/v1/uploads/", h)
	router.Handle("/v1/uploads/{id}", h)
	srv := httptest.NewServer(router)
	t.Cleanup(srv.Close)
	return &process{db: db, store: st, handler: h, srv: srv, url: srv.URL + "/v1/uploads/"}
}

func (e *env) versions() []storage.Version {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.recorded)
}

// wantNoLeftovers fails unless the store holds nothing of unfinished
// uploads.
func (e *env) wantNoLeftovers(t testing.TB, when string) {
	t.Helper()
	if left := e.leftovers(t); len(left) > 0 {
		t.Errorf("%s the store still holds %q", when, left)
	}
}

// clock is the database's clock of a test, which the test moves.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: ledger.Micro(time.Now())} }

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

// testWriter sends log lines to the test's log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(b), "\n"))
	return len(b), nil
}

// tus requests.

// meta encodes an Upload-Metadata value of pairs key, value, key, value….
func meta(kv ...string) string {
	var parts []string
	for i := 0; i+1 < len(kv); i += 2 {
		parts = append(parts, kv[i]+" "+base64.StdEncoding.EncodeToString([]byte(kv[i+1])))
	}
	return strings.Join(parts, ",")
}

func do(t testing.TB, method, url string, body io.Reader, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Tus-Resumable", "1.0.0")
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	if r, ok := body.(*bytes.Reader); ok {
		req.ContentLength = int64(r.Len())
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// create creates an upload of size bytes and returns its URL.
func create(t testing.TB, p *process, size int64, metadata string) string {
	t.Helper()
	resp := do(t, http.MethodPost, p.url, nil, "Upload-Length", strconv.FormatInt(size, 10), "Upload-Metadata", metadata)
	if resp.StatusCode != http.StatusCreated || resp.Header.Get("Location") == "" {
		t.Fatalf("POST = %d %s, want 201 with a Location", resp.StatusCode, readBody(t, resp))
	}
	// An empty upload is finished at once, and expires no more.
	if _, err := http.ParseTime(resp.Header.Get("Upload-Expires")); err != nil && size > 0 {
		t.Errorf("POST Upload-Expires = %q, want an HTTP date (tus expiration): %v", resp.Header.Get("Upload-Expires"), err)
	}
	return resp.Header.Get("Location")
}

// patch sends body at offset and returns the answer.
func patch(t testing.TB, url string, offset int64, body io.Reader) *http.Response {
	t.Helper()
	return do(t, http.MethodPatch, url, body, "Upload-Offset", strconv.FormatInt(offset, 10),
		"Content-Type", "application/offset+octet-stream")
}

// offsetOf is the upload's offset, by HEAD.
func offsetOf(t testing.TB, url string) int64 {
	t.Helper()
	resp := do(t, http.MethodHead, url, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HEAD %s = %d, want 200", url, resp.StatusCode)
	}
	n, err := strconv.ParseInt(resp.Header.Get("Upload-Offset"), 10, 64)
	if err != nil {
		t.Fatalf("HEAD Upload-Offset = %q", resp.Header.Get("Upload-Offset"))
	}
	return n
}

// object is the JSON GET answers for a finished upload.
type object struct {
	Bucket      string  `json:"bucket"`
	Key         string  `json:"key"`
	VersionID   string  `json:"version_id"`
	Size        int64   `json:"size"`
	ETag        string  `json:"etag"`
	ContentType string  `json:"content_type"`
	SHA256      *string `json:"sha256"`
}

func mustObject(t testing.TB, url string) object {
	t.Helper()
	resp := do(t, http.MethodGet, url, nil)
	body := readBody(t, resp)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET %s = %d %s %s, want 200 and the object's JSON", url, resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var o object
	if err := json.Unmarshal(body, &o); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, body)
	}
	return o
}

// problem is a problem+json answer.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// wantProblem fails unless resp is a problem+json of status whose type
// ends in /typ.
func wantProblem(t testing.TB, what string, resp *http.Response, status int, typ string) {
	t.Helper()
	body := readBody(t, resp)
	if resp.StatusCode != status || resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Errorf("%s = %d %s %s, want %d problem+json", what, resp.StatusCode, resp.Header.Get("Content-Type"), body, status)
		return
	}
	if resp.Request.Method == http.MethodHead {
		return
	}
	var p problem
	if err := json.Unmarshal(body, &p); err != nil || p.Status != status || p.Type != uploads.ProblemBase+typ || p.Title == "" {
		t.Errorf("%s = %s, want a problem of type %s%s with status %d and a title (%v)", what, body, uploads.ProblemBase, typ, status, err)
	}
}

func readBody(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	return b
}

// partialFiles lists files under root that are not a version's data,
// metadata or pointer.
func partialFiles(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d iofs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if n := d.Name(); !strings.HasSuffix(n, ".data") && !strings.HasSuffix(n, ".json") && n != "current" {
			out = append(out, strings.TrimPrefix(path, root+string(os.PathSeparator)))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// s3Leftovers lists the multipart uploads in progress in bucket and every
// version and delete marker under the uploads' temporary prefix.
func s3Leftovers(t testing.TB, c *awss3.Client, bucket string) []string {
	t.Helper()
	var out []string
	ups, err := c.ListMultipartUploads(t.Context(), &awss3.ListMultipartUploadsInput{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatalf("ListMultipartUploads = %v", err)
	}
	for _, u := range ups.Uploads {
		out = append(out, "multipart upload of "+aws.ToString(u.Key))
	}
	vs, err := c.ListObjectVersions(t.Context(), &awss3.ListObjectVersionsInput{Bucket: aws.String(bucket), Prefix: aws.String(s3.TempPrefix)})
	if err != nil {
		t.Fatalf("ListObjectVersions = %v", err)
	}
	for _, v := range vs.Versions {
		out = append(out, aws.ToString(v.Key)+"@"+aws.ToString(v.VersionId))
	}
	for _, m := range vs.DeleteMarkers {
		out = append(out, "delete marker "+aws.ToString(m.Key))
	}
	return out
}
