package auth_test

import (
	"strings"
	"testing"

	"github.com/dlgate/dlgate/auth"
)

func TestHeaderMode(t *testing.T) {
	// 127.0.0.1 is deliberately outside the trusted list, as for a gateway
	// reached directly rather than through the proxy.
	a := MustNew(t, auth.Config{
		Mode:           auth.ModeHeader,
		Header:         "x-auth-request-user",
		TrustedProxies: mustPrefixes(t, "10.0.0.0/8, fd00::/8"),
	})
	cases := []struct {
		name        string
		remote      string
		header      []string
		wantAccount string
		wantAddr    string
		wantReason  string
	}{
		{"TrustedProxyNamesTheAccount", "10.0.0.5:4000", []string{"X-Auth-Request-User", "alice", "X-Forwarded-For", "198.51.100.7"}, "alice", "198.51.100.7", ""},
		{"TrustedIPv6Proxy", "[fd00::5]:4000", []string{"X-Auth-Request-User", "alice"}, "alice", "fd00::5", ""},
		{"UntrustedPeerIsIgnored", "127.0.0.1:4000", []string{"X-Auth-Request-User", "alice", "X-Forwarded-For", "10.0.0.5"}, "", "127.0.0.1", ""},
		{"UntrustedPublicPeerIsIgnored", "198.51.100.7:4000", []string{"X-Auth-Request-User", "admin"}, "", "198.51.100.7", ""},
		{"UntrustedPeerWithAnInvalidValueIsStillIgnored", "127.0.0.1:4000", []string{"X-Auth-Request-User", strings.Repeat("a", 300)}, "", "127.0.0.1", ""},
		{"TrustedProxyWithoutTheHeaderIsAnonymous", "10.0.0.5:4000", nil, "", "10.0.0.5", ""},
		{"TrustedProxyWithAnEmptyValueIsAnonymous", "10.0.0.5:4000", []string{"X-Auth-Request-User", ""}, "", "10.0.0.5", ""},
		{"TrustedProxyWithTwoValuesIsRefused", "10.0.0.5:4000", []string{"X-Auth-Request-User", "mallory", "X-Auth-Request-User", "alice"}, "", "10.0.0.5", auth.ReasonMalformed},
		{"TrustedProxyWithAControlCharacterIsRefused", "10.0.0.5:4000", []string{"X-Auth-Request-User", "alice\x01"}, "", "10.0.0.5", auth.ReasonBadAccount},
		{"TrustedProxyWithAnOverlongValueIsRefused", "10.0.0.5:4000", []string{"X-Auth-Request-User", strings.Repeat("a", 256)}, "", "10.0.0.5", auth.ReasonBadAccount},
		{"BearerTokenDoesNotCount", "127.0.0.1:4000", []string{"Authorization", "Bearer x.y.z"}, "", "127.0.0.1", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := a.Authenticate(newRequest(tc.remote, tc.header...))
			if c.Account != tc.wantAccount || c.Addr.String() != tc.wantAddr || auth.Reason(err) != tc.wantReason {
				t.Fatalf("Authenticate = %+v, %v; want account %q from %s, reason %q", c, err, tc.wantAccount, tc.wantAddr, tc.wantReason)
			}
		})
	}
}
