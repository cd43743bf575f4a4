package e2e

import (
	"crypto"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Issuer is a small OIDC-style identity provider run by a test: it
// publishes a JSON Web Key Set at /jwks.json (and the discovery document
// that points at it) and signs tokens with its private keys. Which keys
// the set publishes can change while the gateways run (key rotation).
type Issuer struct {
	URL      string // the issuer ("iss") and base of its endpoints
	Audience string // the "aud" of its tokens

	keys map[string]*issuerKey // every key the issuer holds, by kid

	mu        sync.Mutex
	published []string    // kids in the set, in order
	fetches   []time.Time // when /jwks.json was served
	issued    []string    // every token signed, to look for in logs
}

// issuerKey is one signing key.
type issuerKey struct {
	kid    string
	method jwt.SigningMethod
	priv   crypto.Signer
}

// MustStartIssuer starts an issuer holding an RSA key for each of
// rsaKIDs and an Ed25519 key for each of edKIDs, and publishing the kids
// of publish. It stops in Cleanup.
func MustStartIssuer(tb testing.TB, audience string, rsaKIDs, edKIDs, publish []string) *Issuer {
	tb.Helper()
	iss := &Issuer{Audience: audience, keys: map[string]*issuerKey{}}
	for _, kid := range rsaKIDs {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			tb.Fatal(err)
		}
		iss.keys[kid] = &issuerKey{kid: kid, method: jwt.SigningMethodRS256, priv: k}
	}
	for _, kid := range edKIDs {
		_, k, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			tb.Fatal(err)
		}
		iss.keys[kid] = &issuerKey{kid: kid, method: jwt.SigningMethodEdDSA, priv: k}
	}
	iss.Publish(tb, publish...)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jwks.json", iss.serveJWKS)
	mux.HandleFunc("GET /.well-known/openid-configuration", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{ //nolint:errcheck // the client is gone
			"issuer": iss.URL, "jwks_uri": iss.URL + "/jwks.json",
			"id_token_signing_alg_values_supported": []string{"RS256", "EdDSA"},
		})
	})
	srv := httptest.NewServer(mux)
	tb.Cleanup(srv.Close)
	iss.URL = srv.URL
	return iss
}

// Publish replaces the published key set with the keys named by kids.
func (iss *Issuer) Publish(tb testing.TB, kids ...string) {
	tb.Helper()
	for _, kid := range kids {
		if iss.keys[kid] == nil {
			tb.Fatalf("issuer: no key %q", kid)
		}
	}
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.published = append([]string(nil), kids...)
}

// Fetches returns how many times the key set was served, and when last.
func (iss *Issuer) Fetches() (int, time.Time) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	if len(iss.fetches) == 0 {
		return 0, time.Time{}
	}
	return len(iss.fetches), iss.fetches[len(iss.fetches)-1]
}

// Issued returns every token signed so far.
func (iss *Issuer) Issued() []string {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	return append([]string(nil), iss.issued...)
}

func (iss *Issuer) serveJWKS(w http.ResponseWriter, _ *http.Request) {
	iss.mu.Lock()
	iss.fetches = append(iss.fetches, time.Now())
	keys := make([]map[string]string, 0, len(iss.published))
	for _, kid := range iss.published {
		keys = append(keys, publicJWK(iss.keys[kid]))
	}
	iss.mu.Unlock()
	w.Header().Set("Content-Type", "application/jwk-set+json")
	w.Header().Set("Cache-Control", "max-age=60")
	json.NewEncoder(w).Encode(map[string]any{"keys": keys}) //nolint:errcheck // the client is gone
}

// publicJWK is the public half of k as a JWK (RFC 7517, RFC 8037).
func publicJWK(k *issuerKey) map[string]string {
	b64 := base64.RawURLEncoding.EncodeToString
	switch pub := k.priv.Public().(type) {
	case *rsa.PublicKey:
		return map[string]string{"kty": "RSA", "kid": k.kid, "use": "sig", "alg": "RS256",
			"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes())}
	case ed25519.PublicKey:
		return map[string]string{"kty": "OKP", "crv": "Ed25519", "kid": k.kid, "use": "sig", "alg": "EdDSA", "x": b64(pub)}
	}
	panic("issuer: unexpected key type")
}

// Claims are the claims of a token for sub valid from now for an hour;
// edit the map for other cases.
func (iss *Issuer) Claims(sub string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"iss": iss.URL, "aud": iss.Audience, "sub": sub,
		"iat": now.Unix(), "nbf": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
}

// Token signs a token for sub with the key kid.
func (iss *Issuer) Token(tb testing.TB, kid, sub string) string {
	tb.Helper()
	return iss.Sign(tb, kid, kid, iss.Claims(sub))
}

// Sign signs claims with the key keyKID and names headerKID as the "kid"
// of the token's header ("" for none): they differ for a token that
// pretends to come from another key.
func (iss *Issuer) Sign(tb testing.TB, keyKID, headerKID string, claims jwt.MapClaims) string {
	tb.Helper()
	k := iss.keys[keyKID]
	if k == nil {
		tb.Fatalf("issuer: no key %q", keyKID)
	}
	t := jwt.NewWithClaims(k.method, claims)
	if headerKID != "" {
		t.Header["kid"] = headerKID
	}
	s, err := t.SignedString(k.priv)
	if err != nil {
		tb.Fatal(err)
	}
	iss.note(s)
	return s
}

// SignRaw signs claims with method and key as they are, for the tokens an
// attacker would forge (alg none, HS256 keyed with a public key).
func (iss *Issuer) SignRaw(tb testing.TB, method jwt.SigningMethod, key any, headerKID string, claims jwt.MapClaims) string {
	tb.Helper()
	t := jwt.NewWithClaims(method, claims)
	if headerKID != "" {
		t.Header["kid"] = headerKID
	}
	s, err := t.SignedString(key)
	if err != nil {
		tb.Fatal(err)
	}
	iss.note(s)
	return s
}

// PublicPEM is the PEM text of the public key kid, as an algorithm
// confusion attack would use it for an HS256 secret.
func (iss *Issuer) PublicPEM(tb testing.TB, kid string) []byte {
	tb.Helper()
	der, err := x509.MarshalPKIXPublicKey(iss.keys[kid].priv.Public())
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

func (iss *Issuer) note(tok string) {
	iss.mu.Lock()
	defer iss.mu.Unlock()
	iss.issued = append(iss.issued, tok)
}

// jwtSignature is the signature part of a JWT: unique to the token, so
// finding it anywhere means the token leaked.
func jwtSignature(tok string) string {
	return tok[strings.LastIndexByte(tok, '.')+1:]
}
