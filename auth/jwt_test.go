package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"math/big"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlgate/dlgate/auth"
	"github.com/golang-jwt/jwt/v5"
)

const (
	issuer   = "https://idp.example"
	audience = "dlgate"
)

// refusal is one credential that must be refused, and why.
type refusal struct {
	name  string
	cfg   auth.Config
	token string
	want  string
}

// refusals lists every refused credential of mode jwt with a fixed key; the
// JWKS ones are in jwks_test.go.
func refusals(t *testing.T) []refusal {
	k := keys()
	clk := newClock()
	now := clk.Now()
	hs := auth.Config{Mode: auth.ModeJWT, JWTKey: secret, Issuer: issuer, Audience: audience, Now: clk.Now}
	rsaPEM := MustPEM(t, &k.rsaA.PublicKey)
	ecPEM := MustPEM(t, &k.ec.PublicKey)
	edPEM := MustPEM(t, k.ed.Public())
	withKey := func(key string) auth.Config { c := hs; c.JWTKey = key; return c }
	good := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		c := claimsFor(now, "alice")
		c["iss"], c["aud"] = issuer, audience
		if edit != nil {
			edit(c)
		}
		return c
	}
	hs256 := func(edit func(jwt.MapClaims)) string {
		return MustSign(t, jwt.SigningMethodHS256, []byte(secret), "", good(edit))
	}
	none, err := jwt.NewWithClaims(jwt.SigningMethodNone, good(nil)).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	valid := hs256(nil)
	other := hs256(func(c jwt.MapClaims) { c["sub"] = "mallory" })
	parts, otherParts := strings.Split(valid, "."), strings.Split(other, ".")
	header := func(h string) string { return b64([]byte(h)) + "." + parts[1] + "." + parts[2] }

	return []refusal{
		{"AlgNone", hs, none, auth.ReasonAlgMismatch},
		{"AlgNoneWithAnRSAKey", withKey(rsaPEM), none, auth.ReasonAlgMismatch},
		{"HS256SignedWithTheRSAPublicKeyPEM", withKey(rsaPEM), MustSign(t, jwt.SigningMethodHS256, []byte(rsaPEM), "", good(nil)), auth.ReasonAlgMismatch},
		{"HS256SignedWithTheECPublicKeyPEM", withKey(ecPEM), MustSign(t, jwt.SigningMethodHS256, []byte(ecPEM), "", good(nil)), auth.ReasonAlgMismatch},
		{"HS256SignedWithTheEd25519PublicKeyPEM", withKey(edPEM), MustSign(t, jwt.SigningMethodHS256, []byte(edPEM), "", good(nil)), auth.ReasonAlgMismatch},
		{"RS256TokenForAnHS256Secret", hs, MustSign(t, jwt.SigningMethodRS256, k.rsaA, "", good(nil)), auth.ReasonAlgMismatch},
		{"ES256TokenForAnRSAKey", withKey(rsaPEM), MustSign(t, jwt.SigningMethodES256, k.ec, "", good(nil)), auth.ReasonAlgMismatch},
		{"UnknownAlg", hs, header(`{"alg":"HS1024","typ":"JWT"}`), auth.ReasonAlgMismatch},
		{"NoAlg", hs, header(`{"typ":"JWT"}`), auth.ReasonAlgMismatch},
		{"WrongSecret", hs, MustSign(t, jwt.SigningMethodHS256, []byte(strings.ToUpper(secret)), "", good(nil)), auth.ReasonBadSignature},
		{"WrongRSAKey", withKey(rsaPEM), MustSign(t, jwt.SigningMethodRS256, k.rsaB, "", good(nil)), auth.ReasonBadSignature},
		{"PayloadSwappedUnderTheSignature", hs, parts[0] + "." + otherParts[1] + "." + parts[2], auth.ReasonBadSignature},
		{"Expired", hs, hs256(func(c jwt.MapClaims) { c["exp"] = now.Add(-time.Hour).Unix() }), auth.ReasonExpired},
		{"ExpiredJustBeyondTheLeeway", hs, hs256(func(c jwt.MapClaims) { c["exp"] = now.Add(-31 * time.Second).Unix() }), auth.ReasonExpired},
		{"NotYetValid", hs, hs256(func(c jwt.MapClaims) { c["nbf"] = now.Add(time.Hour).Unix() }), auth.ReasonNotYetValid},
		{"MissingExp", hs, hs256(func(c jwt.MapClaims) { delete(c, "exp") }), auth.ReasonMissingClaim},
		{"ExpNotANumber", hs, hs256(func(c jwt.MapClaims) { c["exp"] = "tomorrow" }), auth.ReasonMalformed},
		{"WrongIssuer", hs, hs256(func(c jwt.MapClaims) { c["iss"] = "https://evil.example" }), auth.ReasonWrongIssuer},
		{"MissingIssuer", hs, hs256(func(c jwt.MapClaims) { delete(c, "iss") }), auth.ReasonMissingClaim},
		{"WrongAudience", hs, hs256(func(c jwt.MapClaims) { c["aud"] = []string{"other", "another"} }), auth.ReasonWrongAudience},
		{"MissingAudience", hs, hs256(func(c jwt.MapClaims) { delete(c, "aud") }), auth.ReasonMissingClaim},
		{"MissingAccountClaim", hs, hs256(func(c jwt.MapClaims) { delete(c, "sub") }), auth.ReasonMissingClaim},
		{"EmptyAccountClaim", hs, hs256(func(c jwt.MapClaims) { c["sub"] = "" }), auth.ReasonMissingClaim},
		{"NullAccountClaim", hs, hs256(func(c jwt.MapClaims) { c["sub"] = nil }), auth.ReasonMissingClaim},
		{"NumericAccountClaim", hs, hs256(func(c jwt.MapClaims) { c["sub"] = 42 }), auth.ReasonBadAccount},
		{"AccountOver255Bytes", hs, hs256(func(c jwt.MapClaims) { c["sub"] = strings.Repeat("a", 256) }), auth.ReasonBadAccount},
		{"AccountWithAControlCharacter", hs, hs256(func(c jwt.MapClaims) { c["sub"] = "alice\nlevel=ERROR" }), auth.ReasonBadAccount},
		{"TokenOver8KiB", hs, hs256(func(c jwt.MapClaims) { c["pad"] = strings.Repeat("x", 8<<10) }), auth.ReasonTooLarge},
		{"Garbage", hs, "not a token at all", auth.ReasonMalformed},
		{"GarbageThreeSegments", hs, "a.b.c", auth.ReasonMalformed},
		{"GarbageBase64", hs, "!!!.???.###", auth.ReasonMalformed},
		{"HeaderNotJSON", hs, header("nope"), auth.ReasonMalformed},
		{"FourSegments", hs, valid + ".x", auth.ReasonMalformed},
	}
}

