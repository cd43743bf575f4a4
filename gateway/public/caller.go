package public

import (
	"errors"
	"net/http"
	"strings"

	"github.com/dlgate/dlgate/auth"
	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/problem"
)

// authenticate verifies the caller (SPEC §8). It never touches the
// database, so it runs before any lookup: a wrong or invalid credential
// costs nothing and never consumes anything. The error is nil, wraps
// auth.ErrInvalidCredential, or is auth.ErrUnavailable.
func (h *Handler) authenticate(r *http.Request) (auth.Caller, error) {
	c, err := h.Auth.Authenticate(r)
	if err != nil {
		// Why goes to the debug log and a metric, never the credential.
		reason := auth.Reason(err)
		h.Metrics.AuthFailures.WithLabelValues(reason).Inc()
		h.Log.DebugContext(r.Context(), "credentials rejected", "reason", reason)
	}
	if info := httpx.InfoOf(r); info != nil && c.Addr.IsValid() {
		info.Client = c.Addr.String()
	}
	return c, err
}

// refuseCredential answers a credential that authenticate refused: 401
// with the RFC 6750 §3.1 invalid_token challenge, or 503 while the keys
// to check it cannot be had.
func (h *Handler) refuseCredential(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, auth.ErrUnavailable) {
		w.Header().Set("Retry-After", "5")
		problem.Write(w, r, problem.AuthUnavailable, "")
		return
	}
	w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	problem.Write(w, r, problem.AuthRequired, "")
}

// requireAccount answers 401 with a bare Bearer challenge (RFC 6750 §3:
// no error code when the request had no credential at all).
func requireAccount(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("WWW-Authenticate", "Bearer")
	problem.Write(w, r, problem.AuthRequired, "")
}

// clientDescriptor is the grant's short, secret-free note of who claimed:
// the client address (SPEC §8, trusted proxies applied) and the first
// words of the User-Agent.
func clientDescriptor(r *http.Request, c auth.Caller) string {
	host := "-"
	if c.Addr.IsValid() {
		host = c.Addr.String()
	}
	return host + " " + UserAgent(r, 120)
}

// UserAgent is r's User-Agent cut to n bytes with anything but printable
// ASCII dropped, safe for logs and grants.
func UserAgent(r *http.Request, n int) string {
	ua := strings.Map(func(c rune) rune {
		if c < 0x20 || c > 0x7e {
			return -1
		}
		return c
	}, r.UserAgent())
	if len(ua) > n {
		ua = ua[:n]
	}
	return ua
}
