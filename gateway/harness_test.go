package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/internal/logbuf"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore"
	"github.com/dlgate/dlgate/ledger/sqlite"
	"github.com/dlgate/dlgate/storage/fs"
)

const testAdminToken = "admin-token-for-tests-0123456789"

// testSecret derives every token of a harness; tests use it to compute
// tokens of rows that do not exist.
var testSecret = []byte("0123456789abcdef0123456789abcdef")

// Harness is one gateway on a real SQLite ledger and a real filesystem
// store, served over loopback HTTP. Ledger and Store are fakes wrapping the
// real ones so a test can count ledger calls or make storage fail.
type Harness struct {
	Server *gateway.Server
	DB     *sqlcore.DB  // the real ledger, for reading rows directly
	Ledger *fakeLedger  // what the server talks to
	Store  *fakeStore   // what the server talks to
	Clock  *frozenClock // the one clock of server, ledger and store
	Logs   *syncBuffer  // every log record, JSON, at Debug level

	Public *httptest.Server
	Admin  *httptest.Server
	// Client talks to the public listener and never follows redirects.
	Client *http.Client

	mu       sync.Mutex
	idle     *sync.Cond
	inflight int
}

// MustHarness starts a gateway; configure may adjust its options before
// New (Chunk, Defaults, …). Everything is torn down by tb.Cleanup.
func MustHarness(tb testing.TB, configure ...func(*gateway.Options)) *Harness {
	tb.Helper()
	ctx := context.Background()
	dir := tb.TempDir()
	h := &Harness{Clock: newFrozenClock(), Logs: &syncBuffer{}}
	h.idle = sync.NewCond(&h.mu)

	path := filepath.Join(dir, "gateway.db")
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	if err := sqlite.Migrate(ctx, db.SQL(), path); err != nil {
		tb.Fatal(err)
	}
	// The frozen clock stands in for the database's clock too, so tests
	// move expiry and leases by moving it.
	db.Now, db.DBClock = h.Clock.Now, h.Clock.Now
	h.DB = db
	h.Ledger = &fakeLedger{Ledger: db, calls: map[string]int{}}

	st, err := fs.New(filepath.Join(dir, "objects"), fs.WithClock(h.Clock.Now))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	h.Store = &fakeStore{Store: st}

	// The public URL must be known before New: take the listener first.
	h.Public = httptest.NewUnstartedServer(nil)
	opts := gateway.Options{
		Ledger:     h.Ledger,
		Uploads:    db,
		Store:      h.Store,
		Secret:     testSecret,
		PublicURL:  "http://" + h.Public.Listener.Addr().String(),
		AdminToken: testAdminToken,
		// gateway serve's log handler (logbuf), JSON, each line written at once.
		Logger: slog.New(logbuf.NewLineHandler(logbuf.New(h.Logs, time.Hour), true, slog.LevelDebug, slog.LevelDebug-100)),
		Now:    h.Clock.Now,
	}
	for _, c := range configure {
		c(&opts)
	}
	srv, err := gateway.New(opts)
	if err != nil {
		tb.Fatal(err)
	}
	h.Server = srv
	public := srv.PublicHandler()
	h.Public.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.begin()
		defer h.end()
		public.ServeHTTP(w, r)
	})
	h.Public.Start()
	tb.Cleanup(h.Public.Close)
	h.Admin = httptest.NewServer(srv.AdminHandler())
	tb.Cleanup(h.Admin.Close)

	h.Client = &http.Client{
		Transport: &http.Transport{MaxIdleConnsPerHost: 32},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
	tb.Cleanup(h.Client.CloseIdleConnections)
	return h
}

func (h *Harness) begin() {
	h.mu.Lock()
	h.inflight++
	h.mu.Unlock()
}

func (h *Harness) end() {
	h.mu.Lock()
	h.inflight--
	if h.inflight == 0 {
		h.idle.Broadcast()
	}
	h.mu.Unlock()
}

// WaitIdle returns once no public request is being served: every handler
// has returned, with its deferred slot release and budget return done,
// and every stream's delivery record written.
func (h *Harness) WaitIdle() {
	h.mu.Lock()
	for h.inflight > 0 {
		h.idle.Wait()
	}
	h.mu.Unlock()
	h.Server.WaitDeliveries()
}

// frozenClock only moves when a test moves it, so expiry, leases and
// Last-Modified are exact.
type frozenClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFrozenClock() *frozenClock {
	return &frozenClock{t: time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)}
}

