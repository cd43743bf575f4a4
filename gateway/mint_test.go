package gateway_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlgate/dlgate/token"
)

func TestSessionDeliveryRedirectsToANewSession(t *testing.T) {
	h := MustHarness(t)
	data := testData(5000)
	obj := h.MustPutObject(t, "movies/clip.mp4", "video/mp4", data)
	l := h.MustCreateLink(t, map[string]any{"object": map[string]any{"key": "movies/clip.mp4"}, "downloads": 2,
		"expires_in": 7200, "delivery": "session", "filename": "Holiday clip.mp4"})

	resp, body := h.Do(t, http.MethodGet, l.URL, nil)
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("GET = %d %s, want 303", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	s := mustJSON[sessionJSON](t, body)
	loc := resp.Header.Get("Location")
	if loc == "" || loc != s.NamedSessionURL || loc != s.SessionURL+"/Holiday%20clip.mp4" || !strings.HasPrefix(loc, h.Server.PublicURL+"/s/") {
		t.Errorf("Location = %q, named_session_url %q, session_url %q; want the named session URL, under %s/s/", loc, s.NamedSessionURL, s.SessionURL, h.Server.PublicURL)
	}
	if tok := strings.TrimPrefix(s.SessionURL, h.Server.PublicURL+"/s/"); !testKeys.Check(token.Session, tok) {
		t.Errorf("session token %q is not a session token of the harness", tok)
	}
	want := sessionJSON{SessionURL: s.SessionURL, NamedSessionURL: loc, SessionID: s.SessionID,
		ExpiresAt:  h.Clock.Now().Add(time.Hour).Format(time.RFC3339Nano),
		ByteBudget: 1 << 20, MaxConcurrency: 4}
	want.Object.Size, want.Object.ETag, want.Object.ContentType, want.Object.Filename = 5000, obj.ETag, "video/mp4", "Holiday clip.mp4"
	if s != want {
		t.Errorf("session body = %+v\nwant %+v", s, want)
	}
	if got := h.MustShowLink(t, l.ID); got.Remaining != 1 || got.ActiveSessions == nil || *got.ActiveSessions != 1 {
		t.Errorf("after the redirect: remaining %d, active_sessions %v; want 1 and 1", got.Remaining, got.ActiveSessions)
	}

	// The redirect is what a browser follows.
	follow, full := h.Do(t, http.MethodGet, loc, nil)
	if follow.StatusCode != http.StatusOK || !bytes.Equal(full, data) {
		t.Errorf("GET Location = %d with %d bytes, want 200 and the object", follow.StatusCode, len(full))
	}
	assertPublicHeaders(t, "session GET", follow)
}

func TestMintAnswersTheSessionFieldsOfTheSpec(t *testing.T) {
	h := MustHarness(t)
	h.MustPutObject(t, "data.csv", "text/csv", testData(3<<20))
	l := h.MustCreateLink(t, map[string]any{"object": map[string]any{"key": "data.csv"}, "downloads": 1, "expires_in": 600,
		"session": map[string]any{"ttl": 900, "byte_budget": 5 << 20, "max_concurrency": 3}})

	resp, body := h.Do(t, http.MethodPost, l.URL+"/sessions", nil)
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST sessions = %d %s, want 201", resp.StatusCode, body)
	}
	assertPublicHeaders(t, "mint", resp)
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) []string {
		var k []string
		for key := range m {
			k = append(k, key)
		}
		slices.Sort(k)
		return k
	}
	if got, want := keys(raw), []string{"byte_budget", "expires_at", "max_concurrency", "named_session_url", "object", "session_id", "session_url"}; !slices.Equal(got, want) {
		t.Errorf("body fields = %v, want %v", got, want)
	}
	obj, _ := raw["object"].(map[string]any)
	if got, want := keys(obj), []string{"content_type", "etag", "filename", "size"}; !slices.Equal(got, want) {
		t.Errorf("object fields = %v, want %v", got, want)
	}
	s := mustJSON[sessionJSON](t, body)
	if s.ByteBudget != 5<<20 || s.MaxConcurrency != 3 || s.Object.Size != 3<<20 || s.Object.ContentType != "text/csv" || s.Object.Filename != "data.csv" {
		t.Errorf("session = %+v, want the link's settings and object", s)
	}
	if at, err := time.Parse(time.RFC3339, s.ExpiresAt); err != nil || !at.Equal(h.Clock.Now().Add(900*time.Second)) {
		t.Errorf("expires_at = %q (%v), want now + ttl", s.ExpiresAt, err)
	}
	x := h.MustSession(t, s.SessionID)
	if x.LinkID != l.ID || x.ByteBudget != 5<<20 || x.MaxConcurrency != 3 || x.BytesDrawn != 0 {
		t.Errorf("session row = %+v", x)
	}

	// The link's one download is spent: a second mint is the generic 404.
	resp, body = h.Do(t, http.MethodPost, l.URL+"/sessions", nil)
	mustProblem(t, resp, body, http.StatusNotFound, "link-unavailable")
}

