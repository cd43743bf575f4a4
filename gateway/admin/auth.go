package admin

import (
	"context"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/metrics"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/internal/refusal"
	"github.com/dlgate/dlgate/ledger"
)

// Authentication of the admin listener (SPEC §6, "Keys and scopes"). Every
// route but the open ones (health, readiness, metrics, the OpenAPI
// document) passes one check, in this order:
//
//  1. An address under penalty for failed authentications is answered 429
//     too-many-authentication-failures with Retry-After, before its
//     credential is even read: a good key from that address is refused too
//     until the penalty ends, so guessing costs the guesser, not the
//     database (internal/refusal, refusal.AuthConfig: the 21st failure
//     within 10 s starts a 10 s penalty, doubling on repeats).
//  2. Authorization: Bearer (RFC 9110 §11.1: the scheme is
//     case-insensitive; RFC 6750 §2.1) is the bootstrap token
//     (GATEWAY_ADMIN_TOKEN, compared in constant time, every scope) or an
//     API key. A bearer that is not a key's shape is refused without a
//     lookup; a key is found by its SHA-256, first in this process's short
//     cache of verified keys (KeyCacheTTL), then in the ledger. Missing,
//     malformed, unknown, revoked or expired: 401 unauthorized with
//     WWW-Authenticate: Bearer, and the failure counts toward the penalty.
//  3. The route's scope, declared in the route table: without it, 403
//     insufficient-scope naming it (RFC 6750 §3.1). A route for the
//     bootstrap token only (the profiler) refuses every key.
//
// The request then goes on with the key as the ledger's actor
// (ledger.WithActor), so that the changes it makes are audited as the
// key's, and a key's last_used_at is moved at most once a minute per
// process (TouchEvery).

// Auth is the check of the admin listener's credentials: a bearer's
// (RequireScope, RequireBootstrap), and the console's sign-in form and
// session cookie (signin.go), all through one verifier.
type Auth struct {
	clock
	v          *verifier
	log        *slog.Logger
	metrics    *metrics.Metrics
	clientAddr func(*http.Request) netip.Addr
}

// RequireScope wraps an admin route that needs scope sc: the key must
// hold it (the bootstrap token holds every scope).
func (a *Auth) RequireScope(sc apikey.Scope, next http.Handler) http.Handler {
	detail := "This key does not hold the scope " + string(sc) + ", which this request needs."
	// RFC 6750 §3.1: insufficient_scope, with the scope it needs (§3).
	challenge := `Bearer realm="admin", error="insufficient_scope", scope="` + string(sc) + `"`
	return a.require(func(p Principal) bool { return p.Scopes.Has(sc) }, string(sc), detail, challenge, next)
}

// RequireBootstrap wraps an admin route only the bootstrap admin token
// may use (Go's profiler: profiles reveal memory contents and cost CPU).
func (a *Auth) RequireBootstrap(next http.Handler) http.Handler {
	const detail = "Only the bootstrap admin token (GATEWAY_ADMIN_TOKEN) may use this route; no API key can."
	challenge := `Bearer realm="admin", error="insufficient_scope"`
	return a.require(func(p Principal) bool { return p.Bootstrap }, "bootstrap", detail, challenge, next)
}

// require is the check of RequireScope and RequireBootstrap: allowed says
// whether an authenticated principal may go on; need, detail and
// challenge are the 403's.
func (a *Auth) require(allowed func(Principal) bool, need, detail, challenge string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := a.v
		now := a.clock()
		addr := a.clientAddr(r)
		var key refusal.Key
		if !v.lim.Quiet() {
			key = v.lim.AddrKey(addr, authKind)
			if p, ok := v.lim.Throttled(key, now); ok {
				a.metrics.AdminAuthThrottled.Inc()
				// RFC 9110 §10.2.3: counted from when the answer is sent.
				w.Header().Set("Retry-After", strconv.Itoa(retryAfter(p.Left)))
				problem.Write(w, r, problem.TooManyAuthFailures, "")
				return
			}
		}
		p, fail, err := v.verify(r.Context(), r.Header.Get("Authorization"), now)
		if err != nil {
			problem.Fail(a.log, w, r, err, problem.AdminUnauthorized)
			return
		}
		if fail != nil {
			if key == 0 {
				key = v.lim.AddrKey(addr, authKind)
			}
			a.refuseCredential(w, r, fail, key, now)
			return
		}
		if info := httpx.InfoOf(r); info != nil {
			info.Actor = p.KeyID
		}
		if !p.Bootstrap && v.due(p.KeyID, now) {
			if _, err := v.keys.KeyTouch(r.Context(), p.KeyID); err != nil {
				a.log.WarnContext(r.Context(), "key last use not recorded", "key_id", p.KeyID, "err", err)
			}
		}
		if !allowed(p) {
			a.log.InfoContext(r.Context(), "admin request refused", "reason", "insufficient_scope", "key_id", p.KeyID, "scope", need)
			w.Header().Set("WWW-Authenticate", challenge)
			problem.Write(w, r, problem.InsufficientScope, detail)
			return
		}
		ctx := ledger.WithActor(r.Context(), ledger.Actor{KeyID: p.KeyID, KeyName: p.KeyName, RequestID: httpx.RequestID(r)})
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, principalKey{}, p)))
	})
}

// refuseCredential answers 401 for a refused credential and counts the
// failure against the address; the failure that starts a penalty is
// logged once, as a warning.
func (a *Auth) refuseCredential(w http.ResponseWriter, r *http.Request, f *failure, key refusal.Key, now time.Time) {
	a.metrics.AdminAuthFailures.WithLabelValues(f.reason).Inc()
	attrs := []slog.Attr{slog.String("reason", f.reason)}
	if f.keyID != "" {
		attrs = append(attrs, slog.String("key_id", f.keyID))
	}
	a.log.LogAttrs(r.Context(), slog.LevelDebug, "admin authentication failed", attrs...)
	if p, started := a.v.lim.Refused(key, now, 1); started {
		a.metrics.AdminAuthPenalties.Inc()
		a.log.LogAttrs(r.Context(), slog.LevelWarn, "admin authentication throttled", slog.String("client", a.clientAddr(r).String()),
			slog.Int("strike", p.Strike), slog.Int("retry_after", retryAfter(p.Left)))
	}
	// RFC 6750 §3: a challenge on every 401; an error code only when a
	// token was presented (§3.1).
	challenge := `Bearer realm="admin"`
	if f.presented {
		challenge += `, error="invalid_token"`
	}
	w.Header().Set("WWW-Authenticate", challenge)
	problem.Write(w, r, problem.AdminUnauthorized, "")
}

// Forget makes this process refuse the key id at once, without waiting for
// its cache entry to lapse: DELETE /v1/keys/{id} calls it.
func (a *Auth) Forget(id string) { a.v.forget(id) }

// retryAfter is d in whole seconds, rounded up, at least 1.
func retryAfter(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}