func TestJWTRefusals(t *testing.T) {
	for _, tc := range refusals(t) {
		t.Run(tc.name, func(t *testing.T) {
			c, err := MustNew(t, tc.cfg).Authenticate(bearer(tc.token))
			if !errors.Is(err, auth.ErrInvalidCredential) || auth.Reason(err) != tc.want {
				t.Fatalf("Authenticate = %v (reason %q), want ErrInvalidCredential with reason %q", err, auth.Reason(err), tc.want)
			}
			if c.Account != "" {
				t.Errorf("refused caller has account %q", c.Account)
			}
			if !c.Addr.IsValid() {
				t.Errorf("refused caller has no address")
			}
		})
	}
}

func TestErrorTextNeverContainsToken(t *testing.T) {
	for _, tc := range refusals(t) {
		t.Run(tc.name, func(t *testing.T) {
			var logs logBuffer
			tc.cfg.Logger = logs.Logger()
			_, err := MustNew(t, tc.cfg).Authenticate(bearer(tc.token))
			if err == nil {
				t.Fatal("token accepted")
			}
			assertNoLeak(t, "error", err.Error(), tc.token)
			assertNoLeak(t, "reason", auth.Reason(err), tc.token)
			assertNoLeak(t, "log", logs.String(), tc.token)
		})
	}
}

func TestJWTAcceptsAValidHS256Token(t *testing.T) {
	clk := newClock()
	a := MustNew(t, auth.Config{Mode: auth.ModeJWT, JWTKey: secret, Issuer: issuer, Audience: audience, Now: clk.Now})
	claims := claimsFor(clk.Now(), "alice")
	claims["iss"], claims["aud"] = issuer, []string{"other", audience}
	c, err := a.Authenticate(bearer(MustSign(t, jwt.SigningMethodHS256, []byte(secret), "", claims)))
	if err != nil || c.Account != "alice" {
		t.Fatalf("Authenticate = %+v, %v; want alice", c, err)
	}
	if c.Addr.String() != "192.0.2.10" {
		t.Errorf("Addr = %v, want 192.0.2.10", c.Addr)
	}
}

