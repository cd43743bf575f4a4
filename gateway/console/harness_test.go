package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/ledger/sqlcore"
	"github.com/dlgate/dlgate/ledger/sqlite"
	"github.com/dlgate/dlgate/storage/fs"
)

const adminToken = "console-admin-token-0123456789abcdef"

// clock is the one clock of a harness's gateways and their ledger.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

func (c *clock) Advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

// harness is one or more gateways on one SQLite ledger and one local
// store, their admin listeners served over loopback.
type harness struct {
	DB    *sqlcore.DB
	Clock *clock
	Logs  *bytes.Buffer
	// Admin are the admin listeners, one per gateway.
	Admin []*httptest.Server
	dir   string
}

// mustHarness starts n gateways (at least one) sharing a ledger and a
// store; configure may adjust their options.
func mustHarness(tb testing.TB, n int, configure ...func(*gateway.Options)) *harness {
	tb.Helper()
	ctx := context.Background()
	h := &harness{Clock: &clock{t: time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)}, Logs: &bytes.Buffer{}, dir: tb.TempDir()}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("the gateways' log:\n%s", h.Logs.String())
		}
	})
	path := filepath.Join(h.dir, "gateway.db")
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	if err := sqlite.Migrate(ctx, db.SQL(), path); err != nil {
		tb.Fatal(err)
	}
	db.Now, db.DBClock = h.Clock.Now, h.Clock.Now
	h.DB = db
	st, err := fs.New(filepath.Join(h.dir, "objects"), fs.WithClock(h.Clock.Now))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	var logs sync.Mutex
	for range max(n, 1) {
		opts := gateway.Options{
			Ledger: db, Store: st, Secret: []byte("0123456789abcdef0123456789abcdef"),
			PublicURL: "http://127.0.0.1:9", AdminToken: adminToken, Now: h.Clock.Now,
			Logger: slog.New(slog.NewTextHandler(lockedWriter{&logs, h.Logs}, &slog.HandlerOptions{Level: slog.LevelDebug})),
		}
		for _, c := range configure {
			c(&opts)
		}
		srv, err := gateway.New(opts)
		if err != nil {
			tb.Fatal(err)
		}
		ts := httptest.NewServer(srv.AdminHandler())
		tb.Cleanup(ts.Close)
		h.Admin = append(h.Admin, ts)
	}
	return h
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// reply is an answer read whole.
type reply struct {
	*http.Response
	Body []byte
}

func (r reply) String() string { return r.Status + " " + string(r.Body) }

// client is a browser's view of one gateway: its cookie, sent on every
// request as a same-origin browser sends it, and no redirect followed.
type client struct {
	base   string
	cookie string
}

func (h *harness) client(i int) *client { return &client{base: h.Admin[i].URL} }

var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// do sends a request as the console's own page would: a navigation or a
// form post from the same origin (Sec-Fetch-Site: same-origin).
func (c *client) do(tb testing.TB, method, path string, form url.Values, hdr ...string) reply {
	tb.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		tb.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Accept", "text/html,application/xhtml+xml")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if c.cookie != "" {
		req.Header.Set("Cookie", c.cookie)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		tb.Fatal(err)
	}
	return reply{resp, b}
}

// get fetches a page and demands status.
func (c *client) get(tb testing.TB, path string, status int) reply {
	tb.Helper()
	r := c.do(tb, http.MethodGet, path, nil)
	if r.StatusCode != status {
		tb.Fatalf("GET %s = %s, want %d", path, r, status)
	}
	return r
}

// post sends a form and demands status.
func (c *client) post(tb testing.TB, path string, form url.Values, status int) reply {
	tb.Helper()
	r := c.do(tb, http.MethodPost, path, form)
	if r.StatusCode != status {
		tb.Fatalf("POST %s %v = %s, want %d", path, form, r, status)
	}
	return r
}

// signIn signs the client in with key and keeps the session's cookie.
func (c *client) signIn(tb testing.TB, key string) *http.Cookie {
	tb.Helper()
	r := c.post(tb, "/console/sign-in", url.Values{"key": {key}}, http.StatusSeeOther)
	for _, ck := range r.Cookies() {
		if ck.Name == "dlgate_console" && ck.Value != "" {
			c.cookie = ck.Name + "=" + ck.Value
			return ck
		}
	}
	tb.Fatalf("sign-in set no session cookie: %v", r.Header["Set-Cookie"])
	return nil
}

// api calls the admin API of gateway base with bearer token.
func api(tb testing.TB, base, token, method, path string, body any, status int, out any) {
	tb.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		rd = bytes.NewReader(b)
	default:
		enc, _ := json.Marshal(b)
		rd = bytes.NewReader(enc)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != status {
		tb.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, b, status)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			tb.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

// apiLink is what the tests read of a link's JSON.
type apiLink struct {
	ID       string `json:"id"`
	URL      string `json:"url"`
	NamedURL string `json:"named_url"`
}

// mustObjectAndLink stores an object and makes a link to it through the
// admin API with the bootstrap token.
func (h *harness) mustObjectAndLink(tb testing.TB, key string) apiLink {
	tb.Helper()
	base := h.Admin[0].URL
	api(tb, base, adminToken, http.MethodPut, "/v1/objects/"+key, []byte("hello, console"), http.StatusCreated, nil)
	var l apiLink
	api(tb, base, adminToken, http.MethodPost, "/v1/links", map[string]any{"object": map[string]string{"key": key},
		"downloads": 2, "expires_in": 3600}, http.StatusCreated, &l)
	return l
}

// mustKey makes an API key with scopes and returns its text.
func (h *harness) mustKey(tb testing.TB, name string, scopes ...string) string {
	tb.Helper()
	var k struct {
		Key string `json:"key"`
	}
	api(tb, h.Admin[0].URL, adminToken, http.MethodPost, "/v1/keys", map[string]any{"name": name, "scopes": scopes}, http.StatusCreated, &k)
	return k.Key
}

// parse parses a page, failing the test when it is not HTML.
func parse(tb testing.TB, r reply) *html.Node {
	tb.Helper()
	doc, err := html.Parse(bytes.NewReader(r.Body))
	if err != nil {
		tb.Fatalf("%s: %v", r.Request.URL.Path, err)
	}
	return doc
}

// find returns every element of doc for which match is true.
func find(doc *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return out
}

func attr(n *html.Node, name string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == name {
			return a.Val, true
		}
	}
	return "", false
}

// byID is the element with id, or nil.
func byID(doc *html.Node, id string) *html.Node {
	els := find(doc, func(n *html.Node) bool { v, _ := attr(n, "id"); return v == id })
	if len(els) == 0 {
		return nil
	}
	return els[0]
}

// text is the text content of n.
func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

// controls are the hrefs and form actions of a page: what a person can
// reach or do from it.
func controls(doc *html.Node) []string {
	var out []string
	for _, n := range find(doc, func(n *html.Node) bool { return n.Data == "a" || n.Data == "form" }) {
		if v, ok := attr(n, "href"); ok {
			out = append(out, "GET "+v)
		}
		if v, ok := attr(n, "action"); ok {
			m, _ := attr(n, "method")
			out = append(out, strings.ToUpper(m)+" "+v)
		}
	}
	return out
}
