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

// auditJSON is an entry of GET /v1/audit.
type auditJSON struct {
	ID    string `json:"id"`
	At    string `json:"at"`
	Actor struct {
		KeyID   string `json:"key_id"`
		KeyName string `json:"key_name"`
	} `json:"actor"`
	Action string `json:"action"`
	Target struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	} `json:"target"`
	RequestID *string         `json:"request_id"`
	Details   json.RawMessage `json:"details"`
}

type auditPage struct {
	Entries []auditJSON `json:"entries"`
	Next    string      `json:"next_cursor"`
}

// TestAuditRecordsWhoChangedWhat: a link created, topped up and revoked by
// three different keys has three entries, newest first, each with its key,
// the request id of the change's answer and what changed; the filters of
// SPEC §6 select them.
func TestAuditRecordsWhoChangedWhat(t *testing.T) {
	h := MustHarness(t)
	alice := h.MustKey(t, "alice", "links:write")
	bob := h.MustKey(t, "bob", "links:write")
	carol := h.MustKey(t, "carol", "links:write")
	auditor := h.MustKey(t, "auditor", "audit:read")
	h.MustPutObject(t, "audited.bin", "application/octet-stream", []byte("audited"))
	start := h.Clock.Now()

	h.Clock.Advance(time.Second)
	resp, body := h.AdminDoAs(t, alice.Key, http.MethodPost, "/v1/links", map[string]any{"object": map[string]any{"key": "audited.bin"}, "downloads": 2, "expires_in": 3600}, nil)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("create = %d %s", resp.StatusCode, body)
	}
	l := mustJSON[linkJSON](t, body)
	createdBy := resp.Header.Get("X-Request-Id")
	h.Clock.Advance(time.Second)
	resp, body = h.AdminDoAs(t, bob.Key, http.MethodPost, "/v1/links/"+l.ID+"/allowance", map[string]any{"add": 3, "reason": "customer asked"}, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("top-up = %d %s", resp.StatusCode, body)
	}
	toppedBy := resp.Header.Get("X-Request-Id")
	h.Clock.Advance(time.Second)
	resp, body = h.AdminDoAs(t, carol.Key, http.MethodPost, "/v1/links/"+l.ID+"/revoke", nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke = %d %s", resp.StatusCode, body)
	}
	revokedBy := resp.Header.Get("X-Request-Id")
	// A read and a repeated revocation change nothing and write nothing.
	h.AdminDoAs(t, carol.Key, http.MethodPost, "/v1/links/"+l.ID+"/revoke", nil, nil)
	h.AdminDoAs(t, auditor.Key, http.MethodGet, "/v1/audit", nil, nil)

	list := func(query string) auditPage {
		t.Helper()
		resp, body := h.AdminDoAs(t, auditor.Key, http.MethodGet, "/v1/audit?"+query, nil, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET /v1/audit?%s = %d %s", query, resp.StatusCode, body)
		}
		return mustJSON[auditPage](t, body)
	}
	got := list("target_id=" + l.ID)
	type want struct{ action, keyID, keyName, requestID, details string }
	wants := []want{
		{"link.revoked", carol.ID, "carol", revokedBy, `"sessions_revoked":0`},
		{"link.allowance_added", bob.ID, "bob", toppedBy, `{"add":3,"reason":"customer asked"}`},
		{"link.created", alice.ID, "alice", createdBy, `"downloads":2`},
	}
	if len(got.Entries) != len(wants) || got.Next != "" {
		t.Fatalf("the link's audit = %+v, want 3 entries on one page", got)
	}
	for i, w := range wants {
		e := got.Entries[i]
		if e.Action != w.action || e.Actor.KeyID != w.keyID || e.Actor.KeyName != w.keyName || e.RequestID == nil ||
			*e.RequestID != w.requestID || e.Target.Type != "link" || e.Target.ID != l.ID || !strings.Contains(string(e.Details), w.details) {
			t.Errorf("entry %d = %+v (details %s), want %s by %s (%s), request %s, details with %s", i, e, e.Details, w.action, w.keyName, w.keyID, w.requestID, w.details)
		}
	}

	// Filters.
	if p := list("actor=" + bob.ID); len(p.Entries) != 1 || p.Entries[0].Action != "link.allowance_added" {
		t.Errorf("actor=bob = %+v, want his top-up only", p.Entries)
	}
	if p := list("actor=bootstrap&action=key.created"); len(p.Entries) != 4 {
		t.Errorf("the bootstrap token's key.created entries = %d, want 4", len(p.Entries))
	}
	if p := list("action=object.stored"); len(p.Entries) != 1 || p.Entries[0].Target.Type != "object" || p.Entries[0].Target.ID != "audited.bin" {
		t.Errorf("object.stored = %+v, want the upload of audited.bin", p.Entries)
	}
	after := start.Add(time.Second).UTC().Format(time.RFC3339) // exclusive: the creation is at it
	before := start.Add(3 * time.Second).UTC().Format(time.RFC3339)
	if p := list(url.Values{"after": {after}, "before": {before}}.Encode()); len(p.Entries) != 1 || p.Entries[0].Action != "link.allowance_added" {
		t.Errorf("after %s, before %s = %+v, want the top-up only", after, before, p.Entries)
	}
	// Pages of one, newest first, the same entries as one page.
	all := list("")
	var paged []string
	for cursor, n := "", 0; ; n++ {
		if n > len(all.Entries) {
			t.Fatal("the pages do not end")
		}
		p := list("limit=1&cursor=" + url.QueryEscape(cursor))
		for _, e := range p.Entries {
			paged = append(paged, e.ID)
		}
		if cursor = p.Next; cursor == "" {
			break
		}
	}
	var ids []string
	for _, e := range all.Entries {
		ids = append(ids, e.ID)
	}
	if !slices.Equal(paged, ids) || len(ids) != 4+1+3 {
		t.Errorf("pages of 1 = %v, one page = %v; want the same 8 entries", paged, ids)
	}

	for _, c := range []struct{ query, detail string }{
		{"acter=" + bob.ID, `Unknown query parameter "acter"`},
		{"action=link.deleted", "action must be one of"},
		{"after=yesterday", "after must be an RFC 3339 time"},
		{"before=2031-13-01T00:00:00Z", "before must be an RFC 3339 time"},
		{"actor=" + strings.Repeat("x", 37), "actor must be a key id"},
		{"cursor=nonsense", "cursor is not one"},
		{"limit=0", "limit must be"},
		{"action=", "action must not be empty"},
	} {
		resp, body := h.AdminDoAs(t, auditor.Key, http.MethodGet, "/v1/audit?"+c.query, nil, nil)
		if p := mustProblem(t, resp, body, http.StatusBadRequest, "bad-request"); !strings.Contains(p.Detail, c.detail) {
			t.Errorf("GET /v1/audit?%s: detail %q, want it to contain %q", c.query, p.Detail, c.detail)
		}
	}
}
