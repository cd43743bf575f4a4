package admin

import (
	"context"
	"crypto/sha256"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/internal/refusal"
	"github.com/dlgate/dlgate/ledger"
)

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
