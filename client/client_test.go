package client

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// request is what the fake admin API saw.
type request struct {
	Method, URI, Auth, ContentType, IdempotencyKey string
	ContentLength                                  int64
	Body                                           string
}

// fakeAPI records every request and answers with status, contentType and
// body.
type fakeAPI struct {
	mu          sync.Mutex
	status      int
	contentType string
	body        string
	got         []request
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, request{
		Method: r.Method, URI: r.RequestURI, Auth: r.Header.Get("Authorization"),
		ContentType: r.Header.Get("Content-Type"), IdempotencyKey: r.Header.Get("Idempotency-Key"),
		ContentLength: r.ContentLength, Body: string(b),
	})
	if f.contentType != "" {
		w.Header().Set("Content-Type", f.contentType)
	}
	w.WriteHeader(f.status)
	io.WriteString(w, f.body)
}

// MustFakeAPI starts a fake admin API answering status with a JSON body,
// and a Client for it with the token "tok".
func MustFakeAPI(tb testing.TB, status int, body string) (*fakeAPI, *Client) {
	tb.Helper()
	f := &fakeAPI{status: status, contentType: "application/json", body: body}
	srv := httptest.NewServer(f)
	tb.Cleanup(srv.Close)
	return f, New(srv.URL+"/", "tok", srv.Client())
}

// onlyRequest returns the single request the fake saw.
func (f *fakeAPI) onlyRequest(tb testing.TB) request {
	tb.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.got) != 1 {
		tb.Fatalf("fake API saw %d requests, want 1", len(f.got))
	}
	return f.got[0]
}

const linkJSON = `{"id":"7b0c3c52-9a57-4a43-9d55-1f2f5f0b3c11","url":"http://dl/d/tok","token":"tok",
"downloads":3,"remaining":2,"expires_at":"2030-01-02T03:04:05Z","delivery":"session","account_id":null,
"object":{"bucket":"b","key":"k","version_id":"v1","size":10,"etag":"\"e\"","content_type":"text/plain"},
"session":{"ttl":3600,"byte_budget":1048576,"max_concurrency":4},
"revoked_at":"2030-01-01T00:00:00Z","grants":{"granted":1,"refunded":0},"active_sessions":1,"future_field":true}`

func TestPutObject(t *testing.T) {
	tests := []struct {
		key, wantURI string
	}{
		{"report.pdf", "/v1/objects/report.pdf"},
		{"dir/sub/a b.txt", "/v1/objects/dir/sub/a%20b.txt"},
		{"q?x#y%z", "/v1/objects/q%3Fx%23y%25z"},
		{"ünï/cödé", "/v1/objects/%C3%BCn%C3%AF/c%C3%B6d%C3%A9"},
	}
	for _, tt := range tests {
		t.Run(tt.key, func(t *testing.T) {
			f, c := MustFakeAPI(t, http.StatusCreated, `{"bucket":"b","key":"k","version_id":"v9","size":5,"etag":"\"x\""}`)
			obj, err := c.PutObject(context.Background(), tt.key, strings.NewReader("hello"), 5, "text/plain")
			if err != nil {
				t.Fatal(err)
			}
			want := Object{Bucket: "b", Key: "k", VersionID: "v9", Size: 5, ETag: `"x"`}
			if obj != want {
				t.Errorf("PutObject = %+v, want %+v", obj, want)
			}
			got := f.onlyRequest(t)
			wantReq := request{Method: "PUT", URI: tt.wantURI, Auth: "Bearer tok", ContentType: "text/plain", ContentLength: 5, Body: "hello"}
			if got != wantReq {
				t.Errorf("request = %+v, want %+v", got, wantReq)
			}
		})
	}
}

