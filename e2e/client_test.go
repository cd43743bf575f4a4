package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// plainClient never follows redirects (a test looks at the 303 itself),
// never asks for compression and uses no proxy.
var plainClient = &http.Client{
	Transport: &http.Transport{
		DisableCompression:  true,
		MaxIdleConnsPerHost: 32,
		IdleConnTimeout:     30 * time.Second,
	},
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// requestTimeout bounds every request a test makes, so that a hung
// gateway fails the test instead of the whole binary.
const requestTimeout = 2 * time.Minute

// Reply is a response read to its end (or to where it broke off).
type Reply struct {
	Method  string
	URL     string
	Status  int
	Header  http.Header
	Body    []byte
	BodyErr error // non-nil when the body ended early (truncated response)
}

// MustFetch sends one request and reads the whole answer. hdr is a list of
// header name/value pairs. Only a failure to get a status line fails the
// test; a body that breaks off is reported in BodyErr.
func MustFetch(tb testing.TB, method, rawURL string, hdr ...string) *Reply {
	tb.Helper()
	r, err := fetch(method, rawURL, nil, hdr...)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, redact(rawURL), err)
	}
	return r
}

func fetch(method, rawURL string, body []byte, hdr ...string) (*Reply, error) {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, rawURL, rd)
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := plainClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return &Reply{Method: method, URL: rawURL, Status: resp.StatusCode, Header: resp.Header, Body: b, BodyErr: err}, nil
}

// redact shortens the token in a /d/ or /s/ URL for messages: tokens are
// secrets, even in test logs.
func redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparsable URL)"
	}
	parts := strings.Split(u.Path, "/")
	for i, p := range parts {
		if i > 0 && (parts[i-1] == "d" || parts[i-1] == "s") && len(p) > 6 {
			parts[i] = p[:6] + "…"
		}
	}
	return u.Scheme + "://" + u.Host + strings.Join(parts, "/")
}

func (r *Reply) String() string {
	return fmt.Sprintf("%s %s → %d", r.Method, redact(r.URL), r.Status)
}

// problem is an application/problem+json body (RFC 9457).
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// checkPublicHeaders checks the headers SPEC §3 puts on every public
// response, errors included.
func checkPublicHeaders(tb testing.TB, r *Reply) {
	tb.Helper()
	for _, h := range [][2]string{
		{"Cache-Control", "no-store"},
		{"X-Content-Type-Options", "nosniff"},
		{"Referrer-Policy", "no-referrer"},
	} {
		if got := r.Header.Get(h[0]); got != h[1] {
			tb.Errorf("%v: %s = %q, want %q", r, h[0], got, h[1])
		}
	}
}

// checkProblem checks that r is a problem answer with status and a type
// ending in "/"+kind, carrying the common public headers. A HEAD answer
// has no body to check.
func checkProblem(tb testing.TB, r *Reply, status int, kind string) {
	tb.Helper()
	if r.Status != status {
		tb.Errorf("%v, want %d (%s); body %.300q", r, status, kind, r.Body)
		return
	}
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/problem+json" {
		tb.Errorf("%v: Content-Type %q, want application/problem+json", r, r.Header.Get("Content-Type"))
	}
	checkPublicHeaders(tb, r)
	if r.Method == http.MethodHead {
		if len(r.Body) != 0 {
			tb.Errorf("%v: HEAD answer has a %d-byte body", r, len(r.Body))
		}
		return
	}
	var p problem
	if err := json.Unmarshal(r.Body, &p); err != nil {
		tb.Errorf("%v: problem body %.300q: %v", r, r.Body, err)
		return
	}
	if !strings.HasSuffix(p.Type, "/"+kind) || p.Status != status || p.Title == "" {
		tb.Errorf("%v: problem %+v, want type …/%s, status %d and a title", r, p, kind, status)
	}
}

// checkBody checks that r is a 200 carrying exactly obj.
func checkBody(tb testing.TB, r *Reply, obj *Object) {
	tb.Helper()
	if r.Status != http.StatusOK {
		tb.Errorf("%v, want 200 with the object; body %.300q", r, r.Body)
		return
	}
	if r.BodyErr != nil || sha256.Sum256(r.Body) != obj.Sum {
		tb.Errorf("%v: body of %d bytes (read error %v) differs from the %d-byte object", r, len(r.Body), r.BodyErr, len(obj.Data))
	}
}

// Object is a random object uploaded through the admin API.
type Object struct {
	Key       string
	VersionID string
	ETag      string
	Data      []byte
	Sum       [32]byte
}

// Admin is a client of one process's admin API.
type Admin struct {
	Base  string
	Token string
}

