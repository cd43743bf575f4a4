package gateway_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/gateway/admin"
	"github.com/dlgate/dlgate/internal/refusal"
	"github.com/dlgate/dlgate/ledger"
)

// TestKeysAreCreatedListedAndRevoked: POST /v1/keys shows the key's text
// once (no-store), GET /v1/keys lists keys without it, with last_used_at,
// and DELETE /v1/keys/{id} makes this process refuse the key at once.
func TestKeysAreCreatedListedAndRevoked(t *testing.T) {
	h := MustHarness(t)
	resp, body := h.AdminDo(t, http.MethodPost, "/v1/keys", map[string]any{
		"name": "ci uploads", "scopes": []string{"objects:write", "links:write", "objects:write"}, "expires_in": 3600}, nil)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/keys = %d %s, want 201", resp.StatusCode, body)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-store" {
		t.Errorf("Cache-Control of the answer with the key = %q, want no-store", cc)
	}
	k := mustJSON[keyJSON](t, body)
	wantExpiry := h.Clock.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)
	if !apikey.Valid(k.Key) || k.ID == "" || k.Name != "ci uploads" || !slices.Equal(k.Scopes, []string{"links:write", "objects:write"}) ||
		k.ExpiresAt == nil || *k.ExpiresAt != wantExpiry || k.CreatedAt == "" {
		t.Fatalf("created key = %+v, want a dlk_ key named ci uploads with links:write and objects:write, expiring at %s", k, wantExpiry)
	}
	fields := mustJSON[map[string]any](t, body)
	for _, f := range []string{"id", "name", "scopes", "key", "created_at", "expires_at"} {
		if _, ok := fields[f]; !ok {
			t.Errorf("POST /v1/keys answer has no %q: %s", f, body)
		}
	}
	if len(fields) != 6 {
		t.Errorf("POST /v1/keys answer has %d fields, want the 6 of SPEC §6: %s", len(fields), body)
	}
	if strings.Contains(h.Logs.String(), k.Key) || strings.Contains(h.Logs.String(), k.Key[len(apikey.Prefix):]) {
		t.Error("the key's text is in the log")
	}

	// The key works for what it holds.
	h.MustPutObject(t, "k.txt", "text/plain", []byte("key"))
	resp, body = h.AdminDoAs(t, k.Key, http.MethodPost, "/v1/links", map[string]any{"object": map[string]any{"key": "k.txt"}, "downloads": 1, "expires_in": 60}, nil)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/links with the key = %d %s", resp.StatusCode, body)
	}

	resp, body = h.AdminDo(t, http.MethodGet, "/v1/keys", nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/keys = %d %s", resp.StatusCode, body)
	}
	if strings.Contains(string(body), k.Key) || strings.Contains(string(body), `"key"`) {
		t.Errorf("GET /v1/keys shows a key's text: %s", body)
	}
	page := mustJSON[struct {
		Keys []keyJSON `json:"keys"`
		Next *string   `json:"next_cursor"`
	}](t, body)
	if len(page.Keys) != 1 || page.Next != nil {
		t.Fatalf("GET /v1/keys = %s, want the one key and no next_cursor", body)
	}
	got := page.Keys[0]
	used := h.Clock.Now().UTC().Format(time.RFC3339Nano)
	if got.ID != k.ID || got.RevokedAt != nil || got.LastUsedAt == nil || *got.LastUsedAt != used || got.ExpiresAt == nil {
		t.Errorf("listed key = %+v, want %s not revoked, last used at %s", got, k.ID, used)
	}

	resp, body = h.AdminDo(t, http.MethodDelete, "/v1/keys/"+k.ID, nil, nil)
	if resp.StatusCode != http.StatusNoContent || len(body) != 0 {
		t.Fatalf("DELETE /v1/keys/%s = %d %s, want 204", k.ID, resp.StatusCode, body)
	}
	// Refused at once by the process that revoked it, though its cache
	// entry has not lapsed (the clock does not move).
	resp, body = h.AdminDoAs(t, k.Key, http.MethodGet, "/v1/links", nil, nil)
	mustProblem(t, resp, body, http.StatusUnauthorized, "unauthorized")
	if ch := resp.Header.Get("WWW-Authenticate"); ch != `Bearer realm="admin", error="invalid_token"` {
		t.Errorf("WWW-Authenticate for a revoked key = %q", ch)
	}
	resp, _ = h.AdminDo(t, http.MethodDelete, "/v1/keys/"+k.ID, nil, nil)
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("revoking again = %d, want 204", resp.StatusCode)
	}
	list := mustJSON[struct {
		Keys []keyJSON `json:"keys"`
	}](t, mustBody(t, h, http.MethodGet, "/v1/keys"))
	if len(list.Keys) != 1 || list.Keys[0].RevokedAt == nil {
		t.Errorf("after DELETE, GET /v1/keys = %+v, want the key with revoked_at", list.Keys)
	}
	resp, body = h.AdminDo(t, http.MethodDelete, "/v1/keys/"+matrixID, nil, nil)
	mustProblem(t, resp, body, http.StatusNotFound, "not-found")
	resp, body = h.AdminDo(t, http.MethodDelete, "/v1/keys/bootstrap", nil, nil)
	if p := mustProblem(t, resp, body, http.StatusNotFound, "not-found"); !strings.Contains(p.Detail, "GATEWAY_ADMIN_TOKEN") {
		t.Errorf("DELETE /v1/keys/bootstrap detail %q does not say how to retire the token", p.Detail)
	}
}