func TestPutObjectDoesNotCloseBody(t *testing.T) {
	_, c := MustFakeAPI(t, http.StatusCreated, `{}`)
	body := &closeRecorder{Reader: strings.NewReader("x")}
	if _, err := c.PutObject(context.Background(), "k", body, 1, ""); err != nil {
		t.Fatal(err)
	}
	if body.closed {
		t.Error("PutObject closed the caller's body")
	}
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestPutObjectRefusesKeysAPathCannotCarry(t *testing.T) {
	for _, key := range []string{"", "/abs", "a//b", "a/./b", "../x", "dir/"} {
		f, c := MustFakeAPI(t, http.StatusCreated, `{}`)
		if _, err := c.PutObject(context.Background(), key, strings.NewReader(""), 0, ""); err == nil || !strings.Contains(err.Error(), "invalid object key") {
			t.Errorf("PutObject(%q) = %v, want invalid object key", key, err)
		}
		if len(f.got) != 0 {
			t.Errorf("PutObject(%q) sent a request", key)
		}
	}
}

func TestCreateLink(t *testing.T) {
	tests := []struct {
		name     string
		req      CreateLinkRequest
		wantBody string
		wantKey  string
	}{
		{
			name:     "Minimal",
			req:      CreateLinkRequest{Object: ObjectRef{Key: "k"}, Downloads: 1, ExpiresIn: 60},
			wantBody: `{"object":{"key":"k"},"downloads":1,"expires_in":60}`,
		},
		{
			name: "Everything",
			req: CreateLinkRequest{
				Object:    ObjectRef{Key: "k", Bucket: "b", VersionID: "v"},
				Downloads: 3, ExpiresAt: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
				AccountID: "acct", Filename: "f.pdf", Delivery: "session", Confirm: true,
				Session:        &SessionSettings{TTL: 600, ByteBudget: 100, MaxConcurrency: 2},
				IdempotencyKey: "retry-1",
			},
			wantBody: `{"object":{"key":"k","bucket":"b","version_id":"v"},"downloads":3,"expires_at":"2030-01-02T03:04:05Z",` +
				`"account_id":"acct","filename":"f.pdf","delivery":"session","confirm":true,` +
				`"session":{"ttl":600,"byte_budget":100,"max_concurrency":2}}`,
			wantKey: "retry-1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := MustFakeAPI(t, http.StatusCreated, linkJSON)
			l, err := c.CreateLink(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			got := f.onlyRequest(t)
			want := request{Method: "POST", URI: "/v1/links", Auth: "Bearer tok", ContentType: "application/json",
				IdempotencyKey: tt.wantKey, ContentLength: int64(len(tt.wantBody)), Body: tt.wantBody}
			if got != want {
				t.Errorf("request = %+v\nwant %+v", got, want)
			}
			if l.ID != "7b0c3c52-9a57-4a43-9d55-1f2f5f0b3c11" || l.URL != "http://dl/d/tok" || string(l.Raw) != linkJSON {
				t.Errorf("CreateLink = %+v, want the decoded answer with Raw", l)
			}
		})
	}
}

func TestLinkDecodesEveryField(t *testing.T) {
	_, c := MustFakeAPI(t, http.StatusOK, linkJSON)
	l, err := c.GetLink(context.Background(), "7b0c3c52-9a57-4a43-9d55-1f2f5f0b3c11")
	if err != nil {
		t.Fatal(err)
	}
	revoked := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	switch {
	case l.Downloads != 3, l.Remaining != 2, !l.ExpiresAt.Equal(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)),
		l.Delivery != "session", l.AccountID != "", l.Token != "tok",
		l.Object != LinkObject{Bucket: "b", Key: "k", VersionID: "v1", Size: 10, ETag: `"e"`, ContentType: "text/plain"},
		l.Session == nil || *l.Session != SessionSettings{TTL: 3600, ByteBudget: 1 << 20, MaxConcurrency: 4},
		l.RevokedAt == nil || !l.RevokedAt.Equal(revoked),
		l.Grants["granted"] != 1, l.ActiveSessions != 1:
		t.Errorf("GetLink = %+v, want every field of %s", l, linkJSON)
	}
}

