// Package apikey is the admin API's credentials (SPEC §6, "Keys and
// scopes"): the scopes a key may hold, the key's text and its hash, and the
// console session secret a key signs in for (SPEC §11). It imports nothing
// internal and does no I/O; the ledger stores what it makes, the HTTP layer
// asks it.
//
// A key is "dlk_" and 43 characters of unpadded base64url: 32 bytes from
// crypto/rand. Only its SHA-256 is stored (Hash); the text is shown once,
// to whoever created it.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"math/bits"
	"strings"

	"github.com/dlgate/dlgate/token"
)

// Scope is one permission of the admin API. Each admin route needs exactly
// one.
type Scope string

// The scopes of SPEC §6, in their canonical order.
const (
	LinksRead     Scope = "links:read"
	LinksWrite    Scope = "links:write" // create, revoke, add allowance
	ObjectsRead   Scope = "objects:read"
	ObjectsWrite  Scope = "objects:write" // upload
	ObjectsDelete Scope = "objects:delete"
	SessionsWrite Scope = "sessions:write" // revoke
	AuditRead     Scope = "audit:read"
	KeysWrite     Scope = "keys:write" // create and revoke keys, with at most the scopes held
)

// known lists the scopes in canonical order; a scope's bit in Scopes is
// its index here.
var known = [...]Scope{LinksRead, LinksWrite, ObjectsRead, ObjectsWrite, ObjectsDelete, SessionsWrite, AuditRead, KeysWrite}

// ErrUnknownScope is wrapped by the errors of ParseScope and Parse.
var ErrUnknownScope = errors.New("apikey: unknown scope")

// ParseScope returns the scope named s. Errors: ErrUnknownScope, naming s.
func ParseScope(s string) (Scope, error) {
	for _, k := range known {
		if string(k) == s {
			return k, nil
		}
	}
	return "", fmt.Errorf("%w %q (known: %s)", ErrUnknownScope, s, strings.Join(All().Strings(), ", "))
}

func (sc Scope) bit() Scopes {
	for i, k := range known {
		if k == sc {
			return 1 << i
		}
	}
	return 0
}

// Scopes is a set of scopes. The zero value is the empty set.
type Scopes uint16

// All returns the set of every scope: what the bootstrap admin token
// holds.
func All() Scopes { return 1<<len(known) - 1 }

// Of returns the set of the given scopes; an unknown one is left out.
func Of(scopes ...Scope) Scopes {
	var s Scopes
	for _, sc := range scopes {
		s |= sc.bit()
	}
	return s
}

// Parse returns the set of the named scopes; a name given twice counts
// once. Errors: ErrUnknownScope, naming the first unknown name.
func Parse(names []string) (Scopes, error) {
	var s Scopes
	for _, n := range names {
		sc, err := ParseScope(n)
		if err != nil {
			return 0, err
		}
		s |= sc.bit()
	}
	return s, nil
}

// ParseText is Parse of names separated by spaces, the form String writes
// (and the ledger stores).
func ParseText(text string) (Scopes, error) { return Parse(strings.Fields(text)) }

// Has reports whether sc is in s. An unknown scope is in no set.
func (s Scopes) Has(sc Scope) bool {
	b := sc.bit()
	return b != 0 && s&b == b
}

// Covers reports whether s holds every scope of other: a key may only give
// a new key scopes it holds itself (SPEC §6).
func (s Scopes) Covers(other Scopes) bool { return other&^s == 0 }

// Missing returns the scopes of want that s does not hold, in canonical
// order (nil when s covers want): the 403 names the first.
func (s Scopes) Missing(want Scopes) []Scope { return (want &^ s).List() }

// Len returns the number of scopes in s.
func (s Scopes) Len() int { return bits.OnesCount16(uint16(s & All())) }

// List returns the scopes of s in canonical order.
func (s Scopes) List() []Scope {
	var out []Scope
	for i, k := range known {
		if s&(1<<i) != 0 {
			out = append(out, k)
		}
	}
	return out
}

// Strings returns the names of the scopes of s in canonical order, never
// nil (a JSON array, even when empty).
func (s Scopes) Strings() []string {
	out := []string{}
	for _, k := range s.List() {
		out = append(out, string(k))
	}
	return out
}

// String returns the names of s in canonical order separated by spaces,
// the form ParseText reads.
func (s Scopes) String() string { return strings.Join(s.Strings(), " ") }

// MarshalText writes s as String does.
func (s Scopes) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads what MarshalText writes. Errors: ErrUnknownScope.
func (s *Scopes) UnmarshalText(b []byte) error {
	v, err := ParseText(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Key format.
const (
	// Prefix starts every key, so that a key found in a log or a
	// repository is recognisable as one (secret scanners match it).
	Prefix = "dlk_"
	// bodyLen is the base64url text of the 32 random bytes.
	bodyLen = 43
	// Len is the length of a key's text.
	Len     = len(Prefix) + bodyLen
	rawLen  = 32
	hashLen = sha256.Size
)

// strict refuses base64 whose unused trailing bits are set, so that a
// secret has one spelling only.
var strict = base64.RawURLEncoding.Strict()

// New returns a new key and its hash, the only form the ledger stores.
func New() (key string, hash []byte) {
	key = Prefix + newBody()
	return key, Hash(key)
}

// newBody is 32 bytes of crypto/rand in unpadded base64url.
func newBody() string {
	var raw [rawLen]byte
	rand.Read(raw[:]) // never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(raw[:])
}

// Valid reports whether s has the shape of a key: Prefix and 43 canonical
// base64url characters. A string that does not is refused without a
// database query; one that does may still be unknown.
func Valid(s string) bool {
	body, ok := strings.CutPrefix(s, Prefix)
	return ok && validBody(body)
}

// validBody reports whether s is 43 characters of [A-Za-z0-9_-] that
// decode, canonically, to 32 bytes.
func validBody(s string) bool {
	if !token.Base64URL(s, bodyLen) {
		return false
	}
	var raw [rawLen]byte
	n, err := strict.Decode(raw[:], []byte(s))
	return err == nil && n == rawLen
}

// Hash returns the SHA-256 of s's text: what the ledger stores of a key,
// and what a presented key is looked up by. The text is hashed, not the
// decoded bytes, as token.Hash does.
func Hash(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

// Matches reports, in constant time, whether hash is the Hash of s.
func Matches(s string, hash []byte) bool {
	sum := sha256.Sum256([]byte(s))
	return len(hash) == hashLen && subtle.ConstantTimeCompare(sum[:], hash) == 1
}

// Equal reports whether two secrets are the same, in time that depends on
// neither: the presented bearer against GATEWAY_ADMIN_TOKEN. Both are
// hashed first, so not even their lengths leak.
func Equal(presented, configured string) bool {
	a, b := sha256.Sum256([]byte(presented)), sha256.Sum256([]byte(configured))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// SessionLen is the length of a console session secret.
const SessionLen = bodyLen

// NewSession returns the secret of a new console session (the value of
// its cookie, SPEC §11: 32 bytes of crypto/rand in unpadded base64url) and
// its hash, the only form the ledger stores.
func NewSession() (secret string, hash []byte) {
	secret = newBody()
	return secret, Hash(secret)
}

// ValidSession reports whether s has the shape of a console session
// secret; a cookie that does not is refused without a database query.
func ValidSession(s string) bool { return validBody(s) }
