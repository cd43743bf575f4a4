// Package token derives, checks and hashes the bearer tokens in link and
// session URLs (SPEC §2). It imports nothing internal.
package token

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
)

// Len is the length of every token: 32 bytes in unpadded base64url.
const Len = 43

// Kind separates the derivation domains so a link token can never be
// replayed as a session token of a row that happens to share its id.
type Kind string

const (
	Link    Kind = "link"
	Session Kind = "session"
)

// Derive returns HMAC-SHA256(secret, kind ":" id) as unpadded base64url.
// Deriving instead of storing lets an idempotent retry return the same URL
// while the database only ever holds Hash(token).
func Derive(secret []byte, kind Kind, id string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(kind))
	m.Write([]byte{':'})
	m.Write([]byte(id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Valid reports whether s has the shape of a token: exactly 43 characters of
// [A-Za-z0-9_-]. Anything else is answered 404 without a database query.
func Valid(s string) bool {
	if len(s) != Len {
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