func TestJWTAcceptsPEMPublicKeys(t *testing.T) {
	k := keys()
	rsaCert := selfSigned(t)
	pkcs1 := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&k.rsaA.PublicKey)}))
	cases := []struct {
		name   string
		key    string
		method jwt.SigningMethod
		signer any
	}{
		{"RS256", MustPEM(t, &k.rsaA.PublicKey), jwt.SigningMethodRS256, k.rsaA},
		{"RS256FromPKCS1", pkcs1, jwt.SigningMethodRS256, k.rsaA},
		{"RS256FromCertificate", rsaCert, jwt.SigningMethodRS256, k.rsaA},
		{"ES256", MustPEM(t, &k.ec.PublicKey), jwt.SigningMethodES256, k.ec},
		{"EdDSA", MustPEM(t, k.ed.Public()), jwt.SigningMethodEdDSA, k.ed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			a := MustNew(t, auth.Config{Mode: auth.ModeJWT, JWTKey: tc.key, Now: clk.Now})
			tok := MustSign(t, tc.method, tc.signer, "some-kid", claimsFor(clk.Now(), "alice"))
			if c, err := a.Authenticate(bearer(tok)); err != nil || c.Account != "alice" {
				t.Fatalf("Authenticate = %+v, %v; want alice", c, err)
			}
		})
	}
}

func selfSigned(t *testing.T) string {
	k := keys().rsaA
	tmpl := &x509.Certificate{SerialNumber: bigOne(), NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(nil, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func TestJWTKeyFromFile(t *testing.T) {
	k := keys()
	dir := t.TempDir()
	pemFile, secretFile := filepath.Join(dir, "key.pem"), filepath.Join(dir, "secret")
	os.WriteFile(pemFile, []byte(MustPEM(t, k.ed.Public())), 0o600)
	os.WriteFile(secretFile, []byte(secret+"\n"), 0o600)
	clk := newClock()
	cases := []struct {
		name   string
		key    string
		method jwt.SigningMethod
		signer any
	}{
		{"PEM", "@" + pemFile, jwt.SigningMethodEdDSA, k.ed},
		{"SecretWithTrailingNewline", "@" + secretFile, jwt.SigningMethodHS256, []byte(secret)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a := MustNew(t, auth.Config{Mode: auth.ModeJWT, JWTKey: tc.key, Now: clk.Now})
			tok := MustSign(t, tc.method, tc.signer, "", claimsFor(clk.Now(), "alice"))
			if c, err := a.Authenticate(bearer(tok)); err != nil || c.Account != "alice" {
				t.Fatalf("Authenticate = %+v, %v; want alice", c, err)
			}
		})
	}
}

func TestJWTLeeway(t *testing.T) {
	cases := []struct {
		name   string
		leeway time.Duration
		edit   func(now time.Time, c jwt.MapClaims)
		want   string // "" for accepted
	}{
		{"ExpiredWithinTheDefaultLeewayIsAccepted", 0, func(n time.Time, c jwt.MapClaims) { c["exp"] = n.Add(-20 * time.Second).Unix() }, ""},
		{"NotBeforeWithinTheDefaultLeewayIsAccepted", 0, func(n time.Time, c jwt.MapClaims) { c["nbf"] = n.Add(20 * time.Second).Unix() }, ""},
		{"ExpiredBeyondTheDefaultLeewayIsRefused", 0, func(n time.Time, c jwt.MapClaims) { c["exp"] = n.Add(-40 * time.Second).Unix() }, auth.ReasonExpired},
		{"NotBeforeBeyondTheDefaultLeewayIsRefused", 0, func(n time.Time, c jwt.MapClaims) { c["nbf"] = n.Add(40 * time.Second).Unix() }, auth.ReasonNotYetValid},
		{"ExpiredWithinAConfiguredLeewayIsAccepted", 2 * time.Minute, func(n time.Time, c jwt.MapClaims) { c["exp"] = n.Add(-90 * time.Second).Unix() }, ""},
		{"NegativeLeewayMeansNone", -1, func(n time.Time, c jwt.MapClaims) { c["exp"] = n.Add(-1 * time.Second).Unix() }, auth.ReasonExpired},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := newClock()
			a := MustNew(t, auth.Config{Mode: auth.ModeJWT, JWTKey: secret, Leeway: tc.leeway, Now: clk.Now})
			claims := claimsFor(clk.Now(), "alice")
			tc.edit(clk.Now(), claims)
			_, err := a.Authenticate(bearer(MustSign(t, jwt.SigningMethodHS256, []byte(secret), "", claims)))
			if got := auth.Reason(err); got != tc.want {
				t.Fatalf("Authenticate = %v (reason %q), want reason %q", err, got, tc.want)
			}
		})
	}
}