func (c *frozenClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *frozenClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Records returns the JSON log records whose msg is msg.
func (b *syncBuffer) Records(tb testing.TB, msg string) []map[string]any {
	tb.Helper()
	var out []map[string]any
	for line := range strings.Lines(b.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			tb.Fatalf("log line is not JSON: %q", line)
		}
		if rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// ---- admin API, used like an operator would ----

// objectJSON is the answer of PUT /v1/objects.
type objectJSON struct {
	Bucket      string `json:"bucket"`
	Key         string `json:"key"`
	VersionID   string `json:"version_id"`
	Size        int64  `json:"size"`
	ETag        string `json:"etag"`
	ContentType string `json:"content_type"`
	SHA256      string `json:"sha256"` // "" for null
}

// linkJSON is a link as the admin API shows it.
type linkJSON struct {
	ID             string         `json:"id"`
	URL            string         `json:"url"`
	NamedURL       string         `json:"named_url"`
	Token          string         `json:"token"`
	Downloads      int            `json:"downloads"`
	Remaining      int            `json:"remaining"`
	ExpiresAt      string         `json:"expires_at"`
	RevokedAt      *string        `json:"revoked_at"`
	Delivery       string         `json:"delivery"`
	AccountID      *string        `json:"account_id"`
	Filename       string         `json:"filename"`
	Object         objectJSON     `json:"object"`
	Session        sessionParams  `json:"session"`
	Grants         map[string]int `json:"grants"`
	Deliveries     map[string]int `json:"deliveries"`
	ActiveSessions *int           `json:"active_sessions"`
	Retries        int            `json:"retries"`
}

type sessionParams struct {
	TTL            int64 `json:"ttl"`
	ByteBudget     int64 `json:"byte_budget"`
	MaxConcurrency int   `json:"max_concurrency"`
}

// sessionJSON is the body of a minted session (SPEC §3).
type sessionJSON struct {
	SessionURL      string `json:"session_url"`
	NamedSessionURL string `json:"named_session_url"`
	SessionID       string `json:"session_id"`
	ExpiresAt       string `json:"expires_at"`
	ByteBudget      int64  `json:"byte_budget"`
	MaxConcurrency  int    `json:"max_concurrency"`
	Object          struct {
		Size        int64  `json:"size"`
		ETag        string `json:"etag"`
		ContentType string `json:"content_type"`
		Filename    string `json:"filename"`
	} `json:"object"`
}

// problemJSON is an RFC 9457 body.
type problemJSON struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail"`
	RequestID string `json:"request_id"`
}

// AdminDo sends an admin request authenticated with the bootstrap token;
// body is JSON-encoded unless it is an io.Reader or a string (sent as
// is).
func (h *Harness) AdminDo(tb testing.TB, method, path string, body any, header http.Header) (*http.Response, []byte) {
	tb.Helper()
	return h.AdminDoAs(tb, testAdminToken, method, path, body, header)
}

// AdminDoAs is AdminDo with the bearer token key (the bootstrap token or
// an API key); "" sends no Authorization.
func (h *Harness) AdminDoAs(tb testing.TB, key, method, path string, body any, header http.Header) (*http.Response, []byte) {
	tb.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case io.Reader:
		rd = b
	case string:
		rd = strings.NewReader(b)
	default:
		enc, err := json.Marshal(b)
		if err != nil {
			tb.Fatal(err)
		}
		rd = bytes.NewReader(enc)
	}
	req, err := http.NewRequest(method, h.Admin.URL+path, rd)
	if err != nil {
		tb.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	return mustDo(tb, http.DefaultClient, req)
}

// keyJSON is a key as POST /v1/keys answers it (Key set) or GET /v1/keys
// lists it.
type keyJSON struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Scopes     []string `json:"scopes"`
	Key        string   `json:"key"`
	CreatedAt  string   `json:"created_at"`
	ExpiresAt  *string  `json:"expires_at"`
	RevokedAt  *string  `json:"revoked_at"`
	LastUsedAt *string  `json:"last_used_at"`
}

// MustKey creates a key with the given scopes through the admin API, as
// the bootstrap token, and returns it with its text.
func (h *Harness) MustKey(tb testing.TB, name string, scopes ...string) keyJSON {
	tb.Helper()
	resp, body := h.AdminDo(tb, http.MethodPost, "/v1/keys", map[string]any{"name": name, "scopes": scopes}, nil)
	if resp.StatusCode != http.StatusCreated {
		tb.Fatalf("POST /v1/keys %s %v = %d %s, want 201", name, scopes, resp.StatusCode, body)
	}
	return mustJSON[keyJSON](tb, body)
}

// MustPutObject uploads data under key and returns the stored version.
func (h *Harness) MustPutObject(tb testing.TB, key, contentType string, data []byte) objectJSON {
	tb.Helper()
	resp, body := h.AdminDo(tb, http.MethodPut, "/v1/objects/"+key, bytes.NewReader(data), http.Header{"Content-Type": {contentType}})
	if resp.StatusCode != http.StatusCreated {
		tb.Fatalf("PUT /v1/objects/%s = %d %s, want 201", key, resp.StatusCode, body)
	}
	return mustJSON[objectJSON](tb, body)
}

// MustCreateLink posts req to /v1/links and demands a 201.
func (h *Harness) MustCreateLink(tb testing.TB, req map[string]any) linkJSON {
	tb.Helper()
	resp, body := h.AdminDo(tb, http.MethodPost, "/v1/links", req, nil)
	if resp.StatusCode != http.StatusCreated {
		tb.Fatalf("POST /v1/links %v = %d %s, want 201", req, resp.StatusCode, body)
	}
	return mustJSON[linkJSON](tb, body)
}

