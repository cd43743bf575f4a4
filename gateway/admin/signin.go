package admin

import (
	"context"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
)

// Credentials presented outside an Authorization header: the operator
// console's sign-in form and its session cookie (gateway/console). They
// go through the same check as a bearer (auth.go): the same throttle,
// keyed by the same address, the same comparison of the bootstrap token
// and lookup of keys, and every failure counts toward the same penalty,
// so a guesser gains nothing by guessing through the console.

// Throttled returns the 429 of r's address while it is under penalty for
// failed authentications, nil otherwise. It reads no credential.
func (h *Handler) Throttled(r *http.Request) *Refusal {
	v := h.auth
	if v.lim.Quiet() {
		return nil
	}
	p, ok := v.lim.Throttled(v.lim.AddrKey(h.ClientAddr(r), authKind), h.Now())
	if !ok {
		return nil
	}
	h.Metrics.AdminAuthThrottled.Inc()
	return &Refusal{Problem: problem.TooManyAuthFailures, RetryAfter: retryAfter(p.Left)}
}

// SignIn verifies key, the text of the bootstrap token or of an API key,
// as RequireScope verifies a bearer, and returns who it is: while r's
// address is under penalty it is refused unread (429); an unknown,
// malformed, revoked or expired key is a 401 that counts toward the
// penalty. Errors: *Refusal, the ledger's (ErrUnavailable).
func (h *Handler) SignIn(r *http.Request, key string) (Principal, error) {
	if ref := h.Throttled(r); ref != nil {
		return Principal{}, ref
	}
	now := h.Now()
	p, fail, err := h.auth.verify(r.Context(), "Bearer "+key, now)
	if err != nil {
		return Principal{}, err
	}
	if fail != nil {
		return Principal{}, h.countFailure(r, fail, "console sign-in failed")
	}
	if !p.Bootstrap && h.auth.due(p.KeyID, now) {
		if _, err := h.auth.keys.KeyTouch(r.Context(), p.KeyID); err != nil {
			h.Log.WarnContext(r.Context(), "key last use not recorded", "key_id", p.KeyID, "err", err)
		}
	}
	return p, nil
}

// RefuseSession counts a console cookie that opens no session (signed
// out, expired, its key revoked, or never one) as a failed
// authentication of r's address, and returns its 401.
func (h *Handler) RefuseSession(r *http.Request) *Refusal {
	return h.countFailure(r, &failure{reason: "session", presented: true}, "console session refused")
}

// countFailure counts f against r's address, logs it and returns the 401.
func (h *Handler) countFailure(r *http.Request, f *failure, msg string) *Refusal {
	now := h.Now()
	h.Metrics.AdminAuthFailures.WithLabelValues(f.reason).Inc()
	h.Log.LogAttrs(r.Context(), slog.LevelDebug, msg, slog.String("reason", f.reason))
	key := h.auth.lim.AddrKey(h.ClientAddr(r), authKind)
	if p, started := h.auth.lim.Refused(key, now, 1); started {
		h.Metrics.AdminAuthPenalties.Inc()
		h.Log.LogAttrs(r.Context(), slog.LevelWarn, "admin authentication throttled", slog.String("client", h.ClientAddr(r).String()),
			slog.Int("strike", p.Strike), slog.Int("retry_after", retryAfter(p.Left)))
	}
	return &Refusal{Problem: problem.AdminUnauthorized}
}

// Allow checks that p holds scope sc (the bootstrap token holds every
// one), and returns ctx carrying p as the caller and the ledger's actor,
// so that the changes a core then makes are audited as p's, or the 403
// insufficient-scope naming sc. The console calls it for each request of
// a signed-in session, as RequireScope does for a bearer.
func (h *Handler) Allow(r *http.Request, p Principal, sc apikey.Scope) (context.Context, *Refusal) {
	if info := httpx.InfoOf(r); info != nil {
		info.Actor = p.KeyID
	}
	if !p.Scopes.Has(sc) {
		h.Log.InfoContext(r.Context(), "console request refused", "reason", "insufficient_scope", "key_id", p.KeyID, "scope", string(sc))
		return nil, &Refusal{Problem: problem.InsufficientScope, Detail: "This key does not hold the scope " + string(sc) + ", which this request needs."}
	}
	ctx := ledger.WithActor(r.Context(), ledger.Actor{KeyID: p.KeyID, KeyName: p.KeyName, RequestID: httpx.RequestID(r)})
	return WithPrincipal(ctx, p), nil
}

// PrincipalOfKey is who a console session's key is.
func PrincipalOfKey(k ledger.Key) Principal {
	return Principal{KeyID: k.ID, KeyName: k.Name, Scopes: k.Scopes, Bootstrap: k.ID == ledger.BootstrapKeyID}
}

// RetryAfterHeader is a Refusal's Retry-After value, "" for none.
func (e *Refusal) RetryAfterHeader() string {
	if e.RetryAfter <= 0 {
		return ""
	}
	return strconv.Itoa(e.RetryAfter)
}
