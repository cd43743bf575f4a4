package gateway_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// linksPage is the answer of GET /v1/links.
type linksPage struct {
	Links      []json.RawMessage `json:"links"`
	NextCursor *string           `json:"next_cursor"`
}

// MustListLinks returns every link GET /v1/links?query lists, following
// next_cursor, each decoded and raw.
func (h *Harness) MustListLinks(tb testing.TB, query url.Values) ([]linkJSON, []map[string]any) {
	tb.Helper()
	var (
		links []linkJSON
		raws  []map[string]any
	)
	q := url.Values{}
	for k, v := range query {
		q[k] = v
	}
	for pages := 0; ; pages++ {
		if pages > 50 {
			tb.Fatalf("GET /v1/links?%s: still paging after %d pages", query.Encode(), pages)
		}
		resp, body := h.AdminDo(tb, http.MethodGet, "/v1/links?"+q.Encode(), nil, nil)
		if resp.StatusCode != http.StatusOK {
			tb.Fatalf("GET /v1/links?%s = %d %s", q.Encode(), resp.StatusCode, body)
		}
		p := mustJSON[linksPage](tb, body)
		if p.Links == nil {
			tb.Fatalf("GET /v1/links?%s: links is not an array: %s", q.Encode(), body)
		}
		for _, raw := range p.Links {
			links = append(links, mustJSON[linkJSON](tb, raw))
			raws = append(raws, mustJSON[map[string]any](tb, raw))
		}
		if p.NextCursor == nil {
			return links, raws
		}
		if *p.NextCursor == "" {
			tb.Fatalf("next_cursor is present but empty: %s", body)
		}
		q.Set("cursor", *p.NextCursor)
	}
}

func idsOf(links []linkJSON) []string {
	out := []string{}
	for _, l := range links {
		out = append(out, l.ID)
	}
	return out
}

func TestListLinksPagesNewestFirstWithoutTokens(t *testing.T) {
	h := MustHarness(t)
	h.MustPutObject(t, "a.txt", "text/plain", []byte("a"))
	var want []string
	for i := 0; i < 5; i++ {
		h.Clock.Advance(time.Second)
		l := h.MustCreateLink(t, map[string]any{"object": map[string]any{"key": "a.txt"}, "downloads": 2, "expires_in": 3600})
		want = append([]string{l.ID}, want...)
	}
	h.Do(t, http.MethodGet, h.MustShowLink(t, want[0]).URL, nil) // one grant on the newest
	h.WaitIdle()                                                 // and its delivery recorded

	links, raws := h.MustListLinks(t, url.Values{"limit": {"2"}})
	if got := idsOf(links); !slices.Equal(got, want) {
		t.Fatalf("listed %v, want newest first %v", got, want)
	}
	for i, l := range links {
		if _, ok := raws[i]["token"]; ok {
			t.Errorf("listed link %s has a token field", l.ID)
		}
		for _, k := range []string{"url", "named_url", "grants", "deliveries", "retries", "active_sessions", "revoked_at", "created_at"} {
			if _, ok := raws[i][k]; !ok {
				t.Errorf("listed link %s lacks %q", l.ID, k)
			}
		}
		shown := h.MustShowLink(t, l.ID)
		shown.Token = ""
		if !linksEqual(l, shown) {
			t.Errorf("listed %+v\nshown  %+v", l, shown)
		}
	}
	if links[0].Grants["granted"] != 1 || links[0].Remaining != 1 {
		t.Errorf("newest link lists grants %v and remaining %d after one download", links[0].Grants, links[0].Remaining)
	}

	// One page of everything: no next_cursor at all.
	_, body := h.AdminDo(t, http.MethodGet, "/v1/links?limit=5", nil, nil)
	if strings.Contains(string(body), "next_cursor") {
		t.Errorf("last page carries next_cursor: %s", body)
	}
	// No link at all: an empty array, not null.
	empty := MustHarness(t)
	if _, body := empty.AdminDo(t, http.MethodGet, "/v1/links", nil, nil); !strings.Contains(string(body), `"links":[]`) {
		t.Errorf("empty listing = %s, want links: []", body)
	}
}

