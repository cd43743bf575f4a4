package admin

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/gateway/httpx"
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

// KeyCacheTTL is how long a process trusts a key it has verified before it
// asks the ledger again. SPEC §6 wants a revocation refused by every
// process within 1 s: a process that read the key just before the
// revocation committed trusts it for at most KeyCacheTTL after it began
// that read, so every process refuses it at most KeyCacheTTL after the
// DELETE's answer, and the half second left over covers a request that
// passed the check just before. The process that revokes forgets the key
// at once. The price: one lookup per key per KeyCacheTTL per process
// instead of one per request.
const KeyCacheTTL = 500 * time.Millisecond

// TouchEvery is how often a process moves a key's last_used_at at most
// (KeyTouch, which itself writes at most once a minute whatever the
// processes do): most requests cost no statement for it.
const TouchEvery = time.Minute

// authKind names the admin listener's failures in the refusal limiter.
const authKind = "admin"

// maxRemembered bounds the verified keys cached and the keys whose touch
// is remembered: operators' keys are few, and only keys that verified
// take a place, so a guesser cannot fill either table.
const maxRemembered = 4096

// Principal is who an admin request authenticated as.
type Principal struct {
	KeyID   string // ledger.BootstrapKeyID for the admin token
	KeyName string
	Scopes  apikey.Scopes
	// Bootstrap: the admin token, which holds every scope and alone may
	// use the bootstrap routes.
	Bootstrap bool
}

type principalKey struct{}

// PrincipalOf returns the principal of an authenticated admin request.
func PrincipalOf(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// verifier is the per-process state of the check: the failure limiter,
// the cache of verified keys and the time of each key's last touch.
type verifier struct {
	keys      ledger.Keys
	bootstrap string
	lim       *refusal.Limiter
	looked    func() // counts a lookup in the ledger

	mu      sync.Mutex
	cache   map[[sha256.Size]byte]cachedKey
	touched map[string]time.Time // key id → last KeyTouch by this process
}

// cachedKey is a verified key and when this process stops trusting it.
type cachedKey struct {
	key   Principal
	until time.Time
}

func newVerifier(keys ledger.Keys, bootstrap string, looked func()) *verifier {
	return &verifier{keys: keys, bootstrap: bootstrap, lim: refusal.New(refusal.AuthConfig()), looked: looked,
		cache: map[[sha256.Size]byte]cachedKey{}, touched: map[string]time.Time{}}
}

// failure is why a credential was refused: the reason label of logs and
// gateway_admin_auth_failures_total, and whether a bearer token was
// presented at all (RFC 6750 §3.1: a request without one gets a challenge
// without an error code).
type failure struct {
	reason    string // missing, malformed, unknown, revoked, expired
	keyID     string // of a revoked or expired key, for the log
	presented bool
}

// verify finds who header's credential is, at now. A failure is returned
// as such; err is only the ledger's (ErrUnavailable), when the key could
// not be looked up at all.
func (v *verifier) verify(ctx context.Context, header string, now time.Time) (Principal, *failure, error) {
	scheme, tok, ok := strings.Cut(header, " ")
	if header == "" {
		return Principal{}, &failure{reason: "missing"}, nil
	}
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
		return Principal{}, &failure{reason: "malformed"}, nil
	}
	// Compared before anything else, in time that depends on neither
	// string, so that the token's shape decides nothing measurable.
	if v.bootstrap != "" && apikey.Equal(tok, v.bootstrap) {
		return Principal{KeyID: ledger.BootstrapKeyID, KeyName: ledger.BootstrapKeyID, Scopes: apikey.All(), Bootstrap: true}, nil, nil
	}
	if !apikey.Valid(tok) {
		return Principal{}, &failure{reason: "malformed", presented: true}, nil
	}
	hash := sha256.Sum256([]byte(tok)) // apikey.Hash, as an array for the map
	if p, ok := v.cached(hash, now); ok {
		return p, nil, nil
	}
	v.looked()
	k, err := v.keys.KeyGetByHash(ctx, hash[:])
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return Principal{}, &failure{reason: "unknown", presented: true}, nil
	case errors.Is(err, ledger.ErrRefused):
		f := &failure{reason: string(ledger.ReasonOf(err)), presented: true}
		if k != nil {
			f.keyID = k.ID
		}
		return Principal{}, f, nil
	case err != nil:
		return Principal{}, nil, err
	}
	p := Principal{KeyID: k.ID, KeyName: k.Name, Scopes: k.Scopes}
	v.remember(hash, p, k, now)
	return p, nil, nil
}

// cached returns the key of hash when this process verified it less than
// KeyCacheTTL ago and it has not expired since.
func (v *verifier) cached(hash [sha256.Size]byte, now time.Time) (Principal, bool) {
	v.mu.Lock()
	defer v.mu.Unlock()
	e, ok := v.cache[hash]
	if !ok || !now.Before(e.until) {
		return Principal{}, false
	}
	return e.key, true
}