func TestJWTCustomAccountClaim(t *testing.T) {
	clk := newClock()
	a := MustNew(t, auth.Config{Mode: auth.ModeJWT, JWTKey: secret, AccountClaim: "preferred_username", Now: clk.Now})
	claims := claimsFor(clk.Now(), "u-8f3a")
	claims["preferred_username"] = "alice"
	if c, err := a.Authenticate(bearer(MustSign(t, jwt.SigningMethodHS256, []byte(secret), "", claims))); err != nil || c.Account != "alice" {
		t.Fatalf("Authenticate = %+v, %v; want alice from preferred_username", c, err)
	}
	delete(claims, "preferred_username")
	_, err := a.Authenticate(bearer(MustSign(t, jwt.SigningMethodHS256, []byte(secret), "", claims)))
	if auth.Reason(err) != auth.ReasonMissingClaim {
		t.Fatalf("without the claim: Authenticate = %v, want %s (sub does not stand in)", err, auth.ReasonMissingClaim)
	}
}

func TestJWTCookie(t *testing.T) {
	clk := newClock()
	a := MustNew(t, auth.Config{Mode: auth.ModeJWT, JWTKey: secret, Cookie: "dl_auth", Now: clk.Now})
	alice := MustSign(t, jwt.SigningMethodHS256, []byte(secret), "", claimsFor(clk.Now(), "alice"))
	bob := MustSign(t, jwt.SigningMethodHS256, []byte(secret), "", claimsFor(clk.Now(), "bob"))
	cases := []struct {
		name        string
		header      []string
		wantAccount string
		wantReason  string
	}{
		{"CookieCarriesTheToken", []string{"Cookie", "theme=dark; dl_auth=" + alice}, "alice", ""},
		{"BearerWinsOverTheCookie", []string{"Authorization", "Bearer " + bob, "Cookie", "dl_auth=" + alice}, "bob", ""},
		{"OtherAuthorizationSchemeFallsBackToTheCookie", []string{"Authorization", "Basic YWxpY2U6cHc=", "Cookie", "dl_auth=" + alice}, "alice", ""},
		{"EmptyCookieIsAnonymous", []string{"Cookie", "dl_auth="}, "", ""},
		{"OtherCookiesAreAnonymous", []string{"Cookie", "session=" + alice}, "", ""},
		{"GarbageCookieIsRefused", []string{"Cookie", "dl_auth=garbage"}, "", auth.ReasonMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := a.Authenticate(newRequest("192.0.2.10:5555", tc.header...))
			if c.Account != tc.wantAccount || auth.Reason(err) != tc.wantReason {
				t.Fatalf("Authenticate = %+v, %v; want account %q, reason %q", c, err, tc.wantAccount, tc.wantReason)
			}
		})
	}
	t.Run("CookieIgnoredWhenNoneConfigured", func(t *testing.T) {
		a := MustNew(t, auth.Config{Mode: auth.ModeJWT, JWTKey: secret, Now: clk.Now})
		if c, err := a.Authenticate(newRequest("192.0.2.10:5555", "Cookie", "dl_auth="+alice)); err != nil || c.Account != "" {
			t.Fatalf("Authenticate = %+v, %v; want anonymous", c, err)
		}
	})
}

func TestJWTAuthorizationHeader(t *testing.T) {
	clk := newClock()
	a := MustNew(t, auth.Config{Mode: auth.ModeJWT, JWTKey: secret, Now: clk.Now})
	tok := MustSign(t, jwt.SigningMethodHS256, []byte(secret), "", claimsFor(clk.Now(), "alice"))
	cases := []struct {
		name        string
		header      []string
		wantAccount string
		wantReason  string
	}{
		{"NoCredentialIsAnonymous", nil, "", ""},
		{"BasicAuthIsAnonymous", []string{"Authorization", "Basic YWxpY2U6cHc="}, "", ""},
		{"LowercaseScheme", []string{"Authorization", "bearer " + tok}, "alice", ""},
		{"UppercaseScheme", []string{"Authorization", "BEARER " + tok}, "alice", ""},
		{"SchemeWithoutToken", []string{"Authorization", "Bearer"}, "", auth.ReasonMalformed},
		{"SchemeWithBlankToken", []string{"Authorization", "Bearer   "}, "", auth.ReasonMalformed},
		{"TwoAuthorizationHeaders", []string{"Authorization", "Bearer " + tok, "Authorization", "Bearer " + tok}, "", auth.ReasonMalformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := a.Authenticate(newRequest("192.0.2.10:5555", tc.header...))
			if c.Account != tc.wantAccount || auth.Reason(err) != tc.wantReason {
				t.Fatalf("Authenticate = %+v, %v; want account %q, reason %q", c, err, tc.wantAccount, tc.wantReason)
			}
		})
	}
}