func TestListLinksFilters(t *testing.T) {
	h := MustHarness(t)
	h.MustPutObject(t, "a.txt", "text/plain", []byte("a"))
	h.MustPutObject(t, "b/c d.txt", "text/plain", []byte("b"))
	create := func(key, account string, downloads, expiresIn int) linkJSON {
		h.Clock.Advance(time.Second)
		return h.MustCreateLink(t, map[string]any{"object": map[string]any{"key": key}, "downloads": downloads,
			"expires_in": expiresIn, "account_id": account})
	}
	active := create("a.txt", "alice", 2, 3600)
	exhausted := create("b/c d.txt", "", 1, 3600)
	if resp, _ := h.Do(t, http.MethodGet, exhausted.URL, nil); resp.StatusCode != http.StatusOK {
		t.Fatal("download failed")
	}
	expired := create("a.txt", "bob", 1, 60)
	revoked := create("b/c d.txt", "alice", 1, 3600)
	if resp, body := h.AdminDo(t, http.MethodPost, "/v1/links/"+revoked.ID+"/revoke", nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke = %d %s", resp.StatusCode, body)
	}
	h.Clock.Advance(time.Minute)
	created := func(l linkJSON) string {
		_, body := h.AdminDo(t, http.MethodGet, "/v1/links/"+l.ID, nil, nil)
		return mustJSON[map[string]any](t, body)["created_at"].(string)
	}

	cases := []struct {
		query url.Values
		want  []linkJSON
	}{
		{url.Values{"state": {"active"}}, []linkJSON{active}},
		{url.Values{"state": {"exhausted"}}, []linkJSON{exhausted}},
		{url.Values{"state": {"expired"}}, []linkJSON{expired}},
		{url.Values{"state": {"revoked"}}, []linkJSON{revoked}},
		{url.Values{"account": {"alice"}}, []linkJSON{revoked, active}},
		{url.Values{"account": {"alice"}, "state": {"active"}}, []linkJSON{active}},
		{url.Values{"object_key": {"b/c d.txt"}}, []linkJSON{revoked, exhausted}},
		{url.Values{"object_key": {"nothing"}}, nil},
		{url.Values{"created_after": {created(exhausted)}}, []linkJSON{revoked, expired}},
		{url.Values{"created_before": {created(expired)}}, []linkJSON{exhausted, active}},
		{url.Values{"created_after": {created(active)}, "created_before": {created(revoked)}, "limit": {"1"}}, []linkJSON{expired, exhausted}},
		{url.Values{"created_after": {"2031-03-04T05:06:08+01:00"}}, []linkJSON{revoked, expired, exhausted, active}},
	}
	for _, c := range cases {
		got, _ := h.MustListLinks(t, c.query)
		if !slices.Equal(idsOf(got), idsOf(c.want)) {
			t.Errorf("GET /v1/links?%s listed %v, want %v", c.query.Encode(), idsOf(got), idsOf(c.want))
		}
	}
}

func TestListLinksRefusesBadParameters(t *testing.T) {
	h := MustHarness(t)
	cases := []struct{ query, detail string }{
		{"limit=0", "limit must be a whole number between 1 and 500"},
		{"limit=501", "limit must be"},
		{"limit=ten", "limit must be"},
		{"limit=", "limit must not be empty"},
		{"state=dormant", "state must be one of active, exhausted, expired, revoked"},
		{"state=Active", "state must be one of"},
		{"created_after=yesterday", "created_after must be an RFC 3339 time"},
		{"created_before=2030-01-02", "created_before must be an RFC 3339 time"},
		{"acount=alice", `Unknown query parameter "acount"`},
		{"account=a&account=b", "account is given more than once"},
		{"account=", "account must not be empty"},
		{"account=a%0Ab", "account must be at most 255 bytes (of UTF-8, not characters) without control characters"},
		{"object_key=" + strings.Repeat("k", 1025), "object_key must be at most 1024 bytes"},
	}
	for _, c := range cases {
		resp, body := h.AdminDo(t, http.MethodGet, "/v1/links?"+c.query, nil, nil)
		p := mustProblem(t, resp, body, http.StatusBadRequest, "bad-request")
		if !strings.Contains(p.Detail, c.detail) {
			t.Errorf("GET /v1/links?%s: detail %q, want it to contain %q", c.query, p.Detail, c.detail)
		}
	}
	if n := h.Ledger.Calls("LinkList"); n != 0 {
		t.Errorf("refused queries made %d LinkList calls", n)
	}
	// Cursors are the ledger's to judge; a forged one is a 400, never a 500.
	for _, cursor := range []string{"%25%25%25", "bm90LWEtY3Vyc29y", "OTk5OTk5OTk5OTk5OTk5OTk5L2lk"} {
		resp, body := h.AdminDo(t, http.MethodGet, "/v1/links?cursor="+cursor, nil, nil)
		p := mustProblem(t, resp, body, http.StatusBadRequest, "bad-request")
		if !strings.Contains(p.Detail, "cursor") {
			t.Errorf("cursor %s: detail %q, want it to name the cursor", cursor, p.Detail)
		}
	}
}

