package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

const (
	testToken  = "admin-test-token"
	testLinkID = "7b0c3c52-9a57-4a43-9d55-1f2f5f0b3c11"
	testURL    = "http://dl.test/d/AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
)

// seen is one request the fake admin API received.
type seen struct {
	Method, URI, Auth, ContentType, IdempotencyKey string
	ContentLength                                  int64 // -1: chunked
	Body                                           string
}

// fakeAdmin stands in for the admin API. Respond answers every request; it
// defaults to well-formed answers and tests replace it to inject failures.
type fakeAdmin struct {
	URL     string
	Respond func(r *http.Request, body []byte) (status int, contentType, answer string)

	mu   sync.Mutex
	seen []seen
}

// MustFakeAdmin starts a fake admin API for the test.
func MustFakeAdmin(tb testing.TB) *fakeAdmin {
	tb.Helper()
	f := &fakeAdmin{Respond: answerLikeTheGateway}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.seen = append(f.seen, seen{
			Method: r.Method, URI: r.RequestURI, Auth: r.Header.Get("Authorization"),
			ContentType: r.Header.Get("Content-Type"), IdempotencyKey: r.Header.Get("Idempotency-Key"),
			ContentLength: r.ContentLength, Body: string(body),
		})
		respond := f.Respond
		f.mu.Unlock()
		status, ctype, answer := respond(r, body)
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		io.WriteString(w, answer)
	}))
	tb.Cleanup(srv.Close)
	f.URL = srv.URL
	return f
}

func (f *fakeAdmin) requests() []seen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]seen(nil), f.seen...)
}

func (f *fakeAdmin) respondWith(status int, ctype, answer string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.Respond = func(*http.Request, []byte) (int, string, string) { return status, ctype, answer }
}

// helloSHA256 is the SHA-256 of "hello, world\n".
const helloSHA256 = "853ff93762a06ddbf722c4ebe9ddd66d8f63ddaea97f521c3ecc20da7c976020"

// linkAnswer is the link every successful link call returns.
const linkAnswer = `{"id":"` + testLinkID + `","url":"` + testURL + `","named_url":"` + testURL + `/hello.txt","token":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",` +
	`"downloads":3,"remaining":5,"expires_at":"2030-01-02T03:04:05Z","delivery":"stream","account_id":null,` +
	`"object":{"bucket":"default","key":"hello.txt","version_id":"v-7","size":13,"etag":"\"e\"","content_type":"text/plain",` +
	`"sha256":"` + helloSHA256 + `"},` +
	`"revoked_at":null,"grants":{"granted":1},"active_sessions":0}`

func answerLikeTheGateway(r *http.Request, body []byte) (int, string, string) {
	switch {
	case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/objects/"):
		key := strings.TrimPrefix(r.URL.Path, "/v1/objects/")
		return http.StatusCreated, "application/json",
			fmt.Sprintf(`{"bucket":"default","key":%q,"version_id":"v-7","size":%d,"etag":"\"e\"","sha256":"%x"}`, key, len(body), sha256.Sum256(body))
	case r.Method == http.MethodPost && r.URL.Path == "/v1/links":
		return http.StatusCreated, "application/json", linkAnswer
	case strings.HasPrefix(r.URL.Path, "/v1/links/"+testLinkID):
		return http.StatusOK, "application/json", linkAnswer
	}
	return http.StatusNotFound, "application/problem+json", `{"type":"about:blank","title":"Not Found"}`
}

// adminEnv points the CLI at the fake with the test token.
func adminEnv(f *fakeAdmin) map[string]string {
	return map[string]string{"GATEWAY_ADMIN_URL": f.URL, "GATEWAY_ADMIN_TOKEN": testToken}
}

