package admin

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"log/slog"
	"net/http"

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
func (a *Auth) Throttled(r *http.Request) *Refusal {
	v := a.v
	if v.lim.Quiet() {
		return nil
	}
	p, ok := v.lim.Throttled(v.lim.AddrKey(a.clientAddr(r), authKind), a.clock())
	if !ok {
		return nil
	}
	a.metrics.AdminAuthThrottled.Inc()
	return &Refusal{Problem: problem.TooManyAuthFailures, RetryAfter: retryAfter(p.Left)}
}

// SignIn verifies key, the text of the bootstrap token or of an API key,
// as RequireScope verifies a bearer, and returns who it is: while r's
// address is under penalty it is refused unread (429); an unknown,
// malformed, revoked or expired key is a 401 that counts toward the
// penalty. Errors: *Refusal, the ledger's (ErrUnavailable).
func (a *Auth) SignIn(r *http.Request, key string) (Principal, error) {
	if ref := a.Throttled(r); ref != nil {
		return Principal{}, ref
	}
	now := a.clock()
	p, fail, err := a.v.verify(r.Context(), "Bearer "+key, now)
	if err != nil {
		return Principal{}, err
	}
	if fail != nil {
		return Principal{}, a.countFailure(r, fail, "console sign-in failed")
	}
	a.TouchKey(r.Context(), p)
	return p, nil
}

// TouchKey records a use of p's key as a bearer's request does: its
// last_used_at moves at most once per TouchEvery per process (and
// KeyTouch itself writes at most once a minute, whatever the processes
// do). The console calls it for each request of a signed-in session, so a
// key used only through the console shows when it was last used, not
// when it signed in. The bootstrap token has no row.
func (a *Auth) TouchKey(ctx context.Context, p Principal) {
	if p.Bootstrap || p.KeyID == ledger.BootstrapKeyID || !a.v.due(p.KeyID, a.clock()) {
		return
	}
	if _, err := a.v.keys.KeyTouch(ctx, p.KeyID); err != nil {
		a.log.WarnContext(ctx, "key last use not recorded", "key_id", p.KeyID, "err", err)
	}
}

// Console sessions of the bootstrap token are bound to the token they
// were opened with. A key's session ends when the key is revoked (its row
// says so); the token has no row, and replacing GATEWAY_ADMIN_TOKEN is
// how it is retired, so the session's secret itself carries the binding:
// 16 random bytes followed by the first 16 bytes of an HMAC-SHA256 of
// them keyed by the token. A process checks that MAC against the token it
// is configured with (ConsoleSessionBound) on every request, so once the
// token is replaced, the sessions opened with the old one are refused by
// every process running with the new one, while the ledger, which keeps
// only the secret's SHA-256 as for any session, never holds anything
// derived from the token.
const (
	sessionNonceLen = 16
	sessionMACLen   = 16
)

// NewConsoleSession returns the secret of a new console session for p
// (its cookie's value: 32 bytes in unpadded base64url, as
// apikey.NewSession's) and its SHA-256, the only form the ledger stores.
// For the bootstrap token the secret is bound to the token configured
// now (see above); for a key it is 32 random bytes.
func (a *Auth) NewConsoleSession(p Principal) (secret string, hash []byte) {
	if !p.Bootstrap {
		return apikey.NewSession()
	}
	var raw [sessionNonceLen + sessionMACLen]byte
	rand.Read(raw[:sessionNonceLen]) // never fails (Go 1.24+)
	copy(raw[sessionNonceLen:], a.sessionMAC(raw[:sessionNonceLen]))
	secret = base64.RawURLEncoding.EncodeToString(raw[:])
	return secret, apikey.Hash(secret)
}

// ConsoleSessionBound reports whether secret, the cookie of a console
// session the ledger says the bootstrap token opened, was made with the
// token this process is configured with now: false once the token was
// replaced (or when there is none), and for a session opened before
// sessions were bound. Compared in constant time.
func (a *Auth) ConsoleSessionBound(secret string) bool {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(secret)
	if err != nil || len(raw) != sessionNonceLen+sessionMACLen || a.v.bootstrap == "" {
		return false
	}
	return hmac.Equal(raw[sessionNonceLen:], a.sessionMAC(raw[:sessionNonceLen]))
}

// sessionMAC is the MAC binding a bootstrap session's nonce to the
// configured token.
func (a *Auth) sessionMAC(nonce []byte) []byte {
	m := hmac.New(sha256.New, []byte(a.v.bootstrap))
	m.Write([]byte("dlgate console session\x00"))
	m.Write(nonce)
	return m.Sum(nil)[:sessionMACLen]
}

// RefuseSession counts a console cookie that opens no session (signed
// out, expired, its key revoked, or never one) as a failed
// authentication of r's address, and returns its 401.
func (a *Auth) RefuseSession(r *http.Request) *Refusal {
	return a.countFailure(r, &failure{reason: "session", presented: true}, "console session refused")
}

// countFailure counts f against r's address, logs it and returns the 401.
func (a *Auth) countFailure(r *http.Request, f *failure, msg string) *Refusal {
	now := a.clock()
	a.metrics.AdminAuthFailures.WithLabelValues(f.reason).Inc()
	a.log.LogAttrs(r.Context(), slog.LevelDebug, msg, slog.String("reason", f.reason))
	key := a.v.lim.AddrKey(a.clientAddr(r), authKind)
	if p, started := a.v.lim.Refused(key, now, 1); started {
		a.metrics.AdminAuthPenalties.Inc()
		a.log.LogAttrs(r.Context(), slog.LevelWarn, "admin authentication throttled", slog.String("client", a.clientAddr(r).String()),
			slog.Int("strike", p.Strike), slog.Int("retry_after", retryAfter(p.Left)))
	}
	return &Refusal{Problem: problem.AdminUnauthorized}
}

// Allow checks that p holds scope sc (the bootstrap token holds every
// one), and returns ctx carrying p as the caller and the ledger's actor,
// so that the changes a core then makes are audited as p's, or the 403
// insufficient-scope naming sc. The console calls it for each request of
// a signed-in session, as RequireScope does for a bearer.
func (a *Auth) Allow(r *http.Request, p Principal, sc apikey.Scope) (context.Context, *Refusal) {
	if info := httpx.InfoOf(r); info != nil {
		info.Actor = p.KeyID
	}
	if !p.Scopes.Has(sc) {
		a.log.InfoContext(r.Context(), "console request refused", "reason", "insufficient_scope", "key_id", p.KeyID, "scope", string(sc))
		return nil, &Refusal{Problem: problem.InsufficientScope, Detail: "This key does not hold the scope " + string(sc) + ", which this request needs."}
	}
	ctx := ledger.WithActor(r.Context(), ledger.Actor{KeyID: p.KeyID, KeyName: p.KeyName, RequestID: httpx.RequestID(r)})
	return WithPrincipal(ctx, p), nil
}
