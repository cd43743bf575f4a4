// Package token derives, checks and hashes the bearer tokens in link and
// session URLs (SPEC §2). It imports nothing internal.
//
// A token (format v2) is 32 bytes in unpadded base64url:
//
//	id part = HMAC-SHA256(secret, "dlgate/v2/" kind "/id\x00" rowID)[:16]
//	tag     = HMAC-SHA256(secret, "dlgate/v2/" kind "/tag\x00" id part)[:16]
//	token   = base64url(id part || tag)
//
// The id part is deterministic so an idempotent retry, or `links show`,
// returns the same URL without the raw token ever being stored. The tag
// makes the token self-checking: a forged or mistyped token is refused
// before any database query.
package token

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"sync"
)

// Len is the length of every token: 32 bytes in unpadded base64url.
const Len = 43

const (
	idLen  = 16
	tagLen = 16
	rawLen = idLen + tagLen
)

// Kind separates the derivation domains so a link token can never be
// replayed as a session token of a row that happens to share its id.
type Kind string

const (
	Link    Kind = "link"
	Session Kind = "session"
)

// domain returns the HMAC message prefix of kind for part ("id" or "tag").
// The NUL ends the prefix so no row id can extend it into another domain.
func domain(kind Kind, part string) []byte {
	return []byte("dlgate/v2/" + string(kind) + "/" + part + "\x00")
}

// Prefixes of the two kinds the gateway uses, built once: Check runs on
// every public request.
var (
	linkTag    = domain(Link, "tag")
	sessionTag = domain(Session, "tag")
)

func tagDomain(kind Kind) []byte {
	switch kind {
	case Link:
		return linkTag
	case Session:
		return sessionTag
	}
	return domain(kind, "tag")
}

// strict rejects base64 whose unused trailing bits are not zero, so each
// token has exactly one spelling.
var strict = base64.RawURLEncoding.Strict()

// key is one secret with a pool of HMAC states keyed by it. hmac's Reset
// restores the saved keyed state, so a pooled HMAC costs only the
// message's blocks, not the key schedule: Check runs on every public
// request (BenchmarkCheck).
type key struct {
	pool sync.Pool // of *macState
}

type macState struct {
	h   hash.Hash
	sum [sha256.Size]byte
}

func newKey(secret []byte) *key {
	secret = append([]byte(nil), secret...)
	k := &key{}
	k.pool.New = func() any { return &macState{h: hmac.New(sha256.New, secret)} }
	return k
}

// mac writes HMAC(secret, prefix || msg), truncated, into out.
func (k *key) mac(out []byte, prefix, msg []byte) {
	m := k.pool.Get().(*macState)
	m.h.Reset()
	m.h.Write(prefix)
	m.h.Write(msg)
	copy(out, m.h.Sum(m.sum[:0]))
	k.pool.Put(m)
}

func (k *key) derive(kind Kind, id string) string {
	var raw [rawLen]byte
	k.mac(raw[:idLen], domain(kind, "id"), []byte(id))
	k.mac(raw[idLen:], tagDomain(kind), raw[:idLen])
	return base64.RawURLEncoding.EncodeToString(raw[:])
}

// Keys derives tokens with the current secret and checks them against the
// current and the previous secrets, so a secret can be rotated without
// breaking live links (GATEWAY_SECRET_PREVIOUS). It is safe for concurrent
// use.
type Keys struct {
	keys []*key // current first
}

// NewKeys returns the Keys of current and the older secrets in previous,
// newest first. The secrets are copied.
func NewKeys(current []byte, previous ...[]byte) *Keys {
	ks := &Keys{keys: []*key{newKey(current)}}
	for _, p := range previous {
		ks.keys = append(ks.keys, newKey(p))
	}
	return ks
}

// Derive returns the token of row id under the current secret.
func (ks *Keys) Derive(kind Kind, id string) string {
	return ks.keys[0].derive(kind, id)
}

// DeriveAll returns the token of row id under the current secret, then
// under each previous secret in order. A stored Hash matches at most one.
func (ks *Keys) DeriveAll(kind Kind, id string) []string {
	out := make([]string, len(ks.keys))
	for i, k := range ks.keys {
		out[i] = k.derive(kind, id)
	}
	return out
}

// Match returns the token of row id whose Hash is hash, trying the current
// secret first. When none matches (the row was made under a secret no
// longer configured) it returns the current secret's token and false.
func (ks *Keys) Match(kind Kind, id string, hash []byte) (string, bool) {
	all := ks.DeriveAll(kind, id)
	for _, tok := range all {
		if hmac.Equal(Hash(tok), hash) {
			return tok, true
		}
	}
	return all[0], false
}

// Check reports whether tok is a token of kind made under the current or a
// previous secret: 43 characters of [A-Za-z0-9_-], canonical base64url,
// and a tag that matches its id part. Whatever it answers, no database was
// asked; a true only means the gateway minted the token at some time.
func (ks *Keys) Check(kind Kind, tok string) bool {
	if !Base64URL(tok, Len) {
		return false
	}
	var src [Len]byte
	copy(src[:], tok)
	var raw [rawLen]byte
	// The shape check already excluded the CR and LF that the decoder
	// would skip, so exactly rawLen bytes come out of a good token.
	if n, err := strict.Decode(raw[:], src[:]); err != nil || n != rawLen {
		return false
	}
	prefix := tagDomain(kind)
	var tag [tagLen]byte
	for _, k := range ks.keys {
		k.mac(tag[:], prefix, raw[:idLen])
		if hmac.Equal(tag[:], raw[idLen:]) {
			return true
		}
	}
	return false
}

// Base64URL reports whether s is exactly n characters of unpadded
// base64url ([A-Za-z0-9_-]): the shape of a token, checked before any
// decoding or lookup. (apikey checks its keys' bodies with it too.)
func Base64URL(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_':
		default:
			return false
		}
	}
	return true
}

// Hash returns SHA-256 of the token's text, the only form stored at rest.
// Hashing the text rather than the decoded bytes means two spellings that
// decode alike (non-canonical trailing bits) can never both match.
func Hash(tok string) []byte {
	h := sha256.Sum256([]byte(tok))
	return h[:]
}