// MustShowLink returns GET /v1/links/{id}.
func (h *Harness) MustShowLink(tb testing.TB, id string) linkJSON {
	tb.Helper()
	resp, body := h.AdminDo(tb, http.MethodGet, "/v1/links/"+id, nil, nil)
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET /v1/links/%s = %d %s", id, resp.StatusCode, body)
	}
	return mustJSON[linkJSON](tb, body)
}

// MustObjectLink uploads data and creates a link on it with the extra
// fields of req (downloads defaults to 5, expires_in to an hour).
func (h *Harness) MustObjectLink(tb testing.TB, key string, data []byte, req map[string]any) linkJSON {
	tb.Helper()
	h.MustPutObject(tb, key, "application/octet-stream", data)
	full := map[string]any{"object": map[string]any{"key": key}, "downloads": 5, "expires_in": 3600}
	for k, v := range req {
		full[k] = v
	}
	return h.MustCreateLink(tb, full)
}

// MustMint posts to /d/{token}/sessions and demands a 201.
func (h *Harness) MustMint(tb testing.TB, l linkJSON) sessionJSON {
	tb.Helper()
	resp, body := h.Do(tb, http.MethodPost, l.URL+"/sessions", nil)
	if resp.StatusCode != http.StatusCreated {
		tb.Fatalf("POST %s/sessions = %d %s, want 201", l.ID, resp.StatusCode, body)
	}
	return mustJSON[sessionJSON](tb, body)
}

// MustSession reads the session row straight from the ledger.
func (h *Harness) MustSession(tb testing.TB, id string) *ledger.Session {
	tb.Helper()
	x, err := h.DB.SessionGet(context.Background(), id)
	if err != nil {
		tb.Fatal(err)
	}
	return x
}

// Do sends a public request and reads the whole answer.
func (h *Harness) Do(tb testing.TB, method, url string, header http.Header) (*http.Response, []byte) {
	tb.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	return mustDo(tb, h.Client, req)
}

func mustDo(tb testing.TB, c *http.Client, req *http.Request) (*http.Response, []byte) {
	tb.Helper()
	resp, err := c.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatalf("%s %s: reading body: %v", req.Method, req.URL.Path, err)
	}
	return resp, body
}

func mustJSON[T any](tb testing.TB, body []byte) T {
	tb.Helper()
	var v T
	if err := json.Unmarshal(body, &v); err != nil {
		tb.Fatalf("decoding %T from %q: %v", v, body, err)
	}
	return v
}

// mustProblem checks resp is an application/problem+json answer with
// status and a type ending in /suffix, and returns it.
func mustProblem(tb testing.TB, resp *http.Response, body []byte, status int, suffix string) problemJSON {
	tb.Helper()
	if resp.StatusCode != status {
		tb.Fatalf("%s %s = %d %s, want %d", resp.Request.Method, resp.Request.URL.Path, resp.StatusCode, body, status)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
		tb.Errorf("Content-Type = %q, want application/problem+json", ct)
	}
	p := mustJSON[problemJSON](tb, body)
	if p.Type != problem.Base+suffix {
		tb.Errorf("problem type = %q, want %q", p.Type, problem.Base+suffix)
	}
	if p.Status != status || p.Title == "" {
		tb.Errorf("problem = %+v, want status %d and a title", p, status)
	}
	return p
}

// testData returns n deterministic, non-repeating-looking bytes.
func testData(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

// MustConsoleSignIn signs in to the operator console with key (the
// bootstrap token or an API key) and returns the Cookie header of its
// session.
func (h *Harness) MustConsoleSignIn(tb testing.TB, key string) string {
	tb.Helper()
	resp, body := h.ConsoleDo(tb, "", http.MethodPost, "/console/sign-in", "key="+neturl.QueryEscape(key),
		http.Header{"Content-Type": {"application/x-www-form-urlencoded"}})
	if resp.StatusCode != http.StatusSeeOther {
		tb.Fatalf("console sign-in = %d %s, want 303", resp.StatusCode, body)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "dlgate_console" && c.Value != "" {
			return c.Name + "=" + c.Value
		}
	}
	tb.Fatalf("console sign-in set no session cookie: %v", resp.Header["Set-Cookie"])
	return ""
}

// ConsoleDo sends a request to the admin listener with the console
// session cookie (a Cookie header, "" for none) and the given headers,
// and does not follow redirects: the console answers many requests with
// 303.
func (h *Harness) ConsoleDo(tb testing.TB, cookie, method, path, body string, header http.Header) (*http.Response, []byte) {
	tb.Helper()
	req, err := http.NewRequest(method, h.Admin.URL+path, strings.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	if cookie != "" {
		req.Header.Set("Cookie", cookie)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	return mustDo(tb, noRedirects, req)
}

// noRedirects is a client that hands back every redirect.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
