package gateway_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/dlgate/dlgate/token"
)

func TestRevokingTheLinkEndsItsSessions(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "rv.bin", testData(1000), nil)
	s := h.MustMint(t, l)
	if resp, _ := h.Do(t, http.MethodGet, s.SessionURL, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET before revocation = %d, want 200", resp.StatusCode)
	}

	resp, body := h.AdminDo(t, http.MethodPost, "/v1/links/"+l.ID+"/revoke", nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke = %d %s", resp.StatusCode, body)
	}
	if got := mustJSON[linkJSON](t, body); got.ActiveSessions == nil || *got.ActiveSessions != 0 {
		t.Errorf("active_sessions after revocation = %v, want 0", got.ActiveSessions)
	}
	for _, method := range []string{http.MethodGet, http.MethodHead} {
		resp, body := h.Do(t, method, s.SessionURL, http.Header{"Range": {"bytes=0-9"}})
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s after revocation = %d, want 404", method, resp.StatusCode)
			continue
		}
		if method == http.MethodGet {
			mustProblem(t, resp, body, http.StatusNotFound, "session-unavailable")
		}
	}
	resp, body = h.Do(t, http.MethodPost, l.URL+"/sessions", nil)
	mustProblem(t, resp, body, http.StatusNotFound, "link-unavailable")
}

func TestDeletingASessionRevokesIt(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "del.bin", testData(1000), nil)
	s := h.MustMint(t, l)
	keep := h.MustMint(t, l)

	resp, body := h.AdminDo(t, http.MethodDelete, "/v1/sessions/"+s.SessionID, nil, nil)
	if resp.StatusCode != http.StatusNoContent || len(body) != 0 {
		t.Fatalf("DELETE session = %d %q, want 204 and no body", resp.StatusCode, body)
	}
	resp, body = h.Do(t, http.MethodGet, s.SessionURL, nil)
	mustProblem(t, resp, body, http.StatusNotFound, "session-unavailable")

	// Idempotent, and other sessions of the link live on.
	if resp, _ := h.AdminDo(t, http.MethodDelete, "/v1/sessions/"+s.SessionID, nil, nil); resp.StatusCode != http.StatusNoContent {
		t.Errorf("second DELETE = %d, want 204", resp.StatusCode)
	}
	if resp, _ := h.Do(t, http.MethodGet, keep.SessionURL, nil); resp.StatusCode != http.StatusOK {
		t.Errorf("the other session = %d, want 200", resp.StatusCode)
	}
	resp, body = h.AdminDo(t, http.MethodDelete, "/v1/sessions/01900000-0000-7000-8000-000000000000", nil, nil)
	mustProblem(t, resp, body, http.StatusNotFound, "not-found")
}

func TestDeadSessionsLookAlike(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "dead.bin", testData(100), map[string]any{"session": map[string]any{"ttl": 60}})
	revoked, expired := h.MustMint(t, l), h.MustMint(t, l)
	if resp, _ := h.AdminDo(t, http.MethodDelete, "/v1/sessions/"+revoked.SessionID, nil, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE = %d", resp.StatusCode)
	}
	h.Clock.Advance(61 * time.Second)
	var first *problemJSON
	for name, u := range map[string]string{
		"Revoked":   revoked.SessionURL,
		"Expired":   expired.SessionURL,
		"Unknown":   h.Server.PublicURL + "/s/" + testKeys.Derive(token.Session, "nope"),
		"LinkToken": l.URL[len(h.Server.PublicURL+"/d/"):],
	} {
		if name == "LinkToken" {
			// A link token is not a session token (derivation domains differ).
			u = h.Server.PublicURL + "/s/" + u
		}
		resp, body := h.Do(t, http.MethodGet, u, nil)
		p := mustProblem(t, resp, body, http.StatusNotFound, "session-unavailable")
		p.RequestID = ""
		if first == nil {
			first = &p
		} else if p != *first {
			t.Errorf("%s = %+v, want the same as %+v", name, p, *first)
		}
	}
}
