package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// setKey is one usable key of a JSON Web Key Set.
type setKey struct {
	kid      string
	declared string // the JWK's "alg", "" when absent
	verifyKey
}

// accepts reports whether a token signed with alg may be verified by k: the
// key's type must call for alg (RFC 7517 §4.1 "kty") and a declared "alg"
// (§4.4) must name it too. Ed25519 is the fully-specified name of EdDSA
// over Ed25519 (RFC 9864), which some providers publish.
func (k setKey) accepts(alg string) bool {
	if alg != k.alg {
		return false
	}
	return k.declared == "" || k.declared == alg || k.declared == "Ed25519" && alg == algEdDSA
}

// jwk holds the members of a public JWK (RFC 7517 §4, RFC 7518 §6, RFC 8037
// §2) this package reads.
type jwk struct {
	Kty string `json:"kty"`
	Kid string `json:"kid"`
	Alg string `json:"alg"`
	Use string `json:"use"`
	Crv string `json:"crv"`
	N   string `json:"n"`
	E   string `json:"e"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// parseJWKS returns the usable keys of a JWK Set document and how many it
// skipped. Keys it cannot use (encryption keys, other curves or types, RSA
// under 2048 bits, repeated kids) are skipped rather than failing the set:
// providers publish such keys beside the signing ones. A set with no usable
// key at all is an error, so a broken document never replaces good keys.
func parseJWKS(b []byte) (keys []setKey, skipped int, err error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, 0, errors.New("not a JSON Web Key Set")
	}
	seen := make(map[string]bool)
	for _, raw := range doc.Keys {
		var j jwk
		if json.Unmarshal(raw, &j) != nil {
			skipped++
			continue
		}
		k, err := parseJWK(j)
		if err != nil || k.kid != "" && seen[k.kid] {
			// A repeated kid would make the choice of key ambiguous; the
			// first one wins.
			skipped++
			continue
		}
		seen[k.kid] = true
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, skipped, fmt.Errorf("no usable signing key among %d", len(doc.Keys))
	}
	return keys, skipped, nil
}

func parseJWK(j jwk) (setKey, error) {
	if j.Use != "" && j.Use != "sig" {
		return setKey{}, errors.New("not a signing key")
	}
	var pub any
	switch j.Kty {
	case "RSA":
		n, err1 := b64(j.N)
		e, err2 := b64(j.E)
		if err1 != nil || err2 != nil || len(n) == 0 || len(e) == 0 || len(e) > 4 {
			return setKey{}, errors.New("bad RSA key")
		}
		exp := int(new(big.Int).SetBytes(e).Int64())
		if exp < 3 || exp%2 == 0 {
			return setKey{}, errors.New("bad RSA exponent")
		}
		pub = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: exp}
	case "EC":
		if j.Crv != "P-256" {
			return setKey{}, errors.New("unsupported curve")
		}
		x, err1 := b64(j.X)
		y, err2 := b64(j.Y)
		if err1 != nil || err2 != nil || len(x) != 32 || len(y) != 32 {
			return setKey{}, errors.New("bad EC key")
		}
		// Refuses points off the curve (invalid-curve attacks).
		k, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
		if err != nil {
			return setKey{}, errors.New("bad EC key")
		}
		pub = k
	case "OKP":
		x, err := b64(j.X)
		if j.Crv != "Ed25519" || err != nil || len(x) != ed25519.PublicKeySize {
			return setKey{}, errors.New("unsupported OKP key")
		}
		pub = ed25519.PublicKey(x)
	default:
		return setKey{}, errors.New("unsupported key type")
	}
	vk, err := keyFor(pub)
	if err != nil {
		return setKey{}, err
	}
	return setKey{kid: j.Kid, declared: j.Alg, verifyKey: vk}, nil
}

// b64 decodes base64url without padding (RFC 7515 §2), tolerating padding
// some providers add anyway.
func b64(s string) ([]byte, error) {
	return base64.RawURLEncoding.DecodeString(strings.TrimRight(s, "="))
}