// MustFile writes a file in dir and returns its path.
func MustFile(tb testing.TB, dir, name, content string, perm os.FileMode) string {
	tb.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		tb.Fatal(err)
	}
	return path
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestLinksCreate(t *testing.T) {
	dir := t.TempDir()
	hello := MustFile(t, dir, "hello.txt", "hello, world\n", 0o644)
	noExt := MustFile(t, dir, "README", "x", 0o644)
	bearer := "Bearer " + testToken
	createdAs := func(body string) seen {
		return seen{Method: "POST", URI: "/v1/links", Auth: bearer, ContentType: "application/json", ContentLength: int64(len(body)), Body: body}
	}
	// The fake is a gateway without resumable uploads: it answers their
	// creation 404, and the file goes in one PUT (upload_test.go has the
	// gateway's tus endpoint).
	tusProbe := seen{Method: "POST", URI: "/v1/uploads/", Auth: bearer}

	tests := []struct {
		name       string
		args       []string
		want       []seen
		wantStdout string
		wantStderr string
	}{
		{
			name: "ExistingKey",
			args: []string{"reports/q1.pdf", "--downloads", "3", "--expires-in", "7d"},
			want: []seen{createdAs(`{"object":{"key":"reports/q1.pdf"},"downloads":3,"expires_in":604800,"delivery":"stream"}`)},
		},
		{
			name: "KeyWithEveryFlag",
			args: []string{"--downloads=2", "--expires-in", "90m", "--account", "acct-1", "--delivery", "session",
				"--filename", "Q1 report.pdf", "--bucket", "archive", "--confirm", "reports/q1.pdf"},
			want: []seen{createdAs(`{"object":{"key":"reports/q1.pdf","bucket":"archive"},"downloads":2,"expires_in":5400,` +
				`"account_id":"acct-1","filename":"Q1 report.pdf","delivery":"session","confirm":true}`)},
		},
		{
			name: "Retries",
			args: []string{"film.mkv", "--downloads", "1", "--expires-in", "24h", "--retries", "2"},
			want: []seen{createdAs(`{"object":{"key":"film.mkv"},"downloads":1,"expires_in":86400,"delivery":"stream","retries":2}`)},
		},
		{
			name: "IdempotencyKey",
			args: []string{"k", "--downloads", "1", "--expires-in", "1500ms", "--idempotency-key", "order-77"},
			want: []seen{{Method: "POST", URI: "/v1/links", Auth: bearer, ContentType: "application/json", IdempotencyKey: "order-77",
				ContentLength: 71, Body: `{"object":{"key":"k"},"downloads":1,"expires_in":2,"delivery":"stream"}`}},
		},
		{
			name: "AMissingRelativeNameIsAKey",
			args: []string{"reports/q3.pdf", "--downloads", "1", "--expires-in", "1h"},
			want: []seen{createdAs(`{"object":{"key":"reports/q3.pdf"},"downloads":1,"expires_in":3600,"delivery":"stream"}`)},
		},
		{
			name: "LocalFileUploadedAndPinned",
			args: []string{"--downloads", "3", hello, "--expires-in", "24h"},
			want: []seen{
				tusProbe,
				{Method: "PUT", URI: "/v1/objects/hello.txt", Auth: bearer, ContentType: "text/plain; charset=utf-8", ContentLength: 13, Body: "hello, world\n"},
				createdAs(`{"object":{"key":"hello.txt","bucket":"default","version_id":"v-7"},"downloads":3,"expires_in":86400,` +
					`"filename":"hello.txt","delivery":"stream"}`),
			},
			wantStderr: fmt.Sprintf("uploaded %s as \"hello.txt\" (13 bytes, version v-7, sha256 %s)\n", hello, helloSHA256),
		},
		{
			name: "LocalFileKeepsExplicitFilename",
			args: []string{hello, "--downloads", "1", "--expires-in", "1h", "--filename", "greeting.txt"},
			want: []seen{
				tusProbe,
				{Method: "PUT", URI: "/v1/objects/hello.txt", Auth: bearer, ContentType: "text/plain; charset=utf-8", ContentLength: 13, Body: "hello, world\n"},
				createdAs(`{"object":{"key":"hello.txt","bucket":"default","version_id":"v-7"},"downloads":1,"expires_in":3600,` +
					`"filename":"greeting.txt","delivery":"stream"}`),
			},
			wantStderr: "uploaded",
		},
		{
			name: "UnknownExtensionIsOctetStream",
			args: []string{noExt, "--downloads", "1", "--expires-in", "1h"},
			want: []seen{
				tusProbe,
				{Method: "PUT", URI: "/v1/objects/README", Auth: bearer, ContentType: "application/octet-stream", ContentLength: 1, Body: "x"},
				createdAs(`{"object":{"key":"README","bucket":"default","version_id":"v-7"},"downloads":1,"expires_in":3600,` +
					`"filename":"README","delivery":"stream"}`),
			},
			wantStderr: "uploaded",
		},
		{
			name: "FlagsAfterDoubleDash",
			args: []string{"--downloads", "1", "--expires-in", "1h", "--", "-odd-key"},
			want: []seen{createdAs(`{"object":{"key":"-odd-key"},"downloads":1,"expires_in":3600,"delivery":"stream"}`)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := MustFakeAdmin(t)
			r := MustRun(t, adminEnv(f), append([]string{"links", "create"}, tt.args...)...)
			if r.err != nil {
				t.Fatalf("links create %q = %v", tt.args, r.err)
			}
			got := f.requests()
			if len(got) != len(tt.want) {
				t.Fatalf("requests = %+v\nwant %+v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("request %d = %+v\nwant %+v", i, got[i], tt.want[i])
				}
			}
			if r.stdout != testURL+"/hello.txt\n" {
				t.Errorf("stdout = %q, want the named link URL", r.stdout)
			}
			// The upload note (if any) comes first, then the link's id line.
			wantIDLine := "link 7b0c3c52-9a57-4a43-9d55-1f2f5f0b3c11: 3 downloads, expires 2030-01-02T03:04:05Z\n"
			if !strings.HasPrefix(r.stderr, tt.wantStderr) || !strings.HasSuffix(r.stderr, wantIDLine) ||
				len(r.stderr) < len(tt.wantStderr)+len(wantIDLine) {
				t.Errorf("stderr = %q, want %q followed by %q", r.stderr, tt.wantStderr, wantIDLine)
			}
		})
	}
}

