package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dlgate/dlgate/apikey"
)

// BootstrapKeyID is the key id of the bootstrap admin token
// (GATEWAY_ADMIN_TOKEN) wherever a key id is recorded: an audit entry's
// actor, a console session signed in with it. The token holds every
// scope and has no row (SPEC §6).
const BootstrapKeyID = "bootstrap"

// MaxKeyName is the longest key name, in characters.
const MaxKeyName = 100

// ErrForbidden: the actor's key does not hold what the change needs;
// errors.As a *ScopeError for the scope. The admin API answers 403
// insufficient-scope naming it.
var ErrForbidden = errors.New("ledger: insufficient scope")

// ScopeError names the scope an actor lacks.
type ScopeError struct {
	Missing apikey.Scope
}

func (e *ScopeError) Error() string { return "ledger: insufficient scope: " + string(e.Missing) }

// Is makes errors.Is(err, ErrForbidden) true for every ScopeError.
func (e *ScopeError) Is(target error) bool { return target == ErrForbidden }

// Key is an operator's API key as the ledger keeps it: never its text,
// whose SHA-256 is all that is stored (SPEC §6).
type Key struct {
	ID        string
	Name      string
	Scopes    apikey.Scopes
	CreatedAt time.Time
	ExpiresAt *time.Time // nil: never expires
	RevokedAt *time.Time
	// LastUsedAt is when a request last used the key, to the minute
	// (KeyTouch); nil when none has.
	LastUsedAt *time.Time
	// ReadAt is the database's clock when KeyGetByHash read the row (zero
	// elsewhere), by which Refusal judges expiry.
	ReadAt time.Time
}

// Refusal says why k cannot authenticate at now (ReasonRevoked,
// ReasonExpired), or "" when it can.
func (k *Key) Refusal(now time.Time) Reason {
	switch {
	case k.RevokedAt != nil:
		return ReasonRevoked
	case k.ExpiresAt != nil && !k.ExpiresAt.After(now):
		return ReasonExpired
	}
	return ""
}

// KeyCreateParams is a new key.
type KeyCreateParams struct {
	// Name says what the key is for (1 to MaxKeyName characters, no
	// control characters); names need not be unique.
	Name   string
	Scopes apikey.Scopes // at least one
	// SecretHash is apikey.Hash of the key's text.
	SecretHash []byte
	// ExpiresAt is when the key stops working; zero for never. The caller
	// computes it from expires_in, as a link's expiry is computed.
	ExpiresAt time.Time
}

// Validate checks the rules every backend enforces on a new key. Errors:
// ErrInvalid.
func (p *KeyCreateParams) Validate() error {
	switch {
	case !validName(p.Name):
		return fmt.Errorf("%w: a key name is 1 to %d characters, without control characters", ErrInvalid, MaxKeyName)
	case p.Scopes.Len() == 0 || !apikey.All().Covers(p.Scopes):
		return fmt.Errorf("%w: a key needs at least one scope", ErrInvalid)
	case len(p.SecretHash) != 32:
		return fmt.Errorf("%w: the key's SHA-256 is required", ErrInvalid)
	}
	return nil
}

func validName(s string) bool {
	if s == "" || strings.TrimSpace(s) != s || !utf8.ValidString(s) || utf8.RuneCountInString(s) > MaxKeyName {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// KeyPage is a cursor page of keys.
type KeyPage struct {
	Keys []Key
	Next string // cursor for the next page, "" at the end
}

// Keys are the operators' API keys (SPEC §6): created, listed, looked up
// by the admin API's verifier, touched when used, revoked.
type Keys interface {
	// KeyCreate stores a new key with a new UUIDv7 id. With an actor in
	// ctx (WithActor) it writes the key.created audit entry in the same
	// transaction, and, unless the actor is the bootstrap token, refuses
	// under the lock of the actor's key row an actor key that is unknown,
	// revoked or expired by then (ErrRefused with reason unknown, revoked
	// or expired) or does not hold keys:write and every scope given (a
	// *ScopeError naming the first missing): a key revoked while another
	// process still trusts it cannot make a key that outlives the
	// revocation. Errors: ErrInvalid, ErrConflict (the hash is taken),
	// ErrRefused, ErrForbidden, ErrUnavailable.
	KeyCreate(ctx context.Context, p KeyCreateParams) (*Key, error)
	// KeyGet returns a key by id. Errors: ErrNotFound, ErrUnavailable.
	KeyGet(ctx context.Context, id string) (*Key, error)
	// KeyGetByHash returns the key whose secret's SHA-256 is hash, with
	// ReadAt the database's clock. A revoked or expired key comes back
	// with ErrRefused (reason revoked or expired) beside it, so that a
	// caller that checks the error never takes it for valid, and can
	// still log its id. Errors: ErrNotFound, ErrRefused, ErrUnavailable.
	KeyGetByHash(ctx context.Context, hash []byte) (*Key, error)
	// KeyList lists keys newest first (created_at, then id, descending),
	// revoked and expired ones included, limit (1 to MaxListLimit; 0 for
	// DefaultListLimit) at a time. Errors: ErrInvalid (bad cursor or
	// limit), ErrUnavailable.
	KeyList(ctx context.Context, cursor string, limit int) (KeyPage, error)
	// KeyRevoke revokes the key and ends its console sessions; revoking
	// again keeps the first time and writes no second audit entry.
	// Errors: ErrNotFound, ErrUnavailable.
	KeyRevoke(ctx context.Context, id string) error
	// KeyTouch sets the key's last_used_at to the database's now when it
	// is a minute or more older (or unset), in one conditional UPDATE, and
	// reports whether it wrote. However many processes touch a key, the
	// database sees at most one write a minute; a caller should still
	// touch a key at most once a minute itself, so that most uses cost no
	// statement. An unknown key is not an error (nothing is written).
	// Errors: ErrUnavailable.
	KeyTouch(ctx context.Context, id string) (bool, error)
}
