package gateway_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlgate/dlgate/internal/refusal"
	"github.com/dlgate/dlgate/storage"
)

func TestAdminRequiresTheBearerToken(t *testing.T) {
	h := MustHarness(t)
	routes := []struct{ method, path string }{
		{http.MethodPost, "/v1/links"},
		{http.MethodGet, "/v1/links"},
		{http.MethodGet, "/v1/links/x"},
		{http.MethodGet, "/v1/links/x/allowance"},
		{http.MethodPost, "/v1/links/x/revoke"},
		{http.MethodPost, "/v1/links/x/allowance"},
		{http.MethodGet, "/v1/links/x/grants"},
		{http.MethodDelete, "/v1/sessions/x"},
		{http.MethodPut, "/v1/objects/a.txt"},
		{http.MethodDelete, "/v1/objects/a.txt"},
		{http.MethodPost, "/v1/keys"},
		{http.MethodGet, "/v1/keys"},
		{http.MethodDelete, "/v1/keys/x"},
		{http.MethodGet, "/v1/audit"},
		{http.MethodGet, "/debug/pprof/"},
	}
	auths := []struct{ name, value string }{
		{"NoHeader", ""},
		{"WrongToken", "Bearer not-the-admin-token"},
		{"TokenPrefix", "Bearer " + testAdminToken[:len(testAdminToken)-1]},
		{"TokenPlusOne", "Bearer " + testAdminToken + "x"},
		{"BasicScheme", "Basic " + testAdminToken},
		{"BareToken", testAdminToken},
		{"UnknownKey", "Bearer " + unknownKey},
		{"MalformedKey", "Bearer dlk_" + strings.Repeat("A", 42) + "="},
	}
	for _, a := range auths {
		t.Run(a.name, func(t *testing.T) {
			// Each variant in a window of its own: more than 20 failures
			// from one address within 10 s are answered 429 instead
			// (throttle_test.go).
			h.Clock.Advance(refusal.AuthWindow)
			for _, r := range routes {
				req, _ := http.NewRequest(r.method, h.Admin.URL+r.path, strings.NewReader("{}"))
				if a.value != "" {
					req.Header.Set("Authorization", a.value)
				}
				resp, body := mustDo(t, http.DefaultClient, req)
				mustProblem(t, resp, body, http.StatusUnauthorized, "unauthorized")
				if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
					t.Errorf("%s %s: WWW-Authenticate = %q, want a Bearer challenge", r.method, r.path, got)
				}
			}
		})
	}
	// Only the one well-formed key was looked up, once per route.
	if n, lookups := h.Ledger.Calls(""), h.Ledger.Calls("KeyGetByHash"); n != lookups || lookups != len(routes) {
		t.Errorf("unauthorized requests made %d ledger calls, %d of them key lookups; want only %d lookups", n, lookups, len(routes))
	}
}

// unknownKey has the shape of an API key but is no key of any harness.
const unknownKey = "dlk_Zm9yZ2VkLWtleS1mb3ItdGVzdHMtMDEyMzQ1Njc4OWE"

func TestHealthReadinessAndMetricsNeedNoToken(t *testing.T) {
	h := MustHarness(t)
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, body := mustDo(t, http.DefaultClient, mustRequest(t, http.MethodGet, h.Admin.URL+path))
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d %s, want 200", path, resp.StatusCode, body)
		}
	}
	resp, body := mustDo(t, http.DefaultClient, mustRequest(t, http.MethodGet, h.Admin.URL+"/readyz"))
	if got := mustJSON[map[string]string](t, body); got["database"] != "ok" || got["store"] != "ok" {
		t.Errorf("readyz = %d %v, want database and store ok", resp.StatusCode, got)
	}

	h.Store.PingFunc = func(context.Context) error { return fmt.Errorf("root moved: %w", storage.ErrUnavailable) }
	resp, body = mustDo(t, http.DefaultClient, mustRequest(t, http.MethodGet, h.Admin.URL+"/readyz"))
	if got := mustJSON[map[string]string](t, body); resp.StatusCode != http.StatusServiceUnavailable || got["store"] != "unavailable" || got["database"] != "ok" {
		t.Errorf("readyz with a broken store = %d %v, want 503 and store unavailable", resp.StatusCode, got)
	}
}

