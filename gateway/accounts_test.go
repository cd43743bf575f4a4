package gateway_test

import (
	"context"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/dlgate/dlgate/auth"
	"github.com/dlgate/dlgate/gateway"
)

const jwtSecret = "jwt-secret-for-tests-0123456789abcdef"

// jwtHarness is a gateway with GATEWAY_AUTH=jwt on an HS256 secret and
// the cookie "dl_session".
func jwtHarness(tb testing.TB) *Harness {
	tb.Helper()
	return MustHarness(tb, func(o *gateway.Options) {
		a, err := auth.New(context.Background(), auth.Config{Mode: auth.ModeJWT, JWTKey: jwtSecret, Cookie: "dl_session", Now: o.Now})
		if err != nil {
			tb.Fatal(err)
		}
		o.Auth = a
	})
}

// bearer signs an HS256 token for account that the harness accepts.
func (h *Harness) bearer(tb testing.TB, account string) http.Header {
	tb.Helper()
	tok := h.jwt(tb, account)
	return http.Header{"Authorization": {"Bearer " + tok}}
}

func (h *Harness) jwt(tb testing.TB, account string) string {
	tb.Helper()
	now := h.Clock.Now()
	t := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"sub": account, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()})
	s, err := t.SignedString([]byte(jwtSecret))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestAnAccountBoundLinkServesOnlyItsAccount(t *testing.T) {
	h := jwtHarness(t)
	data := testData(5000)
	l := h.MustObjectLink(t, "alice.bin", data, map[string]any{"account_id": "alice", "downloads": 2})

	resp, _ := h.Do(t, http.MethodGet, l.URL, nil)
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") != "Bearer" {
		t.Fatalf("anonymous GET = %d %q, want 401 Bearer", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
	for _, bad := range []string{"garbage", h.jwt(t, "alice") + "x", strings.Repeat("a", 9000)} {
		resp, body := h.Do(t, http.MethodGet, l.URL, http.Header{"Authorization": {"Bearer " + bad}})
		mustProblem(t, resp, body, http.StatusUnauthorized, "authentication-required")
		if got := resp.Header.Get("WWW-Authenticate"); got != `Bearer error="invalid_token"` {
			t.Errorf("WWW-Authenticate = %q", got)
		}
		if len(bad) > 20 && (strings.Contains(string(body), bad[:20]) || strings.Contains(h.Logs.String(), bad[:20])) {
			t.Errorf("the credential reached the answer or the logs")
		}
	}
	resp, body := h.Do(t, http.MethodGet, l.URL, h.bearer(t, "bob"))
	mustProblem(t, resp, body, http.StatusNotFound, "link-unavailable")
	if got := h.MustShowLink(t, l.ID).Remaining; got != 2 {
		t.Fatalf("remaining = %d after anonymous, invalid and wrong-account GETs, want 2", got)
	}
	resp, body = h.Do(t, http.MethodGet, l.URL, h.bearer(t, "alice"))
	if resp.StatusCode != http.StatusOK || string(body) != string(data) {
		t.Fatalf("alice's GET = %d (%d bytes), want the file", resp.StatusCode, len(body))
	}
	resp, body = h.Do(t, http.MethodGet, l.URL, http.Header{"Cookie": {"dl_session=" + h.jwt(t, "alice")}})
	if resp.StatusCode != http.StatusOK || string(body) != string(data) {
		t.Fatalf("alice's GET with the cookie = %d (%d bytes), want the file", resp.StatusCode, len(body))
	}
	if got := h.MustShowLink(t, l.ID).Remaining; got != 0 {
		t.Fatalf("remaining = %d, want 0", got)
	}
}

func TestSessionAffinitySendsAnAccountToItsOneSession(t *testing.T) {
	h := jwtHarness(t)
	data := testData(64 << 10)
	l := h.MustObjectLink(t, "film.mkv", data, map[string]any{"account_id": "alice", "downloads": 3, "delivery": "session"})
	alice := h.bearer(t, "alice")

	// A Range before any session: nothing to resume, nothing claimed.
	resp, _ := h.Do(t, http.MethodGet, l.URL, withHeader(alice, "Range", "bytes=0-99"))
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("Range before any session = %d, want 409", resp.StatusCode)
	}
	resp, _ = h.Do(t, http.MethodGet, l.URL, alice)
	first := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || first == "" {
		t.Fatalf("first GET = %d Location %q, want 303", resp.StatusCode, first)
	}
	for _, hdr := range []http.Header{alice, withHeader(alice, "Range", "bytes=100-199"), withHeader(alice, "Range", "bytes=-5")} {
		resp, _ := h.Do(t, http.MethodGet, l.URL, hdr)
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != first {
			t.Fatalf("GET (Range %q) = %d Location %q, want 303 to the first session", hdr.Get("Range"), resp.StatusCode, loc)
		}
	}
	resp, body := h.Do(t, http.MethodGet, first, withHeader(alice, "Range", "bytes=100-199"))
	if resp.StatusCode != http.StatusPartialContent || string(body) != string(data[100:200]) {
		t.Fatalf("range on the session = %d", resp.StatusCode)
	}
	if got := h.MustShowLink(t, l.ID).Remaining; got != 2 {
		t.Fatalf("remaining = %d after five GETs by one account, want 2 (one claim)", got)
	}
	// Someone else's token and an anonymous Range never reach the session.
	resp, _ = h.Do(t, http.MethodGet, l.URL, withHeader(h.bearer(t, "bob"), "Range", "bytes=0-1"))
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("bob's Range = %d, want 409", resp.StatusCode)
	}
	before := h.Ledger.Calls("")
	resp, _ = h.Do(t, http.MethodGet, l.URL, http.Header{"Range": {"bytes=0-1"}})
	if resp.StatusCode != http.StatusConflict || h.Ledger.Calls("") != before {
		t.Fatalf("anonymous Range = %d with %d ledger calls, want 409 and none", resp.StatusCode, h.Ledger.Calls("")-before)
	}
	resp, _ = h.Do(t, http.MethodGet, first, nil)
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anonymous GET of alice's session = %d, want 401", resp.StatusCode)
	}
	// A revoked session is not reused: the next GET claims anew.
	x := mustJSON[sessionJSON](t, must(h.Do(t, http.MethodGet, l.URL, alice)))
	h.AdminDo(t, http.MethodDelete, "/v1/sessions/"+x.SessionID, nil, nil)
	resp, _ = h.Do(t, http.MethodGet, l.URL, withHeader(alice, "Range", "bytes=0-1"))
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("Range after the revocation = %d, want 409", resp.StatusCode)
	}
	resp, _ = h.Do(t, http.MethodGet, l.URL, alice)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc == first {
		t.Fatalf("GET after the revocation = %d Location %q, want a new session", resp.StatusCode, loc)
	}
	if got := h.MustShowLink(t, l.ID).Remaining; got != 1 {
		t.Fatalf("remaining = %d, want 1", got)
	}
}

