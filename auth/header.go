package auth

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// headerAuth takes the account from a header set by an authenticating
// proxy (oauth2-proxy's X-Auth-Request-User and the like), SPEC §8 mode
// "header".
type headerAuth struct {
	name    string
	trusted []netip.Prefix
}

var _ Authenticator = headerAuth{}

func newHeaderAuth(c Config) (headerAuth, error) {
	switch {
	case c.Header == "":
		return headerAuth{}, fmt.Errorf("GATEWAY_AUTH=header needs GATEWAY_AUTH_HEADER")
	case !validHeaderName(c.Header):
		return headerAuth{}, fmt.Errorf("GATEWAY_AUTH_HEADER: %q is not a header name", c.Header)
	case len(c.TrustedProxies) == 0:
		// Without trusted proxies no request could ever carry an account.
		return headerAuth{}, fmt.Errorf("GATEWAY_AUTH=header needs GATEWAY_TRUSTED_PROXIES")
	}
	return headerAuth{name: http.CanonicalHeaderKey(c.Header), trusted: c.TrustedProxies}, nil
}

// Authenticate trusts the header only from a direct peer inside the trusted
// proxies: from anyone else it is ignored, whatever it says, because the
// client can write it. An empty value is anonymous (a proxy's way of saying
// "nobody logged in"); a repeated header or an invalid account is refused.
func (a headerAuth) Authenticate(r *http.Request) (Caller, error) {
	c := Caller{Addr: ClientAddr(r, a.trusted)}
	if peer, ok := parseRemoteAddr(r.RemoteAddr); !ok || !isTrusted(peer, a.trusted) {
		return c, nil
	}
	values := r.Header.Values(a.name)
	switch {
	case len(values) == 0 || len(values) == 1 && values[0] == "":
		return c, nil
	case len(values) > 1:
		// A proxy that appends rather than replaces would pass the
		// client's own copy along with its own: which is which is unknowable.
		return c, refuse(ReasonMalformed)
	case !validAccount(values[0]):
		return c, refuse(ReasonBadAccount)
	}
	c.Account = values[0]
	return c, nil
}

// validHeaderName reports whether s is a token (RFC 9110 §5.1).
func validHeaderName(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool {
		return r <= ' ' || r >= 0x7f || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r)
	})
}