func TestLinkCalls(t *testing.T) {
	tests := []struct {
		name string
		call func(*Client) (Link, error)
		want request
	}{
		{"Get", func(c *Client) (Link, error) { return c.GetLink(context.Background(), "id-1") },
			request{Method: "GET", URI: "/v1/links/id-1", Auth: "Bearer tok"}},
		{"GetEscapesID", func(c *Client) (Link, error) { return c.GetLink(context.Background(), "a/b") },
			request{Method: "GET", URI: "/v1/links/a%2Fb", Auth: "Bearer tok"}},
		{"Revoke", func(c *Client) (Link, error) { return c.RevokeLink(context.Background(), "id-1") },
			request{Method: "POST", URI: "/v1/links/id-1/revoke", Auth: "Bearer tok"}},
		{"AddAllowance", func(c *Client) (Link, error) {
			return c.AddAllowance(context.Background(), "id-1", 5, "support ticket 42")
		},
			request{Method: "POST", URI: "/v1/links/id-1/allowance", Auth: "Bearer tok", ContentType: "application/json",
				ContentLength: 38, Body: `{"add":5,"reason":"support ticket 42"}`}},
		{"AddAllowanceWithoutReason", func(c *Client) (Link, error) { return c.AddAllowance(context.Background(), "id-1", 1, "") },
			request{Method: "POST", URI: "/v1/links/id-1/allowance", Auth: "Bearer tok", ContentType: "application/json",
				ContentLength: 9, Body: `{"add":1}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := MustFakeAPI(t, http.StatusOK, linkJSON)
			l, err := tt.call(c)
			if err != nil {
				t.Fatal(err)
			}
			if got := f.onlyRequest(t); got != tt.want {
				t.Errorf("request = %+v\nwant %+v", got, tt.want)
			}
			if l.Remaining != 2 {
				t.Errorf("answer not decoded: %+v", l)
			}
		})
	}
}

func TestEmptyAnswerIsNoError(t *testing.T) {
	f, c := MustFakeAPI(t, http.StatusNoContent, "")
	f.contentType = ""
	if _, err := c.RevokeLink(context.Background(), "id-1"); err != nil {
		t.Errorf("RevokeLink with 204 = %v, want nil", err)
	}
}

func TestMissingIDSendsNothing(t *testing.T) {
	f, c := MustFakeAPI(t, http.StatusOK, linkJSON)
	for name, call := range map[string]func() (Link, error){
		"GetLink":      func() (Link, error) { return c.GetLink(context.Background(), "") },
		"RevokeLink":   func() (Link, error) { return c.RevokeLink(context.Background(), "") },
		"AddAllowance": func() (Link, error) { return c.AddAllowance(context.Background(), "", 1, "") },
	} {
		if _, err := call(); err == nil {
			t.Errorf("%s(\"\") = nil error", name)
		}
	}
	if len(f.got) != 0 {
		t.Errorf("sent %d requests, want none", len(f.got))
	}
}

func TestAPIErrors(t *testing.T) {
	tests := []struct {
		name        string
		status      int
		contentType string
		body        string
		want        Error
		wantMsg     string
	}{
		{"Problem", 422, "application/problem+json",
			`{"type":"https://dlgate.dev/problems/object-not-found","title":"Object not found","detail":"no object \"k\" in bucket \"b\"","status":422}`,
			Error{Status: 422, Type: "https://dlgate.dev/problems/object-not-found", Title: "Object not found", Detail: `no object "k" in bucket "b"`},
			`admin API: 422 Object not found: no object "k" in bucket "b"`},
		{"Unauthorized", 401, "application/problem+json", `{"type":"about:blank","title":"Unauthorized"}`,
			Error{Status: 401, Type: "about:blank", Title: "Unauthorized"},
			`admin API: 401 Unauthorized`},
		{"PlainText", 502, "text/html", "<html>\n<h1>bad gateway</h1>\n</html>",
			Error{Status: 502, Title: "Bad Gateway"},
			`admin API: 502 Bad Gateway`},
		{"InvalidProblem", 500, "application/problem+json", "{not json",
			Error{Status: 500, Title: "Internal Server Error"},
			`admin API: 500 Internal Server Error`},
		{"MultiLineDetail", 400, "application/problem+json", `{"title":"Bad request","detail":"line one\nline two"}`,
			Error{Status: 400, Title: "Bad request", Detail: "line one\nline two"},
			`admin API: 400 Bad request: line one line two`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := MustFakeAPI(t, tt.status, tt.body)
			f.contentType = tt.contentType
			_, err := c.GetLink(context.Background(), "id")
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("GetLink = %v, want *Error", err)
			}
			if *e != tt.want {
				t.Errorf("error = %+v, want %+v", *e, tt.want)
			}
			if err.Error() != tt.wantMsg {
				t.Errorf("Error() = %q, want %q", err.Error(), tt.wantMsg)
			}
		})
	}
}

func TestTransportErrorNamesOnlyTheHost(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	c := New("http://"+addr, "tok", nil)
	_, err = c.PutObject(context.Background(), "secret-dir/file.txt", strings.NewReader("x"), 1, "")
	if err == nil {
		t.Fatal("PutObject to a closed port = nil error")
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "admin API at "+addr+": ") || strings.Contains(msg, "secret-dir") || strings.Contains(msg, "\n") {
		t.Errorf("error = %q, want one line naming only %s", msg, addr)
	}
	var e *Error
	if errors.As(err, &e) {
		t.Errorf("transport error is an *Error: %v", err)
	}
}

func TestCanceledContext(t *testing.T) {
	_, c := MustFakeAPI(t, http.StatusOK, linkJSON)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.GetLink(ctx, "id"); !errors.Is(err, context.Canceled) {
		t.Errorf("GetLink with canceled context = %v, want context.Canceled", err)
	}
}

func TestInvalidBaseURL(t *testing.T) {
	for _, base := range []string{"", "127.0.0.1:8081", "ftp://h", "http://", "http://h:bad port"} {
		_, err := New(base, "tok", nil).GetLink(context.Background(), "id")
		if err == nil || !strings.Contains(err.Error(), "invalid admin API URL") {
			t.Errorf("New(%q).GetLink = %v, want invalid admin API URL", base, err)
		}
	}
}

func TestBaseURLWithPathPrefix(t *testing.T) {
	f := &fakeAPI{status: 200, contentType: "application/json", body: linkJSON}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	if _, err := New(srv.URL+"/admin/", "", nil).GetLink(context.Background(), "id"); err != nil {
		t.Fatal(err)
	}
	got := f.onlyRequest(t)
	if got.URI != "/admin/v1/links/id" || got.Auth != "" {
		t.Errorf("request = %+v, want /admin/v1/links/id without Authorization", got)
	}
}

func TestLinkJSONFieldNames(t *testing.T) {
	b, err := json.Marshal(Link{})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	json.Unmarshal(b, &m)
	for _, k := range []string{"id", "url", "token", "downloads", "remaining", "expires_at", "delivery", "account_id", "object", "session", "revoked_at", "grants", "active_sessions"} {
		if _, ok := m[k]; !ok {
			t.Errorf("Link has no JSON field %q", k)
		}
	}
}