// call sends a JSON request (body may be nil; []byte is sent raw) and
// decodes the answer into out (may be nil). An answer other than want
// fails the test.
func (a *Admin) call(tb testing.TB, method, path string, body any, want int, out any) {
	tb.Helper()
	var raw []byte
	ct := "application/json"
	switch b := body.(type) {
	case nil:
	case []byte:
		raw, ct = b, "application/octet-stream"
	default:
		var err error
		if raw, err = json.Marshal(b); err != nil {
			tb.Fatal(err)
		}
	}
	r, err := fetch(method, a.Base+path, raw, "Authorization", "Bearer "+a.Token, "Content-Type", ct)
	if err != nil {
		tb.Fatalf("admin %s %s: %v", method, path, err)
	}
	if r.Status != want {
		tb.Fatalf("admin %s %s: %d, want %d; body %.500q", method, path, r.Status, want, r.Body)
	}
	if out != nil {
		if err := json.Unmarshal(r.Body, out); err != nil {
			tb.Fatalf("admin %s %s: decoding %.500q: %v", method, path, r.Body, err)
		}
	}
}

// MustUpload uploads size random bytes under key (PUT /v1/objects/{key}).
func (a *Admin) MustUpload(tb testing.TB, key string, size int) *Object {
	tb.Helper()
	data := make([]byte, size)
	rand.Read(data) //nolint:errcheck // never fails
	var got struct {
		Key       string `json:"key"`
		VersionID string `json:"version_id"`
		Size      int64  `json:"size"`
		ETag      string `json:"etag"`
	}
	a.call(tb, http.MethodPut, "/v1/objects/"+url.PathEscape(key), data, http.StatusCreated, &got)
	if got.Key != key || got.Size != int64(size) || got.VersionID == "" || got.ETag == "" {
		tb.Fatalf("upload of %q (%d bytes) answered %+v", key, size, got)
	}
	return &Object{Key: key, VersionID: got.VersionID, ETag: got.ETag, Data: data, Sum: sha256.Sum256(data)}
}

// LinkRequest is the body of POST /v1/links.
type LinkRequest struct {
	Object    ObjectRef        `json:"object"`
	Downloads int              `json:"downloads"`
	ExpiresIn int64            `json:"expires_in"`
	Filename  string           `json:"filename,omitempty"`
	Delivery  string           `json:"delivery,omitempty"`
	Confirm   bool             `json:"confirm,omitempty"`
	Account   string           `json:"account_id,omitempty"`
	Session   *SessionSettings `json:"session,omitempty"`
	Retries   int              `json:"retries,omitempty"`
}

// ObjectRef names an object version in a LinkRequest.
type ObjectRef struct {
	Key       string `json:"key"`
	VersionID string `json:"version_id,omitempty"`
}

// SessionSettings are a link's session overrides.
type SessionSettings struct {
	TTL            int64 `json:"ttl,omitempty"`
	ByteBudget     int64 `json:"byte_budget,omitempty"`
	MaxConcurrency int   `json:"max_concurrency,omitempty"`
}

// Link is a link as the admin API shows it.
type Link struct {
	ID        string  `json:"id"`
	URL       string  `json:"url"`
	NamedURL  string  `json:"named_url"`
	Token     string  `json:"token"`
	Downloads int     `json:"downloads"`
	Remaining int     `json:"remaining"`
	RevokedAt *string `json:"revoked_at"`
	Delivery  string  `json:"delivery"`
	Filename  string  `json:"filename"`
	Object    struct {
		Key       string `json:"key"`
		VersionID string `json:"version_id"`
		Size      int64  `json:"size"`
		ETag      string `json:"etag"`
	} `json:"object"`
	Grants         map[string]int `json:"grants"`
	ActiveSessions *int           `json:"active_sessions"`
}

// MustCreateLink creates a link to obj with the given allowance, expiring
// in ten minutes unless req says otherwise. The link pins obj's version.
func (a *Admin) MustCreateLink(tb testing.TB, obj *Object, req LinkRequest) *Link {
	tb.Helper()
	req.Object = ObjectRef{Key: obj.Key, VersionID: obj.VersionID}
	if req.ExpiresIn == 0 {
		req.ExpiresIn = 600
	}
	var l Link
	a.call(tb, http.MethodPost, "/v1/links", req, http.StatusCreated, &l)
	if l.ID == "" || len(l.Token) != 43 || !strings.HasSuffix(l.URL, "/d/"+l.Token) || l.Remaining != req.Downloads {
		tb.Fatalf("POST /v1/links answered %+v", l)
	}
	noteToken(l.URL)
	return &l
}

// issuedTokens holds every link and session token the tests were given,
// to look for them in the gateways' logs afterwards (SPEC §2).
var issuedTokens sync.Map // token → struct{}