func TestConcurrentMintsWithOneIdempotencyKeyClaimOnce(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "idem.bin", testData(1000), map[string]any{"downloads": 5})

	const n = 20
	var (
		wg      sync.WaitGroup
		start   = make(chan struct{})
		results = make([]result, n)
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = <-h.Go(http.MethodPost, l.URL+"/sessions", http.Header{"Idempotency-Key": {"retry-42"}})
		}()
	}
	close(start)
	wg.Wait()

	created, replayed := 0, 0
	var first []byte
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("request %d: %v", i, r.err)
		}
		switch r.resp.StatusCode {
		case http.StatusCreated:
			created++
		case http.StatusOK:
			replayed++
		default:
			t.Errorf("request %d = %d %s, want 201 or 200", i, r.resp.StatusCode, r.body)
		}
		if first == nil {
			first = r.body
		} else if !bytes.Equal(r.body, first) {
			t.Errorf("request %d body = %s, want the same as %s", i, r.body, first)
		}
	}
	if created != 1 || replayed != n-1 {
		t.Errorf("%d × 201 and %d × 200, want 1 and %d", created, replayed, n-1)
	}
	got := h.MustShowLink(t, l.ID)
	if got.Remaining != 4 || got.Grants["granted"] != 1 || *got.ActiveSessions != 1 {
		t.Errorf("remaining %d, grants %v, active sessions %d; want 4, one grant, one session", got.Remaining, got.Grants, *got.ActiveSessions)
	}

	// Another key is another claim; no key is always a new claim.
	other := mustResult(t, h.Go(http.MethodPost, l.URL+"/sessions", http.Header{"Idempotency-Key": {"retry-43"}}))
	plain := mustResult(t, h.Go(http.MethodPost, l.URL+"/sessions", nil))
	if other.resp.StatusCode != http.StatusCreated || plain.resp.StatusCode != http.StatusCreated || bytes.Equal(other.body, first) {
		t.Errorf("other key = %d, no key = %d; want two new sessions", other.resp.StatusCode, plain.resp.StatusCode)
	}
	if got := h.MustShowLink(t, l.ID).Remaining; got != 2 {
		t.Errorf("remaining = %d, want 2", got)
	}
}

func TestMintRefusesAnInvalidIdempotencyKey(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "k.bin", testData(10), nil)
	cases := []struct {
		name, key string
	}{
		{"Empty", ""},
		{"TooLong", strings.Repeat("k", 256)},
		{"InnerSpace", "a b"},
		{"Tab", "a\tb"},
		{"NonASCII", "clé"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := h.Do(t, http.MethodPost, l.URL+"/sessions", http.Header{"Idempotency-Key": {c.key}})
			mustProblem(t, resp, body, http.StatusBadRequest, "bad-request")
			assertPublicHeaders(t, c.name, resp)
		})
	}
	if n := h.Ledger.Calls("SessionMint"); n != 0 {
		t.Errorf("invalid keys reached SessionMint %d times", n)
	}
	// The longest valid key is fine.
	resp, _ := h.Do(t, http.MethodPost, l.URL+"/sessions", http.Header{"Idempotency-Key": {strings.Repeat("k", 255)}})
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("a 255-character key = %d, want 201", resp.StatusCode)
	}
}