func TestASessionOfAnUnboundLinkIsAnonymous(t *testing.T) {
	h := jwtHarness(t)
	data := testData(1000)
	l := h.MustObjectLink(t, "open.bin", data, map[string]any{"delivery": "session"})
	resp, body := h.Do(t, http.MethodPost, l.URL+"/sessions", h.bearer(t, "alice"))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("mint = %d", resp.StatusCode)
	}
	x := mustJSON[sessionJSON](t, body)
	resp, body = h.Do(t, http.MethodGet, x.SessionURL, nil) // a download manager without the token
	if resp.StatusCode != http.StatusOK || string(body) != string(data) {
		t.Fatalf("anonymous GET of the session = %d", resp.StatusCode)
	}
}

func TestHeaderAuthTrustsOnlyTrustedPeersAndRecordsTheClientAddress(t *testing.T) {
	for _, tc := range []struct {
		name    string
		trusted string
		want    int
		client  string
	}{
		{"TrustedPeer", "127.0.0.0/8", http.StatusOK, "203.0.113.7 "},
		{"UntrustedPeer", "192.0.2.0/24", http.StatusUnauthorized, "127.0.0.1 "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := MustHarness(t, func(o *gateway.Options) {
				a, err := auth.New(context.Background(), auth.Config{Mode: auth.ModeHeader, Header: "X-Auth-Request-User",
					TrustedProxies: []netip.Prefix{netip.MustParsePrefix(tc.trusted)}})
				if err != nil {
					t.Fatal(err)
				}
				o.Auth = a
			})
			bound := h.MustObjectLink(t, "h.bin", testData(100), map[string]any{"account_id": "alice"})
			hdr := http.Header{"X-Auth-Request-User": {"alice"}, "X-Forwarded-For": {"198.51.100.1, 203.0.113.7"}}
			resp, _ := h.Do(t, http.MethodGet, bound.URL, hdr)
			if resp.StatusCode != tc.want {
				t.Fatalf("GET with the account header = %d, want %d", resp.StatusCode, tc.want)
			}
			open := h.MustObjectLink(t, "o.bin", testData(100), nil)
			h.Do(t, http.MethodGet, open.URL, hdr)
			_, body := h.AdminDo(t, http.MethodGet, "/v1/links/"+open.ID+"/grants", nil, nil)
			if !strings.Contains(string(body), `"client":"`+tc.client) {
				t.Fatalf("grants %s, want the client %q", body, tc.client)
			}
		})
	}
}

func withHeader(h http.Header, kv ...string) http.Header {
	out := h.Clone()
	for i := 0; i < len(kv); i += 2 {
		out.Set(kv[i], kv[i+1])
	}
	return out
}

func must(resp *http.Response, body []byte) []byte { return body }