type allowanceJSON struct {
	Changes []struct {
		Add       int    `json:"add"`
		Reason    string `json:"reason"`
		CreatedAt string `json:"created_at"`
	} `json:"changes"`
}

func TestAllowanceChangesAreListedNewestFirst(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "a.txt", []byte("x"), map[string]any{"downloads": 1})
	_, body := h.AdminDo(t, http.MethodGet, "/v1/links/"+l.ID+"/allowance", nil, nil)
	if string(body) != `{"changes":[]}`+"\n" {
		t.Errorf("changes of a link never topped up = %s, want an empty array", body)
	}
	for i, reason := range []string{"ticket 1", "ticket 2"} {
		h.Clock.Advance(time.Second)
		resp, body := h.AdminDo(t, http.MethodPost, "/v1/links/"+l.ID+"/allowance", map[string]any{"add": i + 1, "reason": reason}, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("top-up = %d %s", resp.StatusCode, body)
		}
	}
	resp, body := h.AdminDo(t, http.MethodGet, "/v1/links/"+l.ID+"/allowance", nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET allowance = %d %s", resp.StatusCode, body)
	}
	got := mustJSON[allowanceJSON](t, body)
	now := h.Clock.Now()
	if len(got.Changes) != 2 ||
		got.Changes[0].Add != 2 || got.Changes[0].Reason != "ticket 2" || got.Changes[0].CreatedAt != now.Format(time.RFC3339Nano) ||
		got.Changes[1].Add != 1 || got.Changes[1].Reason != "ticket 1" || got.Changes[1].CreatedAt != now.Add(-time.Second).Format(time.RFC3339Nano) {
		t.Errorf("changes = %s, want ticket 2 (+2) then ticket 1 (+1), newest first", body)
	}
	resp, body = h.AdminDo(t, http.MethodGet, "/v1/links/01900000-0000-7000-8000-000000000000/allowance", nil, nil)
	mustProblem(t, resp, body, http.StatusNotFound, "not-found")
}

func TestTopUpOfARevokedLinkIs409(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "a.txt", []byte("x"), map[string]any{"downloads": 1})
	h.AdminDo(t, http.MethodPost, "/v1/links/"+l.ID+"/revoke", nil, nil)
	resp, body := h.AdminDo(t, http.MethodPost, "/v1/links/"+l.ID+"/allowance", `{"add":3,"reason":"too late"}`, nil)
	mustProblem(t, resp, body, http.StatusConflict, "link-revoked")
	if got := h.MustShowLink(t, l.ID); got.Downloads != 1 || got.Remaining != 1 {
		t.Errorf("after a refused top-up: downloads %d, remaining %d; want 1 and 1", got.Downloads, got.Remaining)
	}
	_, body = h.AdminDo(t, http.MethodGet, "/v1/links/"+l.ID+"/allowance", nil, nil)
	if got := mustJSON[allowanceJSON](t, body); len(got.Changes) != 0 {
		t.Errorf("a refused top-up was recorded: %s", body)
	}
}