func noteToken(rawURL string) {
	if i := strings.LastIndexByte(rawURL, '/'); i >= 0 && len(rawURL)-i-1 == 43 {
		issuedTokens.Store(rawURL[i+1:], struct{}{})
	}
}

// checkNoTokenInLogs checks that no token handed out so far appears in
// the stdout or stderr of the processes gws: raw tokens never reach logs.
func checkNoTokenInLogs(tb testing.TB, gws ...*Gateway) {
	tb.Helper()
	var tokens []string
	issuedTokens.Range(func(k, _ any) bool {
		tokens = append(tokens, k.(string))
		return true
	})
	if len(tokens) == 0 {
		tb.Fatal("no token was recorded; the check would prove nothing")
	}
	checkNotLogged(tb, "raw token", tokens, gws...)
}

// checkNotLogged fails the test for every secret (a token, a JWT's
// signature) found in the stdout or stderr of the processes gws, showing
// the line with the secret shortened.
func checkNotLogged(tb testing.TB, what string, secrets []string, gws ...*Gateway) {
	tb.Helper()
	found := 0
	for _, g := range gws {
		for _, path := range []string{g.StdoutPath, g.StderrPath} {
			b, err := os.ReadFile(path)
			if err != nil {
				tb.Errorf("%s: %v", g.Name, err)
				continue
			}
			for _, sec := range secrets {
				if i := bytes.Index(b, []byte(sec)); i >= 0 {
					tb.Errorf("%s logged a %s (%s…) in %s: %q", g.Name, what, sec[:6], filepath.Base(path), lineAt(b, i, len(sec)))
					found++
				}
			}
		}
	}
	if found == 0 {
		tb.Logf("%d %ss issued, none in the logs of %d processes", len(secrets), what, len(gws))
	}
}

// lineAt returns the line of b around offset i, with the n-byte secret
// there shortened.
func lineAt(b []byte, i, n int) string {
	start := bytes.LastIndexByte(b[:i], '\n') + 1
	end := bytes.IndexByte(b[i:], '\n')
	if end < 0 {
		end = len(b) - i
	}
	line := string(b[start : i+end])
	return line[:i-start+6] + "…" + line[min(len(line), i-start+n):]
}

// MustLink reads a link with its counts.
func (a *Admin) MustLink(tb testing.TB, id string) *Link {
	tb.Helper()
	var l Link
	a.call(tb, http.MethodGet, "/v1/links/"+id, nil, http.StatusOK, &l)
	return &l
}

// checkCounts checks a link's remaining allowance and grant counts.
func (a *Admin) checkCounts(tb testing.TB, id string, remaining, granted, refunded int) {
	tb.Helper()
	l := a.MustLink(tb, id)
	if l.Remaining != remaining || l.Grants["granted"] != granted || l.Grants["refunded"] != refunded {
		tb.Errorf("link %s: remaining %d, grants %v; want remaining %d, granted %d, refunded %d",
			id, l.Remaining, l.Grants, remaining, granted, refunded)
	}
}

// MustRevokeLink revokes a link.
func (a *Admin) MustRevokeLink(tb testing.TB, id string) {
	tb.Helper()
	a.call(tb, http.MethodPost, "/v1/links/"+id+"/revoke", nil, http.StatusOK, nil)
}

// MustRevokeSession revokes one transfer session.
func (a *Admin) MustRevokeSession(tb testing.TB, id string) {
	tb.Helper()
	a.call(tb, http.MethodDelete, "/v1/sessions/"+id, nil, http.StatusNoContent, nil)
}

// Session is the JSON of a minted transfer session.
type Session struct {
	SessionURL      string `json:"session_url"`
	NamedSessionURL string `json:"named_session_url"`
	SessionID       string `json:"session_id"`
	ExpiresAt       string `json:"expires_at"`
	ByteBudget      int64  `json:"byte_budget"`
	MaxConcurrency  int    `json:"max_concurrency"`
	Object          struct {
		Size     int64  `json:"size"`
		ETag     string `json:"etag"`
		Filename string `json:"filename"`
	} `json:"object"`
}

// MustMintSession claims one allowance of the link through base (a public
// URL base: the balancer or one process) and returns the session.
func MustMintSession(tb testing.TB, base string, l *Link) *Session {
	tb.Helper()
	r := MustFetch(tb, http.MethodPost, base+"/d/"+l.Token+"/sessions")
	if r.Status != http.StatusCreated {
		tb.Fatalf("%v, want 201; body %.300q", r, r.Body)
	}
	var s Session
	if err := json.Unmarshal(r.Body, &s); err != nil {
		tb.Fatalf("%v: %v", r, err)
	}
	if s.SessionURL == "" || s.SessionID == "" || s.Object.Size != l.Object.Size {
		tb.Fatalf("%v: session %+v", r, s)
	}
	noteToken(s.SessionURL)
	return &s
}