func TestModeNoneVerifiesNobody(t *testing.T) {
	clk := newClock()
	tok := MustSign(t, jwt.SigningMethodHS256, []byte(secret), "", claimsFor(clk.Now(), "alice"))
	for _, mode := range []string{"", auth.ModeNone} {
		a := MustNew(t, auth.Config{Mode: mode, JWTKey: secret, Now: clk.Now})
		r := bearer(tok)
		r.Header.Set("X-Auth-Request-User", "alice")
		if c, err := a.Authenticate(r); err != nil || c.Account != "" || c.Addr.String() != "192.0.2.10" {
			t.Fatalf("mode %q: Authenticate = %+v, %v; want anonymous from 192.0.2.10", mode, c, err)
		}
	}
}

func TestNewRefusesBadConfig(t *testing.T) {
	k := keys()
	dir := t.TempDir()
	small, err := rsaKeyOfBits(1024)
	if err != nil {
		t.Fatal(err)
	}
	privPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: mustPKCS8(t, k.rsaA)}))
	cases := []struct {
		name string
		cfg  auth.Config
		want string // the error names this variable
	}{
		{"UnknownMode", auth.Config{Mode: "oidc"}, "GATEWAY_AUTH"},
		{"JWTWithoutKey", auth.Config{Mode: auth.ModeJWT}, "GATEWAY_AUTH=jwt needs GATEWAY_JWT_KEY or GATEWAY_JWT_JWKS_URL"},
		{"JWTWithKeyAndJWKS", auth.Config{Mode: auth.ModeJWT, JWTKey: secret, JWKSURL: "https://idp.example/jwks"}, "GATEWAY_JWT_JWKS_URL"},
		{"ShortSecret", auth.Config{Mode: auth.ModeJWT, JWTKey: "hunter2-hunter2"}, "GATEWAY_JWT_KEY"},
		{"PrivateKeyPEM", auth.Config{Mode: auth.ModeJWT, JWTKey: privPEM}, "GATEWAY_JWT_KEY"},
		{"BrokenPEM", auth.Config{Mode: auth.ModeJWT, JWTKey: "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"}, "GATEWAY_JWT_KEY"},
		{"RSAKeyUnder2048Bits", auth.Config{Mode: auth.ModeJWT, JWTKey: MustPEM(t, &small.PublicKey)}, "GATEWAY_JWT_KEY"},
		{"ECKeyNotOnP256", auth.Config{Mode: auth.ModeJWT, JWTKey: p384PEM(t)}, "GATEWAY_JWT_KEY"},
		{"MissingKeyFile", auth.Config{Mode: auth.ModeJWT, JWTKey: "@" + filepath.Join(dir, "nope.pem")}, "GATEWAY_JWT_KEY"},
		{"JWKSWithOtherScheme", auth.Config{Mode: auth.ModeJWT, JWKSURL: "ftp://idp.example/jwks"}, "GATEWAY_JWT_JWKS_URL"},
		{"MissingJWKSFile", auth.Config{Mode: auth.ModeJWT, JWKSURL: filepath.Join(dir, "jwks.json")}, "GATEWAY_JWT_JWKS_URL"},
		{"HeaderWithoutHeaderName", auth.Config{Mode: auth.ModeHeader, TrustedProxies: mustPrefixes(t, "127.0.0.1")}, "GATEWAY_AUTH_HEADER"},
		{"HeaderWithBadHeaderName", auth.Config{Mode: auth.ModeHeader, Header: "X User", TrustedProxies: mustPrefixes(t, "127.0.0.1")}, "GATEWAY_AUTH_HEADER"},
		{"HeaderWithoutTrustedProxies", auth.Config{Mode: auth.ModeHeader, Header: "X-Auth-Request-User"}, "GATEWAY_TRUSTED_PROXIES"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := auth.New(t.Context(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("New = %v, want one line naming %s", err, tc.want)
			}
			if tc.cfg.JWTKey != "" && strings.Contains(err.Error(), strings.TrimSpace(tc.cfg.JWTKey)) {
				t.Errorf("error quotes GATEWAY_JWT_KEY: %v", err)
			}
		})
	}
}

func bigOne() *big.Int { return big.NewInt(1) }

func rsaKeyOfBits(bits int) (*rsa.PrivateKey, error) { return rsa.GenerateKey(rand.Reader, bits) }

func mustPKCS8(t *testing.T, k any) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func p384PEM(t *testing.T) string {
	k, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return MustPEM(t, &k.PublicKey)
}

func mustPrefixes(t *testing.T, s string) []netip.Prefix {
	t.Helper()
	p, err := auth.ParsePrefixes(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