func TestLinksCreateJSON(t *testing.T) {
	f := MustFakeAdmin(t)
	r := MustRun(t, adminEnv(f), "links", "create", "k", "--downloads", "1", "--expires-in", "1h", "--json")
	if r.err != nil {
		t.Fatal(r.err)
	}
	var want bytes.Buffer
	json.Indent(&want, []byte(linkAnswer), "", "  ")
	if r.stdout != want.String()+"\n" {
		t.Errorf("stdout = %s\nwant %s", r.stdout, want.String())
	}
}

func TestAdminURLAndTokenResolution(t *testing.T) {
	f := MustFakeAdmin(t)
	u, _ := url.Parse(f.URL)
	dataDir := t.TempDir()
	MustFile(t, dataDir, "admin-token", "file-token\n", 0o600)
	looseDir := t.TempDir()
	MustFile(t, looseDir, "admin-token", "file-token\n", 0o644)

	tests := []struct {
		name     string
		args     []string
		env      map[string]string
		wantAuth string
		wantErr  string
	}{
		{"Flags", []string{"--admin-url", f.URL, "--admin-token", "flag-token"}, nil, "Bearer flag-token", ""},
		{"Environment", nil, map[string]string{"GATEWAY_ADMIN_URL": f.URL, "GATEWAY_ADMIN_TOKEN": "env-token"}, "Bearer env-token", ""},
		{"FlagsOverEnvironment", []string{"--admin-url", f.URL, "--admin-token", "flag-token"},
			map[string]string{"GATEWAY_ADMIN_URL": "http://" + closedAddr(t), "GATEWAY_ADMIN_TOKEN": "env-token"}, "Bearer flag-token", ""},
		{"EmbeddedDefault", nil, map[string]string{"GATEWAY_ADMIN_LISTEN": u.Host, "GATEWAY_DATA_DIR": dataDir}, "Bearer file-token", ""},
		{"WildcardAdminListen", nil, map[string]string{"GATEWAY_ADMIN_LISTEN": ":" + u.Port(), "GATEWAY_DATA_DIR": dataDir}, "Bearer file-token", ""},
		{"NoTokenAnywhere", nil, map[string]string{"GATEWAY_ADMIN_URL": f.URL, "GATEWAY_DATA_DIR": t.TempDir()}, "",
			"gateway: no admin token: pass --admin-token, set GATEWAY_ADMIN_TOKEN, or run where"},
		{"LooseTokenFile", nil, map[string]string{"GATEWAY_ADMIN_URL": f.URL, "GATEWAY_DATA_DIR": looseDir}, "",
			"gateway: config: " + filepath.Join(looseDir, "admin-token") + ": mode 0644 lets group or others read it"},
		{"InvalidAdminURL", []string{"--admin-url", "127.0.0.1:8081"}, map[string]string{"GATEWAY_ADMIN_TOKEN": "t"}, "",
			`gateway: invalid admin API URL "127.0.0.1:8081"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(f.requests())
			r := MustRun(t, tt.env, append([]string{"links", "show", testLinkID}, tt.args...)...)
			if tt.wantErr != "" {
				if r.code != 1 || !strings.HasPrefix(r.line, tt.wantErr) {
					t.Errorf("reported %q (exit %d), want %q (exit 1)", r.line, r.code, tt.wantErr)
				}
				return
			}
			if r.err != nil {
				t.Fatal(r.err)
			}
			got := f.requests()[before:]
			if len(got) != 1 || got[0].Auth != tt.wantAuth {
				t.Errorf("requests = %+v, want one with Authorization %q", got, tt.wantAuth)
			}
		})
	}
}

func TestLinksCreateErrors(t *testing.T) {
	dir := t.TempDir()
	hello := MustFile(t, dir, "hello.txt", "hello, world\n", 0o644)
	valid := []string{"--downloads", "1", "--expires-in", "1h"}
	problem := func(status int, body string) func(*fakeAdmin) {
		return func(f *fakeAdmin) { f.respondWith(status, "application/problem+json", body) }
	}

	tests := []struct {
		name      string
		args      []string
		env       func(*fakeAdmin) map[string]string // nil: adminEnv
		setup     func(*fakeAdmin)
		wantCode  int
		wantLine  string
		wantCalls int
	}{
		{"MissingDownloads", []string{"k", "--expires-in", "1h"}, nil, nil, 2, "gateway: links create: --downloads is required", 0},
		{"ZeroDownloads", []string{"k", "--downloads", "0", "--expires-in", "1h"}, nil, nil, 2, "gateway: links create: --downloads must be at least 1, got 0", 0},
		{"NegativeDownloads", []string{"k", "--downloads=-2", "--expires-in", "1h"}, nil, nil, 2, "gateway: links create: --downloads must be at least 1, got -2", 0},
		{"DownloadsNotANumber", []string{"k", "--downloads", "many", "--expires-in", "1h"}, nil, nil, 2, `gateway: links create: invalid value "many" for flag --downloads`, 0},
		{"MissingExpiresIn", []string{"k", "--downloads", "1"}, nil, nil, 2, "gateway: links create: --expires-in is required", 0},
		{"ZeroExpiresIn", []string{"k", "--downloads", "1", "--expires-in", "0s"}, nil, nil, 2, `gateway: links create: --expires-in: must be positive, got "0s"`, 0},
		{"NegativeExpiresIn", []string{"k", "--downloads", "1", "--expires-in", "-1h"}, nil, nil, 2, `gateway: links create: --expires-in: must be positive, got "-1h"`, 0},
		{"ZeroDays", []string{"k", "--downloads", "1", "--expires-in", "0d"}, nil, nil, 2, `gateway: links create: --expires-in: must be positive, got "0d"`, 0},
		{"ExpiresInGarbage", []string{"k", "--downloads", "1", "--expires-in", "7days"}, nil, nil, 2, `gateway: links create: --expires-in: invalid duration "7days"`, 0},
		{"NoArgument", valid, nil, nil, 2, "gateway: links create: want one FILE_OR_KEY argument, got 0", 0},
		{"TwoArguments", append([]string{"a", "b"}, valid...), nil, nil, 2, "gateway: links create: want one FILE_OR_KEY argument, got 2", 0},
		{"BadDelivery", append([]string{"k", "--delivery", "fast"}, valid...), nil, nil, 2, `gateway: links create: --delivery must be "stream" or "session", got "fast"`, 0},
		{"UnknownFlag", append([]string{"k", "--downloads-max", "3"}, valid...), nil, nil, 2, "gateway: links create: unknown flag --downloads-max", 0},
		{"TooManyRetries", append([]string{"k", "--retries", "11"}, valid...), nil, nil, 2, "gateway: links create: --retries must be between 0 and 10, got 11", 0},
		{"NegativeRetries", append([]string{"k", "--retries=-1"}, valid...), nil, nil, 2, "gateway: links create: --retries must be between 0 and 10, got -1", 0},
		{"RetriesOfASession", append([]string{"k", "--retries", "1", "--delivery", "session"}, valid...), nil, nil, 2, "gateway: links create: --retries applies to stream links", 0},
		{"BucketWithUpload", append([]string{hello, "--bucket", "b"}, valid...), nil, nil, 2, "gateway: links create: --bucket applies to existing object keys", 0},
		{"MissingLocalFile", append([]string{"./no-such-file.iso"}, valid...), nil, nil, 1, "gateway: links create: ./no-such-file.iso: no such file", 0},
		{"MissingAbsoluteFile", append([]string{dir + "/gone.bin"}, valid...), nil, nil, 1, "gateway: links create: " + dir + "/gone.bin: no such file", 0},
		{"ADirectory", append([]string{dir}, valid...), nil, nil, 1, "gateway: links create: " + dir + ": is a directory, not a file", 0},
		{"AccountTheServerWouldRefuse", append([]string{hello, "--account", strings.Repeat("a", 256)}, valid...), nil, nil, 2, "gateway: links create: --account must be at most 255 bytes", 0},
		{"AccountOfTooManyBytes", append([]string{hello, "--account", strings.Repeat("é", 128)}, valid...), nil, nil, 2, "gateway: links create: --account must be at most 255 bytes", 0},
		{"FilenameTheServerWouldRefuse", append([]string{hello, "--filename", strings.Repeat("é", 1025)}, valid...), nil, nil, 2, "gateway: links create: --filename must be at most 1024 characters", 0},
		{"LifetimeTheServerWouldRefuse", []string{hello, "--downloads", "1", "--expires-in", "4000d"}, nil, nil, 2, "gateway: links create: --expires-in must be at most 10 years", 0},
		{"MissingKey", append([]string{"no/such/key"}, valid...), nil,
			problem(422, `{"type":"https://dlgate.dev/problems/object-not-found","title":"Object not found","detail":"no object \"no/such/key\""}`),
			1, `gateway: admin API: 422 Object not found: no object "no/such/key"`, 1},
		{"Unauthorized", append([]string{"k"}, valid...), nil, problem(401, `{"type":"about:blank","title":"Unauthorized","status":401}`),
			1, "gateway: admin API: 401 Unauthorized", 1},
		{"UnauthorizedWithoutBody", append([]string{"k"}, valid...), nil, func(f *fakeAdmin) { f.respondWith(401, "text/plain", "") },
			1, "gateway: admin API: 401 Unauthorized", 1},
		{"UploadFails", append([]string{hello}, valid...), nil, problem(503, `{"title":"Store unavailable"}`),
			1, "gateway: uploading " + hello + ": admin API: 503 Store unavailable", 1},
		{"Unreachable", append([]string{"k"}, valid...),
			func(*fakeAdmin) map[string]string {
				return map[string]string{"GATEWAY_ADMIN_URL": "http://" + closedAddr(t), "GATEWAY_ADMIN_TOKEN": "t"}
			}, nil, 1, "gateway: admin API at 127.0.0.1:", 0},
		{"UnreachableUpload", append([]string{hello}, valid...),
			func(*fakeAdmin) map[string]string {
				return map[string]string{"GATEWAY_ADMIN_URL": "http://" + closedAddr(t), "GATEWAY_ADMIN_TOKEN": "t"}
			}, nil, 1, "gateway: uploading " + hello + ": admin API at 127.0.0.1:", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := MustFakeAdmin(t)
			if tt.setup != nil {
				tt.setup(f)
			}
			env := adminEnv(f)
			if tt.env != nil {
				env = tt.env(f)
			}
			r := MustRun(t, env, append([]string{"links", "create"}, tt.args...)...)
			if r.code != tt.wantCode || !strings.HasPrefix(r.line, tt.wantLine) {
				t.Errorf("links create %q reported %q (exit %d), want %q (exit %d)", tt.args, r.line, r.code, tt.wantLine, tt.wantCode)
			}
			if n := len(f.requests()); n != tt.wantCalls {
				t.Errorf("links create %q sent %d requests, want %d", tt.args, n, tt.wantCalls)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing on failure", r.stdout)
			}
		})
	}
}

func TestLinksShowRevokeTopUp(t *testing.T) {
	var indented bytes.Buffer
	json.Indent(&indented, []byte(linkAnswer), "", "  ")
	bearer := "Bearer " + testToken
	upper := strings.ToUpper(testLinkID)

	tests := []struct {
		name       string
		args       []string
		want       seen
		wantStdout string
	}{
		{"Show", []string{"show", testLinkID},
			seen{Method: "GET", URI: "/v1/links/" + testLinkID, Auth: bearer}, indented.String() + "\n"},
		{"ShowCanonicalizesID", []string{"show", upper},
			seen{Method: "GET", URI: "/v1/links/" + testLinkID, Auth: bearer}, indented.String() + "\n"},
		{"Revoke", []string{"revoke", testLinkID},
			seen{Method: "POST", URI: "/v1/links/" + testLinkID + "/revoke", Auth: bearer}, "link " + testLinkID + " revoked\n"},
		{"RevokeJSON", []string{"revoke", "--json", testLinkID},
			seen{Method: "POST", URI: "/v1/links/" + testLinkID + "/revoke", Auth: bearer}, indented.String() + "\n"},
		{"TopUp", []string{"top-up", testLinkID, "2"},
			seen{Method: "POST", URI: "/v1/links/" + testLinkID + "/allowance", Auth: bearer, ContentType: "application/json", ContentLength: 9, Body: `{"add":2}`},
			"link " + testLinkID + ": 2 downloads added, 5 remaining\n"},
		{"TopUpWithReason", []string{"top-up", "--reason", "ticket 42", testLinkID, "3"},
			seen{Method: "POST", URI: "/v1/links/" + testLinkID + "/allowance", Auth: bearer, ContentType: "application/json", ContentLength: 30, Body: `{"add":3,"reason":"ticket 42"}`},
			"link " + testLinkID + ": 3 downloads added, 5 remaining\n"},
		{"TopUpReasonLast", []string{"top-up", testLinkID, "3", "--reason=ticket 42", "--json"},
			seen{Method: "POST", URI: "/v1/links/" + testLinkID + "/allowance", Auth: bearer, ContentType: "application/json", ContentLength: 30, Body: `{"add":3,"reason":"ticket 42"}`},
			indented.String() + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := MustFakeAdmin(t)
			r := MustRun(t, adminEnv(f), append([]string{"links"}, tt.args...)...)
			if r.err != nil {
				t.Fatalf("links %q = %v", tt.args, r.err)
			}
			if got := f.requests(); len(got) != 1 || got[0] != tt.want {
				t.Errorf("requests = %+v\nwant [%+v]", got, tt.want)
			}
			if r.stdout != tt.wantStdout {
				t.Errorf("stdout = %q\nwant %q", r.stdout, tt.wantStdout)
			}
		})
	}
}

func TestLinksShowRevokeTopUpErrors(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		status    int // the fake's answer; 0 for the default
		wantCode  int
		wantLine  string
		wantCalls int
	}{
		{"ShowWithoutID", []string{"show"}, 0, 2, "gateway: links show: want ID, got 0 argument(s)", 0},
		{"ShowTwoIDs", []string{"show", testLinkID, testLinkID}, 0, 2, "gateway: links show: want ID, got 2 argument(s)", 0},
		{"ShowNotAUUID", []string{"show", "../../v1/objects"}, 0, 2, `gateway: links show: invalid link id "../../v1/objects": want a UUID`, 0},
		{"ShowUnknownFlag", []string{"show", testLinkID, "--verbose"}, 0, 2, "gateway: links show: unknown flag --verbose", 0},
		{"ShowNotFound", []string{"show", "00000000-0000-0000-0000-000000000000"}, 0, 1, "gateway: admin API: 404 Not Found", 1},
		{"RevokeWithoutID", []string{"revoke"}, 0, 2, "gateway: links revoke: want ID, got 0 argument(s)", 0},
		{"RevokeUnauthorized", []string{"revoke", testLinkID}, 401, 1, "gateway: admin API: 401 Unauthorized", 1},
		{"TopUpWithoutN", []string{"top-up", testLinkID}, 0, 2, "gateway: links top-up: want ID and N, got 1 argument(s)", 0},
		{"TopUpZero", []string{"top-up", testLinkID, "0"}, 0, 2, `gateway: links top-up: N must be a whole number of at least 1, got "0"`, 0},
		{"TopUpNotANumber", []string{"top-up", testLinkID, "two"}, 0, 2, `gateway: links top-up: N must be a whole number of at least 1, got "two"`, 0},
		{"TopUpServerRefuses", []string{"top-up", testLinkID, "1"}, 409, 1, "gateway: admin API: 409 Conflict", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := MustFakeAdmin(t)
			if tt.status != 0 {
				f.respondWith(tt.status, "application/problem+json", fmt.Sprintf(`{"title":%q}`, http.StatusText(tt.status)))
			}
			r := MustRun(t, adminEnv(f), append([]string{"links"}, tt.args...)...)
			if r.code != tt.wantCode || !strings.HasPrefix(r.line, tt.wantLine) {
				t.Errorf("links %q reported %q (exit %d), want %q (exit %d)", tt.args, r.line, r.code, tt.wantLine, tt.wantCode)
			}
			if n := len(f.requests()); n != tt.wantCalls {
				t.Errorf("links %q sent %d requests, want %d", tt.args, n, tt.wantCalls)
			}
		})
	}
}

func TestParseLifetime(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{"7d", 7 * 24 * time.Hour, false},
		{"1d", 24 * time.Hour, false},
		{"36h", 36 * time.Hour, false},
		{"90m", 90 * time.Minute, false},
		{"1h30m", 90 * time.Minute, false},
		{"1ns", time.Nanosecond, false},
		{"0d", 0, true},
		{"-1d", 0, true},
		{"0", 0, true},
		{"-5m", 0, true},
		{"d", 0, true},
		{"1.5d", 0, true},
		{"7days", 0, true},
		{"99999999999d", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := parseLifetime(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("parseLifetime(%q) = %v, %v, want %v, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseArgsIntersperses(t *testing.T) {
	tests := []struct {
		args     []string
		wantPos  []string
		wantN    int
		wantJSON bool
	}{
		{[]string{"a", "-n", "1"}, []string{"a"}, 1, false},
		{[]string{"-n", "1", "a"}, []string{"a"}, 1, false},
		{[]string{"a", "--json", "b", "-n=2"}, []string{"a", "b"}, 2, true},
		{[]string{"--", "-n", "5"}, []string{"-n", "5"}, 0, false},
		{[]string{"a", "--", "--json"}, []string{"a", "--json"}, 0, false},
		{[]string{"-"}, []string{"-"}, 0, false},
		{nil, nil, 0, false},
	}
	for _, tt := range tests {
		fs := newFlagSet("test")
		n := fs.Int("n", 0, "")
		asJSON := fs.Bool("json", false, "")
		pos, err := parseArgs(fs, tt.args)
		if err != nil || fmt.Sprint(pos) != fmt.Sprint(tt.wantPos) || *n != tt.wantN || *asJSON != tt.wantJSON {
			t.Errorf("parseArgs(%q) = %q, n=%d, json=%v, %v; want %q, n=%d, json=%v", tt.args, pos, *n, *asJSON, err, tt.wantPos, tt.wantN, tt.wantJSON)
		}
	}
}