func mustRequest(tb testing.TB, method, url string) *http.Request {
	tb.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return req
}

func TestCreateLinkRefusesInvalidRequests(t *testing.T) {
	h := MustHarness(t)
	h.MustPutObject(t, "ok.txt", "text/plain", []byte("hello"))
	past := h.Clock.Now().Add(-time.Minute).Format(time.RFC3339)
	future := h.Clock.Now().Add(time.Hour).Format(time.RFC3339)
	cases := []struct {
		name, body string
	}{
		{"MissingKey", `{"downloads":1,"expires_in":60}`},
		{"EmptyKey", `{"object":{"key":""},"downloads":1,"expires_in":60}`},
		{"ZeroDownloads", `{"object":{"key":"ok.txt"},"downloads":0,"expires_in":60}`},
		{"NegativeDownloads", `{"object":{"key":"ok.txt"},"downloads":-1,"expires_in":60}`},
		{"MissingDownloads", `{"object":{"key":"ok.txt"},"expires_in":60}`},
		{"BothExpiries", `{"object":{"key":"ok.txt"},"downloads":1,"expires_in":60,"expires_at":"` + future + `"}`},
		{"NoExpiry", `{"object":{"key":"ok.txt"},"downloads":1}`},
		{"PastExpiresAt", `{"object":{"key":"ok.txt"},"downloads":1,"expires_at":"` + past + `"}`},
		{"ZeroExpiresIn", `{"object":{"key":"ok.txt"},"downloads":1,"expires_in":0}`},
		{"UnknownField", `{"object":{"key":"ok.txt"},"downloads":1,"expires_in":60,"colour":"red"}`},
		{"UnknownObjectField", `{"object":{"key":"ok.txt","size":5},"downloads":1,"expires_in":60}`},
		{"BadDelivery", `{"object":{"key":"ok.txt"},"downloads":1,"expires_in":60,"delivery":"carrier-pigeon"}`},
		{"WrongType", `{"object":{"key":"ok.txt"},"downloads":"1","expires_in":60}`},
		{"BadJSON", `{"object":`},
		{"EmptyBody", ``},
		{"TrailingData", `{"object":{"key":"ok.txt"},"downloads":1,"expires_in":60} {}`},
		{"TooManySlots", `{"object":{"key":"ok.txt"},"downloads":1,"expires_in":60,"session":{"max_concurrency":65}}`},
		{"NegativeBudget", `{"object":{"key":"ok.txt"},"downloads":1,"expires_in":60,"session":{"byte_budget":-1}}`},
		{"BadExpiresAt", `{"object":{"key":"ok.txt"},"downloads":1,"expires_at":"tomorrow"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := h.AdminDo(t, http.MethodPost, "/v1/links", c.body, nil)
			p := mustProblem(t, resp, body, http.StatusBadRequest, "bad-request")
			if p.Detail == "" {
				t.Errorf("400 without a detail saying what is wrong")
			}
		})
	}
	if n := h.Ledger.Calls("LinkCreate"); n != 0 {
		t.Errorf("invalid requests reached LinkCreate %d times", n)
	}
}

// A key that breaks the key rules is 400 invalid-key, as docs/api.md's
// problem table says, with a detail that states the rules in bytes; so is
// a bucket that breaks S3's naming rules.
func TestCreateLinkWithAnInvalidKeyIsInvalidKey(t *testing.T) {
	h := MustHarness(t)
	h.MustPutObject(t, "ok.txt", "text/plain", []byte("hello"))
	for _, key := range []string{`a\b`, "a/../b", "../b", "./b", "/abs", "a\u0000b", "a\nb", strings.Repeat("é", 513)} {
		body := map[string]any{"object": map[string]any{"key": key}, "downloads": 1, "expires_in": 60}
		resp, got := h.AdminDo(t, http.MethodPost, "/v1/links", body, nil)
		p := mustProblem(t, resp, got, http.StatusBadRequest, "invalid-key")
		if !strings.Contains(p.Detail, "1024 bytes") {
			t.Errorf("POST /v1/links key %q: detail %q does not say the limit is in bytes", key, p.Detail)
		}
	}
	resp, got := h.AdminDo(t, http.MethodPost, "/v1/links", `{"object":{"key":"ok.txt","bucket":"Not_A_Bucket"},"downloads":1,"expires_in":60}`, nil)
	mustProblem(t, resp, got, http.StatusBadRequest, "invalid-key")
	if n := h.Ledger.Calls("LinkCreate"); n != 0 {
		t.Errorf("invalid keys reached LinkCreate %d times", n)
	}
}

func TestCreateLinkOnAMissingObjectIs422(t *testing.T) {
	h := MustHarness(t)
	obj := h.MustPutObject(t, "there.txt", "text/plain", []byte("hello"))
	for _, ref := range []map[string]any{
		{"key": "not-there.txt"},
		{"key": "there.txt", "version_id": "01900000-0000-7000-8000-000000000000"},
		{"key": "there.txt", "bucket": "other-bucket"},
	} {
		resp, body := h.AdminDo(t, http.MethodPost, "/v1/links", map[string]any{"object": ref, "downloads": 1, "expires_in": 60}, nil)
		mustProblem(t, resp, body, http.StatusUnprocessableEntity, "object-not-found")
	}
	// The named version of an existing object pins exactly that version.
	l := h.MustCreateLink(t, map[string]any{"object": map[string]any{"key": "there.txt", "version_id": obj.VersionID}, "downloads": 1, "expires_in": 60})
	if l.Object.VersionID != obj.VersionID || l.Object.ETag != obj.ETag || l.Object.Size != 5 {
		t.Errorf("link object = %+v, want the uploaded version %+v", l.Object, obj)
	}
}

func TestCreateLinkPinsTheCurrentVersion(t *testing.T) {
	h := MustHarness(t)
	v1 := h.MustPutObject(t, "doc.txt", "text/plain", []byte("version one"))
	l := h.MustCreateLink(t, map[string]any{"object": map[string]any{"key": "doc.txt"}, "downloads": 1, "expires_in": 60})
	h.MustPutObject(t, "doc.txt", "text/plain", []byte("version two, longer"))

	if l.Object.VersionID != v1.VersionID || l.Object.Bucket != v1.Bucket || l.Object.ContentType != "text/plain" {
		t.Errorf("link object = %+v, want version %+v", l.Object, v1)
	}
	resp, body := h.Do(t, http.MethodGet, l.URL, nil)
	if resp.StatusCode != http.StatusOK || string(body) != "version one" {
		t.Errorf("GET = %d %q, want the pinned version", resp.StatusCode, body)
	}
}

func TestCreateLinkWithAnIdempotencyKeyReturnsTheSameLink(t *testing.T) {
	h := MustHarness(t)
	h.MustPutObject(t, "i.txt", "text/plain", []byte("x"))
	req := map[string]any{"object": map[string]any{"key": "i.txt"}, "downloads": 2, "expires_in": 60}
	key := http.Header{"Idempotency-Key": {"create-7"}}

	r1, b1 := h.AdminDo(t, http.MethodPost, "/v1/links", req, key)
	r2, b2 := h.AdminDo(t, http.MethodPost, "/v1/links", req, key)
	if r1.StatusCode != http.StatusCreated || r2.StatusCode != http.StatusOK {
		t.Fatalf("statuses = %d, %d; want 201 then 200", r1.StatusCode, r2.StatusCode)
	}
	l1, l2 := mustJSON[linkJSON](t, b1), mustJSON[linkJSON](t, b2)
	if l1.ID == "" || l1.ID != l2.ID || l1.URL != l2.URL || l1.Token != l2.Token {
		t.Errorf("retry = %s %s, want %s %s", l2.ID, l2.URL, l1.ID, l1.URL)
	}
	l3 := h.MustCreateLink(t, req)
	if l3.ID == l1.ID || l3.URL == l1.URL {
		t.Errorf("a request without the key returned the same link")
	}
	resp, body := h.AdminDo(t, http.MethodPost, "/v1/links", req, http.Header{"Idempotency-Key": {"has space"}})
	mustProblem(t, resp, body, http.StatusBadRequest, "bad-request")
}

func TestShowLinkReportsItsState(t *testing.T) {
	h := MustHarness(t)
	obj := h.MustPutObject(t, "state.bin", "application/zip", testData(2<<20))
	l := h.MustCreateLink(t, map[string]any{"object": map[string]any{"key": "state.bin"}, "downloads": 3, "expires_in": 600,
		"account_id": "", "filename": "State.zip"})

	if !strings.HasPrefix(l.URL, h.Server.PublicURL+"/d/") || !strings.HasSuffix(l.URL, "/"+l.Token) {
		t.Errorf("url %q does not end in the token under %s/d/", l.URL, h.Server.PublicURL)
	}
	if l.NamedURL != l.URL+"/State.zip" {
		t.Errorf("named_url = %q, want %q", l.NamedURL, l.URL+"/State.zip")
	}
	want := linkJSON{ID: l.ID, URL: l.URL, NamedURL: l.NamedURL, Token: l.Token, Downloads: 3, Remaining: 3,
		ExpiresAt: h.Clock.Now().Add(600 * time.Second).Format(time.RFC3339Nano), Delivery: "stream", Filename: "State.zip",
		Object: objectJSON{Bucket: obj.Bucket, Key: "state.bin", VersionID: obj.VersionID, Size: 2 << 20, ETag: obj.ETag, ContentType: "application/zip",
			SHA256: obj.SHA256},
		Session: sessionParams{TTL: 3600, ByteBudget: 4 << 20, MaxConcurrency: 4}}
	if got := l; !linksEqual(got, want) {
		t.Errorf("created link = %+v\nwant %+v", got, want)
	}

	// Spend one download by stream and one by session, then look.
	h.Do(t, http.MethodGet, l.URL, nil)
	h.MustMint(t, l)
	h.WaitIdle() // the stream's delivery is recorded after its last byte
	got := h.MustShowLink(t, l.ID)
	want.Remaining = 2 - 1
	want.Grants = map[string]int{"granted": 2, "refunded": 0}
	// The stream was received whole; the session has served nothing.
	want.Deliveries = map[string]int{"complete": 1, "partial": 0, "none": 1}
	one := 1
	want.ActiveSessions = &one
	if !linksEqual(got, want) {
		t.Errorf("shown link = %+v\nwant %+v", got, want)
	}

	var raw map[string]any
	_, body := h.AdminDo(t, http.MethodGet, "/v1/links/"+l.ID, nil, nil)
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "url", "token", "downloads", "remaining", "expires_at", "revoked_at", "delivery", "account_id", "object", "session", "grants", "active_sessions"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("GET /v1/links/{id} lacks %q: %s", k, body)
		}
	}
	if raw["revoked_at"] != nil || raw["account_id"] != nil {
		t.Errorf("revoked_at = %v, account_id = %v; want null", raw["revoked_at"], raw["account_id"])
	}

	resp, body := h.AdminDo(t, http.MethodGet, "/v1/links/01900000-0000-7000-8000-000000000000", nil, nil)
	mustProblem(t, resp, body, http.StatusNotFound, "not-found")
}

func linksEqual(a, b linkJSON) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

func TestRevokeIsIdempotent(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "r.txt", []byte("x"), nil)
	h.MustMint(t, l)

	resp, body := h.AdminDo(t, http.MethodPost, "/v1/links/"+l.ID+"/revoke", nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke = %d %s", resp.StatusCode, body)
	}
	first := mustJSON[linkJSON](t, body)
	if first.RevokedAt == nil || *first.RevokedAt != h.Clock.Now().Format(time.RFC3339Nano) {
		t.Fatalf("revoked_at = %v, want now", first.RevokedAt)
	}
	if *first.ActiveSessions != 0 {
		t.Errorf("active_sessions after revoke = %d, want 0", *first.ActiveSessions)
	}
	h.Clock.Advance(time.Minute)
	resp, body = h.AdminDo(t, http.MethodPost, "/v1/links/"+l.ID+"/revoke", nil, nil)
	if second := mustJSON[linkJSON](t, body); resp.StatusCode != http.StatusOK || second.RevokedAt == nil || *second.RevokedAt != *first.RevokedAt {
		t.Errorf("second revoke = %d, revoked_at %v; want 200 and the first time %s", resp.StatusCode, second.RevokedAt, *first.RevokedAt)
	}
	resp, body = h.AdminDo(t, http.MethodPost, "/v1/links/01900000-0000-7000-8000-000000000000/revoke", nil, nil)
	mustProblem(t, resp, body, http.StatusNotFound, "not-found")
}

func TestAllowanceTopUp(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "a.txt", []byte("x"), map[string]any{"downloads": 1})
	if resp, _ := h.Do(t, http.MethodGet, l.URL, nil); resp.StatusCode != http.StatusOK {
		t.Fatal("first download failed")
	}
	for _, body := range []string{`{"add":0}`, `{"add":-3}`, `{"add":1000001}`, `{"add":"2"}`, `{"add":1,"why":"x"}`, `{}`} {
		resp, b := h.AdminDo(t, http.MethodPost, "/v1/links/"+l.ID+"/allowance", body, nil)
		mustProblem(t, resp, b, http.StatusBadRequest, "bad-request")
	}
	resp, body := h.AdminDo(t, http.MethodPost, "/v1/links/"+l.ID+"/allowance", `{"add":2,"reason":"customer asked"}`, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("top-up = %d %s", resp.StatusCode, body)
	}
	if got := mustJSON[linkJSON](t, body); got.Downloads != 3 || got.Remaining != 2 {
		t.Errorf("after top-up: downloads %d, remaining %d; want 3 and 2", got.Downloads, got.Remaining)
	}
	if resp, _ := h.Do(t, http.MethodGet, l.URL, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("GET after top-up = %d, want 200", resp.StatusCode)
	}
	resp, body = h.AdminDo(t, http.MethodPost, "/v1/links/01900000-0000-7000-8000-000000000000/allowance", `{"add":1}`, nil)
	mustProblem(t, resp, body, http.StatusNotFound, "not-found")
}

type grantsPage struct {
	Grants []struct {
		ID         string  `json:"id"`
		Kind       string  `json:"kind"`
		Status     string  `json:"status"`
		SessionID  *string `json:"session_id"`
		Client     string  `json:"client"`
		CreatedAt  string  `json:"created_at"`
		RefundedAt *string `json:"refunded_at"`
		// AffinityReuses counts requests sent to the grant's session.
		AffinityReuses int64 `json:"affinity_reuses"`
	} `json:"grants"`
	NextCursor string `json:"next_cursor"`
}

func TestGrantsArePagedNewestFirst(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "g.txt", []byte("x"), map[string]any{"downloads": 10})
	var wantKinds []string
	for i := range 5 {
		h.Clock.Advance(time.Second)
		if i%2 == 0 {
			req := mustRequest(t, http.MethodGet, l.URL)
			req.Header.Set("User-Agent", "curl/8.5.0")
			if resp, _ := mustDo(t, h.Client, req); resp.StatusCode != http.StatusOK {
				t.Fatalf("GET = %d", resp.StatusCode)
			}
			wantKinds = append(wantKinds, "stream")
		} else {
			h.MustMint(t, l)
			wantKinds = append(wantKinds, "session")
		}
	}
	slices.Reverse(wantKinds)

	var (
		all    []string
		kinds  []string
		times  []string
		cursor string
		pages  int
	)
	for {
		path := "/v1/links/" + l.ID + "/grants?limit=2"
		if cursor != "" {
			path += "&cursor=" + cursor
		}
		resp, body := h.AdminDo(t, http.MethodGet, path, nil, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET grants = %d %s", resp.StatusCode, body)
		}
		p := mustJSON[grantsPage](t, body)
		pages++
		if len(p.Grants) > 2 {
			t.Fatalf("page of %d grants with limit=2", len(p.Grants))
		}
		for _, g := range p.Grants {
			all = append(all, g.ID)
			kinds = append(kinds, g.Kind)
			times = append(times, g.CreatedAt)
			if g.Status != "granted" || g.RefundedAt != nil || (g.Kind == "session") != (g.SessionID != nil) {
				t.Errorf("grant = %+v", g)
			}
			if g.Kind == "stream" && g.Client != "127.0.0.1 curl/8.5.0" {
				t.Errorf("client descriptor = %q, want the peer and the User-Agent", g.Client)
			}
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	if pages != 3 || len(all) != 5 || len(slices.Compact(slices.Sorted(slices.Values(all)))) != 5 {
		t.Errorf("%d pages, grants %v; want 3 pages of 5 distinct grants", pages, all)
	}
	if !slices.Equal(kinds, wantKinds) {
		t.Errorf("kinds = %v, want newest first %v", kinds, wantKinds)
	}
	if !slices.IsSortedFunc(times, func(a, b string) int { return strings.Compare(b, a) }) {
		t.Errorf("created_at = %v, want newest first", times)
	}

	for _, q := range []string{"limit=0", "limit=501", "limit=x", "cursor=%21%21"} {
		resp, body := h.AdminDo(t, http.MethodGet, "/v1/links/"+l.ID+"/grants?"+q, nil, nil)
		mustProblem(t, resp, body, http.StatusBadRequest, "bad-request")
	}
	resp, body := h.AdminDo(t, http.MethodGet, "/v1/links/01900000-0000-7000-8000-000000000000/grants", nil, nil)
	mustProblem(t, resp, body, http.StatusNotFound, "not-found")
}

func TestPutObjectStreamsABodyOfUnknownLength(t *testing.T) {
	h := MustHarness(t)
	data := testData(3<<20 + 11)
	pr, pw := io.Pipe()
	go func() {
		// Small writes: the upload arrives as many chunks.
		for off := 0; off < len(data); off += 100_000 {
			if _, err := pw.Write(data[off:min(off+100_000, len(data))]); err != nil {
				return
			}
		}
		pw.Close()
	}()
	req, err := http.NewRequest(http.MethodPut, h.Admin.URL+"/v1/objects/uploads/2031/big%20file.bin", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = -1
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	req.Header.Set("Content-Type", "application/x-thing")
	resp, body := mustDo(t, http.DefaultClient, req)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT = %d %s, want 201", resp.StatusCode, body)
	}
	sum := md5.Sum(data)
	got := mustJSON[objectJSON](t, body)
	if got.Bucket != "local" || got.Key != "uploads/2031/big file.bin" || got.VersionID == "" || got.Size != int64(len(data)) ||
		got.ETag != `"`+hex.EncodeToString(sum[:])+`"` {
		t.Errorf("PUT answer = %+v", got)
	}
	var raw map[string]any
	json.Unmarshal(body, &raw)
	for _, k := range []string{"bucket", "key", "version_id", "size", "etag"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("PUT answer lacks %q: %s", k, body)
		}
	}

	l := h.MustCreateLink(t, map[string]any{"object": map[string]any{"key": got.Key}, "downloads": 1, "expires_in": 60})
	if l.Object.ContentType != "application/x-thing" || l.Object.VersionID != got.VersionID {
		t.Errorf("link object = %+v", l.Object)
	}
	r, b := h.Do(t, http.MethodGet, l.URL, nil)
	if r.StatusCode != http.StatusOK || !bytes.Equal(b, data) {
		t.Errorf("download of the upload = %d, %d bytes; want the %d uploaded", r.StatusCode, len(b), len(data))
	}
}

func TestPutObjectRefusesABrokenUpload(t *testing.T) {
	h := MustHarness(t)
	pr, pw := io.Pipe()
	go func() {
		pw.Write(testData(1000))
		pw.CloseWithError(errors.New("client gave up"))
	}()
	req, _ := http.NewRequest(http.MethodPut, h.Admin.URL+"/v1/objects/half.bin", pr)
	req.ContentLength = -1
	req.Header.Set("Authorization", "Bearer "+testAdminToken)
	resp, err := http.DefaultClient.Do(req)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode == http.StatusCreated {
			t.Fatalf("a broken upload was stored")
		}
	}
	// Whatever the client saw, nothing is stored under the key.
	r, b := h.AdminDo(t, http.MethodPost, "/v1/links", map[string]any{"object": map[string]any{"key": "half.bin"}, "downloads": 1, "expires_in": 60}, nil)
	mustProblem(t, r, b, http.StatusUnprocessableEntity, "object-not-found")
}

func TestPutObjectRefusesInvalidKeys(t *testing.T) {
	h := MustHarness(t)
	for _, path := range []string{
		"a%2F..%2Fb",
		"a/%2e%2e/b",
		"%2E%2E",
		"..%2Fetc%2Fpasswd",
		"%2Fabsolute",
		"a%5Cb",
		"nul%00byte",
		"line%0Abreak",
		"x%2F.%2Fy",
	} {
		t.Run(path, func(t *testing.T) {
			resp, body := h.AdminDo(t, http.MethodPut, "/v1/objects/"+path, "data", nil)
			mustProblem(t, resp, body, http.StatusBadRequest, "invalid-key")
		})
	}
}

func TestAdminBearerSchemeIsCaseInsensitive(t *testing.T) {
	h := MustHarness(t)
	for _, scheme := range []string{"Bearer", "bearer", "BEARER"} {
		req := mustRequest(t, http.MethodGet, h.Admin.URL+"/v1/links/00000000-0000-0000-0000-000000000000")
		req.Header.Set("Authorization", scheme+" "+testAdminToken)
		resp, body := mustDo(t, http.DefaultClient, req)
		// Authorized: the unknown link is a 404, not a 401.
		mustProblem(t, resp, body, http.StatusNotFound, "not-found")
	}
}

func TestWrongMethodAnswers405WithAllow(t *testing.T) {
	h := MustHarness(t)
	tok := strings.Repeat("a", 43)
	cases := []struct {
		base, method, path, allow string
	}{
		{h.Public.URL, http.MethodPut, "/d/" + tok, "GET, HEAD, POST"},
		{h.Public.URL, http.MethodDelete, "/d/" + tok, "GET, HEAD, POST"},
		{h.Public.URL, http.MethodDelete, "/d/" + tok + "/sessions", "GET, HEAD, POST"},
		{h.Public.URL, http.MethodPut, "/d/" + tok + "/name.txt", "GET, HEAD, POST"},
		{h.Public.URL, http.MethodPost, "/s/" + tok + "/name.txt", "GET, HEAD"},
		{h.Public.URL, http.MethodPut, "/s/" + tok, "GET, HEAD"},
		{h.Admin.URL, http.MethodDelete, "/v1/links", "GET, POST"},
		{h.Admin.URL, http.MethodDelete, "/v1/links/x/allowance", "GET, POST"},
		{h.Admin.URL, http.MethodPost, "/v1/sessions/x", "DELETE"},
		{h.Admin.URL, http.MethodGet, "/v1/objects/a/b.txt", "PUT, DELETE"},
	}
	for _, c := range cases {
		resp, body := mustDo(t, http.DefaultClient, mustRequest(t, c.method, c.base+c.path))
		mustProblem(t, resp, body, http.StatusMethodNotAllowed, "method-not-allowed")
		if got := resp.Header.Get("Allow"); got != c.allow {
			t.Errorf("%s %s: Allow = %q, want %q", c.method, c.path, got, c.allow)
		}
	}
	if n := h.Ledger.Calls(""); n != 0 {
		t.Errorf("405 answers made %d ledger calls", n)
	}
}

func TestReadinessFailsOnceDraining(t *testing.T) {
	h := MustHarness(t)
	resp, _ := mustDo(t, http.DefaultClient, mustRequest(t, http.MethodGet, h.Admin.URL+"/readyz"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz before Drain = %d, want 200", resp.StatusCode)
	}
	h.Server.Drain()
	resp, body := mustDo(t, http.DefaultClient, mustRequest(t, http.MethodGet, h.Admin.URL+"/readyz"))
	if got := mustJSON[map[string]string](t, body); resp.StatusCode != http.StatusServiceUnavailable || got["gateway"] != "draining" {
		t.Fatalf("readyz while draining = %d %v, want 503 with gateway draining", resp.StatusCode, got)
	}
}