// mustBody sends an admin request with the bootstrap token and demands a 200.
func mustBody(tb testing.TB, h *Harness, method, path string) []byte {
	tb.Helper()
	resp, body := h.AdminDo(tb, method, path, nil, nil)
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("%s %s = %d %s", method, path, resp.StatusCode, body)
	}
	return body
}

func TestKeysListIsPaged(t *testing.T) {
	h := MustHarness(t)
	var made []string
	for i := range 5 {
		made = append(made, h.MustKey(t, "k"+string(rune('a'+i)), "links:read").ID)
		h.Clock.Advance(time.Millisecond)
	}
	var seen []string
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 3 {
			t.Fatal("more than 3 pages of 2 for 5 keys")
		}
		page := mustJSON[struct {
			Keys []keyJSON `json:"keys"`
			Next string    `json:"next_cursor"`
		}](t, mustBody(t, h, http.MethodGet, "/v1/keys?limit=2&cursor="+url.QueryEscape(cursor)))
		for _, k := range page.Keys {
			seen = append(seen, k.ID)
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	slices.Reverse(made)
	if !slices.Equal(seen, made) {
		t.Errorf("pages of 2 listed %v, want newest first %v", seen, made)
	}
	for _, q := range []struct{ query, detail string }{
		{"limit=0", "limit must be"},
		{"limit=501", "limit must be"},
		{"cursor=nonsense", "cursor is not one"},
		{"name=ka", `Unknown query parameter "name"`},
		{"limit=1&limit=2", "more than once"},
	} {
		resp, body := h.AdminDo(t, http.MethodGet, "/v1/keys?"+q.query, nil, nil)
		if p := mustProblem(t, resp, body, http.StatusBadRequest, "bad-request"); !strings.Contains(p.Detail, q.detail) {
			t.Errorf("GET /v1/keys?%s: detail %q, want it to contain %q", q.query, p.Detail, q.detail)
		}
	}
}

func TestCreateKeyRefusesInvalidRequests(t *testing.T) {
	h := MustHarness(t)
	for _, c := range []struct{ name, body, detail string }{
		{"NoName", `{"scopes":["links:read"]}`, "name must be"},
		{"LongName", `{"name":"` + strings.Repeat("é", 101) + `","scopes":["links:read"]}`, "1 to 100 characters"},
		{"ControlInName", `{"name":"a\u0007b","scopes":["links:read"]}`, "control characters"},
		{"SpaceAroundName", `{"name":" ops","scopes":["links:read"]}`, "spaces at either end"},
		{"NoScopes", `{"name":"ops"}`, "at least one scope"},
		{"EmptyScopes", `{"name":"ops","scopes":[]}`, "at least one scope"},
		{"UnknownScope", `{"name":"ops","scopes":["links:read","links:admin"]}`, `Unknown scope "links:admin"`},
		{"ZeroExpiry", `{"name":"ops","scopes":["links:read"],"expires_in":0}`, "expires_in must be"},
		{"HugeExpiry", `{"name":"ops","scopes":["links:read"],"expires_in":999999999999}`, "expires_in must be"},
		{"UnknownField", `{"name":"ops","scopes":["links:read"],"key":"dlk_mine"}`, `unknown field "key"`},
		{"ScopesNotAList", `{"name":"ops","scopes":"links:read"}`, `field "scopes"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp, body := h.AdminDo(t, http.MethodPost, "/v1/keys", c.body, nil)
			if p := mustProblem(t, resp, body, http.StatusBadRequest, "bad-request"); !strings.Contains(p.Detail, c.detail) {
				t.Errorf("detail %q, want it to contain %q", p.Detail, c.detail)
			}
		})
	}
	if n := h.Ledger.Calls("KeyCreate"); n != 0 {
		t.Errorf("%d invalid requests reached KeyCreate", n)
	}
}

// TestAKeyGivesOnlyTheScopesItHolds: SPEC §6, keys:write plus the scopes
// given. The check is made before the ledger is asked (a clear 403) and
// again by the ledger under the lock of the actor's key row.
func TestAKeyGivesOnlyTheScopesItHolds(t *testing.T) {
	h := MustHarness(t)
	manager := h.MustKey(t, "manager", "keys:write", "links:read", "audit:read")
	reader := h.MustKey(t, "reader", "links:read", "links:write")
	create := func(key string, scopes ...string) (*http.Response, []byte) {
		return h.AdminDoAs(t, key, http.MethodPost, "/v1/keys", map[string]any{"name": "child", "scopes": scopes}, nil)
	}
	resp, body := create(manager.Key, "links:read", "audit:read")
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("a key giving scopes it holds = %d %s, want 201", resp.StatusCode, body)
	}
	resp, body = create(manager.Key, "links:read", "links:write")
	if p := mustProblem(t, resp, body, http.StatusForbidden, "insufficient-scope"); !strings.Contains(p.Detail, "links:write") {
		t.Errorf("giving links:write without it: detail %q does not name links:write", p.Detail)
	}
	resp, body = create(manager.Key, "keys:write")
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("a key giving keys:write, which it holds = %d %s, want 201", resp.StatusCode, body)
	}
	resp, body = create(reader.Key, "links:read")
	if p := mustProblem(t, resp, body, http.StatusForbidden, "insufficient-scope"); !strings.Contains(p.Detail, "keys:write") {
		t.Errorf("a key without keys:write: detail %q does not name keys:write", p.Detail)
	}
	resp, body = create(testAdminToken, apikey.All().Strings()...)
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("the bootstrap token giving every scope = %d %s, want 201", resp.StatusCode, body)
	}
	if n := h.Ledger.Calls("KeyCreate"); n != 5 {
		t.Errorf("KeyCreate called %d times, want 5 (2 by MustKey, 3 made here; the refusals never reached it)", n)
	}

	// The ledger's own check: the manager is revoked by another process,
	// which this one has not heard of (its cache still trusts the key).
	if err := h.DB.KeyRevoke(context.Background(), manager.ID); err != nil {
		t.Fatal(err)
	}
	resp, body = create(manager.Key, "links:read")
	mustProblem(t, resp, body, http.StatusUnauthorized, "unauthorized")
	// And the refusal made this process forget the key.
	resp, body = h.AdminDoAs(t, manager.Key, http.MethodGet, "/v1/audit", nil, nil)
	mustProblem(t, resp, body, http.StatusUnauthorized, "unauthorized")
}

// TestAnExpiredKeyIsRefused: expiry is the database's clock; a cached key
// is refused once it expires too, without waiting for its cache entry.
func TestAnExpiredKeyIsRefused(t *testing.T) {
	h := MustHarness(t)
	resp, body := h.AdminDo(t, http.MethodPost, "/v1/keys", map[string]any{"name": "short", "scopes": []string{"links:read"}, "expires_in": 60}, nil)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/keys = %d %s", resp.StatusCode, body)
	}
	k := mustJSON[keyJSON](t, body)
	resp, body = h.AdminDoAs(t, k.Key, http.MethodGet, "/v1/links", nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/links with a fresh key = %d %s", resp.StatusCode, body)
	}
	h.Clock.Advance(60 * time.Second)
	lookups := h.Ledger.Calls("KeyGetByHash")
	resp, body = h.AdminDoAs(t, k.Key, http.MethodGet, "/v1/links", nil, nil)
	mustProblem(t, resp, body, http.StatusUnauthorized, "unauthorized")
	if h.Ledger.Calls("KeyGetByHash") != lookups+1 {
		t.Error("an expired key was not looked up again")
	}
	recs := h.Logs.Records(t, "admin authentication failed")
	if len(recs) != 1 || recs[0]["reason"] != "expired" || recs[0]["key_id"] != k.ID {
		t.Errorf("log of the refusal = %v, want one with reason expired and key_id %s", recs, k.ID)
	}
}

// TestARevokedKeyIsRefusedByEveryProcessWithinTheCacheLifetime: a second
// process on the same database trusts a key it verified for at most
// admin.KeyCacheTTL; after that it asks the ledger and refuses it.
func TestARevokedKeyIsRefusedByEveryProcessWithinTheCacheLifetime(t *testing.T) {
	h := MustHarness(t)
	k := h.MustKey(t, "shared", "links:read")
	other, err := gateway.New(gateway.Options{Ledger: h.Ledger, Store: h.Store, Secret: testSecret, PublicURL: h.Public.URL,
		AdminToken: testAdminToken, Logger: h.Server.Logger, Now: h.Clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	second := httptest.NewServer(other.AdminHandler())
	defer second.Close()
	get := func() int {
		req := mustRequest(t, http.MethodGet, second.URL+"/v1/links")
		req.Header.Set("Authorization", "Bearer "+k.Key)
		resp, _ := mustDo(t, http.DefaultClient, req)
		return resp.StatusCode
	}
	if got := get(); got != http.StatusOK {
		t.Fatalf("the second process with the key = %d, want 200", got)
	}
	resp, _ := h.AdminDo(t, http.MethodDelete, "/v1/keys/"+k.ID, nil, nil)
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE = %d", resp.StatusCode)
	}
	// Within the cache lifetime the second process may still trust it;
	// it must not once the lifetime has passed.
	h.Clock.Advance(admin.KeyCacheTTL - time.Millisecond)
	if got := get(); got != http.StatusOK {
		t.Logf("refused before the cache lifetime ended (allowed): %d", got)
	}
	h.Clock.Advance(time.Millisecond)
	if got := get(); got != http.StatusUnauthorized {
		t.Errorf("the second process, %v after the revocation = %d, want 401", admin.KeyCacheTTL, got)
	}
	if admin.KeyCacheTTL >= time.Second {
		t.Errorf("KeyCacheTTL = %v: SPEC §6 wants a revocation seen within 1 s", admin.KeyCacheTTL)
	}
}

// TestAKeyIsLookedUpAndTouchedAtMostAsOftenAsDocumented: within
// KeyCacheTTL a key costs no lookup, and within a minute no second
// last_used_at write, however many requests use it.
func TestAKeyIsLookedUpAndTouchedAtMostAsOftenAsDocumented(t *testing.T) {
	h := MustHarness(t)
	k := h.MustKey(t, "busy", "links:read")
	for range 20 {
		if resp, body := h.AdminDoAs(t, k.Key, http.MethodGet, "/v1/links", nil, nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/links = %d %s", resp.StatusCode, body)
		}
	}
	if l, tc := h.Ledger.Calls("KeyGetByHash"), h.Ledger.Calls("KeyTouch"); l != 1 || tc != 1 {
		t.Errorf("20 requests in one instant: %d lookups and %d touches, want 1 and 1", l, tc)
	}
	for range 10 {
		h.Clock.Advance(admin.KeyCacheTTL)
		h.AdminDoAs(t, k.Key, http.MethodGet, "/v1/links", nil, nil)
	}
	if l, tc := h.Ledger.Calls("KeyGetByHash"), h.Ledger.Calls("KeyTouch"); l != 11 || tc != 1 {
		t.Errorf("10 more, one cache lifetime apart: %d lookups and %d touches in all, want 11 and 1", l, tc)
	}
	if line := "gateway_admin_key_lookups_total 11\n"; !strings.Contains(string(mustBody(t, h, http.MethodGet, "/metrics")), line) {
		t.Errorf("/metrics has no line %q", line)
	}
	h.Clock.Advance(admin.TouchEvery)
	h.AdminDoAs(t, k.Key, http.MethodGet, "/v1/links", nil, nil)
	if tc := h.Ledger.Calls("KeyTouch"); tc != 2 {
		t.Errorf("a minute later: %d touches in all, want 2", tc)
	}
	got, err := h.DB.KeyGet(context.Background(), k.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.LastUsedAt == nil || !got.LastUsedAt.Equal(ledger.Micro(h.Clock.Now())) {
		t.Errorf("last_used_at = %v, want %v", got.LastUsedAt, h.Clock.Now())
	}
	// A bearer that is not a key's shape is refused without a lookup.
	before := h.Ledger.Calls("")
	for _, bad := range []string{"dlk_short", "dlk_" + strings.Repeat("_", 43), apikey.Prefix + k.Key[len(apikey.Prefix):len(k.Key)-1] + "!"} {
		h.Clock.Advance(refusal.AuthWindow)
		resp, body := h.AdminDoAs(t, bad, http.MethodGet, "/v1/links", nil, nil)
		mustProblem(t, resp, body, http.StatusUnauthorized, "unauthorized")
	}
	if n := h.Ledger.Calls("") - before; n != 0 {
		t.Errorf("malformed keys made %d ledger calls, want none", n)
	}
}

// TestAdminChallengesFollowRFC6750: no credential gets a bare challenge,
// a bad one error="invalid_token" (RFC 6750 §3.1).
func TestAdminChallengesFollowRFC6750(t *testing.T) {
	h := MustHarness(t)
	for _, c := range []struct{ auth, want string }{
		{"", `Bearer realm="admin"`},
		{"Basic YWRtaW46YWRtaW4=", `Bearer realm="admin"`},
		{"Bearer nope", `Bearer realm="admin", error="invalid_token"`},
		{"Bearer " + unknownKey, `Bearer realm="admin", error="invalid_token"`},
	} {
		req := mustRequest(t, http.MethodGet, h.Admin.URL+"/v1/links")
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		resp, body := mustDo(t, http.DefaultClient, req)
		mustProblem(t, resp, body, http.StatusUnauthorized, "unauthorized")
		if got := resp.Header.Get("WWW-Authenticate"); got != c.want {
			t.Errorf("Authorization %q: WWW-Authenticate = %q, want %q", c.auth, got, c.want)
		}
	}
}
