package gateway_test

import (
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/auth"
	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/internal/refusal"
)

// TestFailedAuthenticationsAreThrottledPerAddress (SPEC §6): more than 20
// failed authentications from one address within 10 s, and the address is
// answered 429 with Retry-After without its key being checked, a good key
// included, until the penalty ends. Another address is unaffected, and the
// open routes answer throughout. Addresses come through a trusted proxy's
// X-Forwarded-For, as the gateway's client address (SPEC §8).
func TestFailedAuthenticationsAreThrottledPerAddress(t *testing.T) {
	h := MustHarness(t, func(o *gateway.Options) {
		trusted := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("::1/128")}
		o.ClientAddr = func(r *http.Request) netip.Addr { return auth.ClientAddr(r, trusted) }
	})
	good := h.MustKey(t, "good", "links:read").Key
	from := func(addr, key, path string) (*http.Response, []byte) {
		return h.AdminDoAs(t, key, http.MethodGet, path, nil, http.Header{"X-Forwarded-For": {addr}})
	}
	const attacker, bystander = "192.0.2.7", "198.51.100.9"
	lookups := h.Ledger.Calls("KeyGetByHash")
	var statuses []int
	for range 30 {
		guess, _ := apikey.New() // well-formed: each one checked costs a lookup
		resp, body := from(attacker, guess, "/v1/links")
		statuses = append(statuses, resp.StatusCode)
		if resp.StatusCode == http.StatusTooManyRequests {
			mustProblem(t, resp, body, http.StatusTooManyRequests, "too-many-authentication-failures")
			if ra := resp.Header.Get("Retry-After"); ra != "10" {
				t.Errorf("Retry-After = %q, want 10 (the first penalty, 10 s)", ra)
			}
		}
	}
	want := append(slices.Repeat([]int{http.StatusUnauthorized}, refusal.AuthFailures+1),
		slices.Repeat([]int{http.StatusTooManyRequests}, 30-refusal.AuthFailures-1)...)
	if !slices.Equal(statuses, want) {
		t.Errorf("30 bad keys from one address = %v, want 21 × 401 then 9 × 429", statuses)
	}
	if n := h.Ledger.Calls("KeyGetByHash") - lookups; n != refusal.AuthFailures+1 {
		t.Errorf("the 30 bad keys cost %d lookups, want 21: a throttled key is never checked", n)
	}

	// During the penalty: a good key from the address is refused too.
	resp, body := from(attacker, good, "/v1/links")
	mustProblem(t, resp, body, http.StatusTooManyRequests, "too-many-authentication-failures")
	resp, body = from(attacker, testAdminToken, "/v1/links")
	mustProblem(t, resp, body, http.StatusTooManyRequests, "too-many-authentication-failures")
	// The open routes are never throttled.
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/openapi.json"} {
		if resp, body := from(attacker, "", p); resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s from the throttled address = %d %s, want 200", p, resp.StatusCode, body)
		}
	}
	// Another address is unaffected, for good and bad keys alike.
	if resp, body := from(bystander, good, "/v1/links"); resp.StatusCode != http.StatusOK {
		t.Errorf("a good key from another address = %d %s, want 200", resp.StatusCode, body)
	}
	resp, body = from(bystander, unknownKey, "/v1/links")
	mustProblem(t, resp, body, http.StatusUnauthorized, "unauthorized")

	// The penalty ends after Retry-After.
	h.Clock.Advance(refusal.AuthWindow)
	if resp, body := from(attacker, good, "/v1/links"); resp.StatusCode != http.StatusOK {
		t.Errorf("a good key from the address after the penalty = %d %s, want 200", resp.StatusCode, body)
	}
	if warns := h.Logs.Records(t, "admin authentication throttled"); len(warns) != 1 || warns[0]["client"] != attacker {
		t.Errorf("penalty warnings = %v, want one naming %s", warns, attacker)
	}
	metrics := string(mustBody(t, h, http.MethodGet, "/metrics"))
	for _, line := range []string{
		`gateway_admin_auth_failures_total{reason="unknown"} 22`,
		"gateway_admin_auth_throttled_total 11",
		"gateway_admin_auth_penalties_total 1",
	} {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("/metrics has no line %q", line)
		}
	}
	if strings.Contains(h.Logs.String(), good) {
		t.Error("a key's text is in the log")
	}
}
