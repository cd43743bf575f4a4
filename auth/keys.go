package auth

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
)

// The JWS algorithms (RFC 7518 §3.1, RFC 8037 §3.1) this package verifies,
// one per key type, so a key's type alone decides the only acceptable alg.
const (
	algHS256 = "HS256"
	algRS256 = "RS256"
	algES256 = "ES256"
	algEdDSA = "EdDSA"
)

// publicAlgs are the algorithms a JWKS may serve.
var publicAlgs = []string{algRS256, algES256, algEdDSA}

// minHMACKeyLen: RFC 7518 §3.2 requires an HS256 key of at least the hash
// size, 256 bits.
const minHMACKeyLen = 32

// minRSABits refuses keys small enough to factor (NIST SP 800-131A).
const minRSABits = 2048

// verifyKey is a key and the one algorithm it verifies.
type verifyKey struct {
	alg string
	key any // []byte, *rsa.PublicKey, *ecdsa.PublicKey or ed25519.PublicKey
}

// parseStaticKey reads GATEWAY_JWT_KEY (see Config.JWTKey). Errors never
// quote the value: it may be a secret.
func parseStaticKey(v string) (verifyKey, error) {
	if path, ok := strings.CutPrefix(v, "@"); ok {
		b, err := os.ReadFile(path)
		if err != nil {
			return verifyKey{}, fmt.Errorf("GATEWAY_JWT_KEY: %v", err)
		}
		v = strings.TrimSpace(string(b))
	}
	if strings.HasPrefix(strings.TrimSpace(v), "-----BEGIN") {
		k, err := parsePEMKey([]byte(v))
		if err != nil {
			return verifyKey{}, fmt.Errorf("GATEWAY_JWT_KEY: %v", err)
		}
		return k, nil
	}
	if len(v) < minHMACKeyLen {
		return verifyKey{}, fmt.Errorf("GATEWAY_JWT_KEY: an HS256 secret must be at least %d bytes (RFC 7518 §3.2), got %d", minHMACKeyLen, len(v))
	}
	return verifyKey{alg: algHS256, key: []byte(v)}, nil
}

// parsePEMKey reads the first PEM block: a PKIX or PKCS #1 public key or a
// certificate. A private key is refused rather than reduced to its public
// half, so it does not go on living in the gateway's environment.
func parsePEMKey(b []byte) (verifyKey, error) {
	block, _ := pem.Decode(b)
	if block == nil {
		return verifyKey{}, errors.New("no PEM block found")
	}
	var pub any
	var err error
	switch block.Type {
	case "PUBLIC KEY":
		pub, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		pub, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case "CERTIFICATE":
		var cert *x509.Certificate
		if cert, err = x509.ParseCertificate(block.Bytes); err == nil {
			pub = cert.PublicKey
		}
	default:
		if strings.Contains(block.Type, "PRIVATE KEY") {
			return verifyKey{}, errors.New("give the public key, not the private key")
		}
		return verifyKey{}, fmt.Errorf("PEM block %q is not a public key or certificate", block.Type)
	}
	if err != nil {
		return verifyKey{}, errors.New("PEM block does not hold a valid public key")
	}
	return keyFor(pub)
}

// keyFor returns pub with the one algorithm it verifies, refusing types,
// curves and sizes this package does not accept.
func keyFor(pub any) (verifyKey, error) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		if k.N.BitLen() < minRSABits {
			return verifyKey{}, fmt.Errorf("RSA key of %d bits, want at least %d", k.N.BitLen(), minRSABits)
		}
		return verifyKey{alg: algRS256, key: k}, nil
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return verifyKey{}, fmt.Errorf("ECDSA key on %s, want P-256 (ES256)", k.Curve.Params().Name)
		}
		return verifyKey{alg: algES256, key: k}, nil
	case ed25519.PublicKey:
		if len(k) != ed25519.PublicKeySize {
			return verifyKey{}, errors.New("Ed25519 key of wrong size")
		}
		return verifyKey{alg: algEdDSA, key: k}, nil
	}
	return verifyKey{}, fmt.Errorf("unsupported key type %T, want RSA, ECDSA P-256 or Ed25519", pub)
}