// remember caches k, read by a lookup that began at start, until
// KeyCacheTTL after start, or until it expires if that is sooner. Expiry
// is the database's clock (Key.ReadAt is when the row was read by it), so
// the time left is carried over to this process's clock rather than
// compared with it.
func (v *verifier) remember(hash [sha256.Size]byte, p Principal, k *ledger.Key, start time.Time) {
	until := start.Add(KeyCacheTTL)
	if k.ExpiresAt != nil && !k.ReadAt.IsZero() {
		until = minTime(until, start.Add(k.ExpiresAt.Sub(k.ReadAt)))
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.cache) >= maxRemembered {
		for h, e := range v.cache {
			if !start.Before(e.until) {
				delete(v.cache, h)
			}
		}
		if len(v.cache) >= maxRemembered {
			return // still full of live keys: looked up each time instead
		}
	}
	v.cache[hash] = cachedKey{key: p, until: until}
}

// forget drops the key id from the cache, so that this process refuses it
// at once (it was revoked here, or the ledger refused it as an actor).
func (v *verifier) forget(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for h, e := range v.cache {
		if e.key.KeyID == id {
			delete(v.cache, h)
		}
	}
	delete(v.touched, id)
}

// due reports whether the key id should be touched at now, and if so
// marks it touched: at most once per TouchEvery per process, however many
// requests use the key at once.
func (v *verifier) due(id string, now time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if last, ok := v.touched[id]; ok && now.Sub(last) < TouchEvery {
		return false
	}
	if len(v.touched) >= maxRemembered {
		for k, last := range v.touched {
			if now.Sub(last) >= TouchEvery {
				delete(v.touched, k)
			}
		}
		if len(v.touched) >= maxRemembered {
			return false
		}
	}
	v.touched[id] = now
	return true
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// RequireScope wraps an admin route that needs scope sc: the key must
// hold it (the bootstrap token holds every scope).
func (h *Handler) RequireScope(sc apikey.Scope, next http.Handler) http.Handler {
	detail := "This key does not hold the scope " + string(sc) + ", which this request needs."
	// RFC 6750 §3.1: insufficient_scope, with the scope it needs (§3).
	challenge := `Bearer realm="admin", error="insufficient_scope", scope="` + string(sc) + `"`
	return h.require(func(p Principal) bool { return p.Scopes.Has(sc) }, string(sc), detail, challenge, next)
}

// RequireBootstrap wraps an admin route only the bootstrap admin token
// may use (Go's profiler: profiles reveal memory contents and cost CPU).
func (h *Handler) RequireBootstrap(next http.Handler) http.Handler {
	const detail = "Only the bootstrap admin token (GATEWAY_ADMIN_TOKEN) may use this route; no API key can."
	challenge := `Bearer realm="admin", error="insufficient_scope"`
	return h.require(func(p Principal) bool { return p.Bootstrap }, "bootstrap", detail, challenge, next)
}

// require is the check of RequireScope and RequireBootstrap: allowed says
// whether an authenticated principal may go on; need, detail and
// challenge are the 403's.
func (h *Handler) require(allowed func(Principal) bool, need, detail, challenge string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := h.auth
		now := h.Now()
		addr := h.ClientAddr(r)
		var key refusal.Key
		if !v.lim.Quiet() {
			key = v.lim.AddrKey(addr, authKind)
			if p, ok := v.lim.Throttled(key, now); ok {
				h.Metrics.AdminAuthThrottled.Inc()
				// RFC 9110 §10.2.3: counted from when the answer is sent.
				w.Header().Set("Retry-After", strconv.Itoa(retryAfter(p.Left)))
				problem.Write(w, r, problem.TooManyAuthFailures, "")
				return
			}
		}
		p, fail, err := v.verify(r.Context(), r.Header.Get("Authorization"), now)
		if err != nil {
			problem.Fail(h.Log, w, r, err, problem.AdminUnauthorized)
			return
		}
		if fail != nil {
			if key == 0 {
				key = v.lim.AddrKey(addr, authKind)
			}
			h.refuseCredential(w, r, fail, key, now)
			return
		}
		if info := httpx.InfoOf(r); info != nil {
			info.Actor = p.KeyID
		}
		if !p.Bootstrap && v.due(p.KeyID, now) {
			if _, err := v.keys.KeyTouch(r.Context(), p.KeyID); err != nil {
				h.Log.WarnContext(r.Context(), "key last use not recorded", "key_id", p.KeyID, "err", err)
			}
		}
		if !allowed(p) {
			h.Log.InfoContext(r.Context(), "admin request refused", "reason", "insufficient_scope", "key_id", p.KeyID, "scope", need)
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
func (h *Handler) refuseCredential(w http.ResponseWriter, r *http.Request, f *failure, key refusal.Key, now time.Time) {
	h.Metrics.AdminAuthFailures.WithLabelValues(f.reason).Inc()
	attrs := []slog.Attr{slog.String("reason", f.reason)}
	if f.keyID != "" {
		attrs = append(attrs, slog.String("key_id", f.keyID))
	}
	h.Log.LogAttrs(r.Context(), slog.LevelDebug, "admin authentication failed", attrs...)
	if p, started := h.auth.lim.Refused(key, now, 1); started {
		h.Metrics.AdminAuthPenalties.Inc()
		h.Log.LogAttrs(r.Context(), slog.LevelWarn, "admin authentication throttled", slog.String("client", h.ClientAddr(r).String()),
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
func (h *Handler) Forget(id string) { h.auth.forget(id) }

// retryAfter is d in whole seconds, rounded up, at least 1.
func retryAfter(d time.Duration) int {
	return max(1, int((d+time.Second-1)/time.Second))
}
