package auth_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/dlgate/dlgate/auth"
	"github.com/golang-jwt/jwt/v5"
)

// jwksConfig is mode jwt on the JWKS at url with a fake clock.
func jwksConfig(url string, clk *clock) auth.Config {
	return auth.Config{Mode: auth.ModeJWT, JWKSURL: url, Now: clk.Now}
}

func TestJWKSChoosesTheKeyByKid(t *testing.T) {
	k := keys()
	srv := newJWKSServer(t,
		jwkOf("rsa-a", "RS256", &k.rsaA.PublicKey),
		jwkOf("rsa-b", "", &k.rsaB.PublicKey),
		jwkOf("ed-1", "EdDSA", k.ed.Public()),
		jwkOf("ec-1", "ES256", &k.ec.PublicKey),
	)
	clk := newClock()
	a := MustNew(t, jwksConfig(srv.URL, clk))
	cases := []struct {
		kid    string
		method jwt.SigningMethod
		signer any
		want   string
	}{
		{"rsa-a", jwt.SigningMethodRS256, k.rsaA, ""},
		{"rsa-b", jwt.SigningMethodRS256, k.rsaB, ""},
		{"ed-1", jwt.SigningMethodEdDSA, k.ed, ""},
		{"ec-1", jwt.SigningMethodES256, k.ec, ""},
		{"rsa-a", jwt.SigningMethodRS256, k.rsaB, auth.ReasonBadSignature}, // signed by rsa-b, claims rsa-a
	}
	for _, tc := range cases {
		tok := MustSign(t, tc.method, tc.signer, tc.kid, claimsFor(clk.Now(), "alice"))
		c, err := a.Authenticate(bearer(tok))
		if auth.Reason(err) != tc.want || tc.want == "" && c.Account != "alice" {
			t.Errorf("kid %s, %s: Authenticate = %+v, %v; want reason %q", tc.kid, tc.method.Alg(), c, err, tc.want)
		}
	}
	if n := srv.hits.Load(); n != 1 {
		t.Errorf("JWKS fetched %d times, want 1 (keys are cached)", n)
	}
}

func TestJWKSRefusals(t *testing.T) {
	k := keys()
	srv := newJWKSServer(t,
		jwkOf("rsa-a", "RS256", &k.rsaA.PublicKey),
		jwkOf("ed-1", "", k.ed.Public()),
		jwkOf("rsa-b-says-es256", "ES256", &k.rsaB.PublicKey),
		jwkOf("rsa-c-rs512", "RS512", &k.rsaC.PublicKey),
	)
	clk := newClock()
	now := clk.Now()
	a := MustNew(t, jwksConfig(srv.URL, clk))
	rsaPEM := MustPEM(t, &k.rsaA.PublicKey)
	kidSeven := jwt.NewWithClaims(jwt.SigningMethodRS256, claimsFor(now, "alice"))
	kidSeven.Header["kid"] = 7
	kidSevenTok, err := kidSeven.SignedString(k.rsaA)
	if err != nil {
		t.Fatal(err)
	}
	none := jwt.NewWithClaims(jwt.SigningMethodNone, claimsFor(now, "alice"))
	none.Header["kid"] = "rsa-a"
	noneTok, err := none.SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		token string
		want  string
	}{
		{"KeyAlgDiffersFromTheTokenAlg", MustSign(t, jwt.SigningMethodES256, k.ec, "rsa-a", claimsFor(now, "alice")), auth.ReasonAlgMismatch},
		{"KeyTypeDiffersFromTheTokenAlg", MustSign(t, jwt.SigningMethodRS256, k.rsaA, "ed-1", claimsFor(now, "alice")), auth.ReasonAlgMismatch},
		{"KeyAlgContradictsItsKeyType", MustSign(t, jwt.SigningMethodRS256, k.rsaB, "rsa-b-says-es256", claimsFor(now, "alice")), auth.ReasonAlgMismatch},
		{"KeyAlgNotSupported", MustSign(t, jwt.SigningMethodRS256, k.rsaC, "rsa-c-rs512", claimsFor(now, "alice")), auth.ReasonAlgMismatch},
		{"HS256SignedWithTheJWKsPublicKeyPEM", MustSign(t, jwt.SigningMethodHS256, []byte(rsaPEM), "rsa-a", claimsFor(now, "alice")), auth.ReasonAlgMismatch},
		{"AlgNone", noneTok, auth.ReasonAlgMismatch},
		{"UnknownKid", MustSign(t, jwt.SigningMethodRS256, k.rsaA, "kid-nobody-published", claimsFor(now, "alice")), auth.ReasonUnknownKID},
		{"KidNotAString", kidSevenTok, auth.ReasonMalformed},
		{"NoKidWhileTheSetHasSeveralKeys", MustSign(t, jwt.SigningMethodRS256, k.rsaA, "", claimsFor(now, "alice")), auth.ReasonMissingKID},
		{"Expired", MustSign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", jwt.MapClaims{"sub": "alice", "exp": now.Add(-time.Hour).Unix()}), auth.ReasonExpired},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := a.Authenticate(bearer(tc.token))
			if !errors.Is(err, auth.ErrInvalidCredential) || auth.Reason(err) != tc.want || c.Account != "" {
				t.Fatalf("Authenticate = %+v, %v (reason %q); want ErrInvalidCredential with reason %q", c, err, auth.Reason(err), tc.want)
			}
			assertNoLeak(t, "error", err.Error(), tc.token)
		})
	}
}

func TestJWKSTokenWithoutKidNeedsASingleKeySet(t *testing.T) {
	k := keys()
	srv := newJWKSServer(t, jwkOf("ed-1", "EdDSA", k.ed.Public()))
	clk := newClock()
	a := MustNew(t, jwksConfig(srv.URL, clk))
	tok := MustSign(t, jwt.SigningMethodEdDSA, k.ed, "", claimsFor(clk.Now(), "alice"))
	if c, err := a.Authenticate(bearer(tok)); err != nil || c.Account != "alice" {
		t.Fatalf("Authenticate = %+v, %v; want alice", c, err)
	}
}

func TestJWKSRotationIsPickedUpWithoutRestart(t *testing.T) {
	k := keys()
	srv := newJWKSServer(t, jwkOf("rsa-a", "RS256", &k.rsaA.PublicKey))
	clk := newClock()
	a := MustNew(t, jwksConfig(srv.URL, clk))
	oldTok := MustSign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", claimsFor(clk.Now(), "alice"))
	if _, err := a.Authenticate(bearer(oldTok)); err != nil {
		t.Fatalf("before rotation: %v", err)
	}

	// The provider rotates: rsa-a is retired, rsa-b and an Ed25519 key appear.
	srv.Set(jwkOf("rsa-b", "RS256", &k.rsaB.PublicKey), jwkOf("ed-1", "EdDSA", k.ed.Public()))
	clk.Advance(10 * time.Second)
	newTok := MustSign(t, jwt.SigningMethodRS256, k.rsaB, "rsa-b", claimsFor(clk.Now(), "alice"))
	if c, err := a.Authenticate(bearer(newTok)); err != nil || c.Account != "alice" {
		t.Fatalf("new kid after rotation: Authenticate = %+v, %v; want alice", c, err)
	}
	edTok := MustSign(t, jwt.SigningMethodEdDSA, k.ed, "ed-1", claimsFor(clk.Now(), "bob"))
	if c, err := a.Authenticate(bearer(edTok)); err != nil || c.Account != "bob" {
		t.Fatalf("Ed25519 kid after rotation: Authenticate = %+v, %v; want bob", c, err)
	}
	if _, err := a.Authenticate(bearer(oldTok)); auth.Reason(err) != auth.ReasonUnknownKID {
		t.Fatalf("retired kid: Authenticate = %v, want %s", err, auth.ReasonUnknownKID)
	}
	if n := srv.hits.Load(); n != 2 {
		t.Errorf("JWKS fetched %d times, want 2 (start, then the new kid)", n)
	}
}

func TestJWKSUnknownKidRefreshIsRateLimited(t *testing.T) {
	k := keys()
	srv := newJWKSServer(t, jwkOf("rsa-a", "RS256", &k.rsaA.PublicKey))
	clk := newClock()
	a := MustNew(t, jwksConfig(srv.URL, clk))
	unknown := func() {
		t.Helper()
		tok := MustSign(t, jwt.SigningMethodRS256, k.rsaA, "kid-"+clk.Now().Format(time.TimeOnly), claimsFor(clk.Now(), "alice"))
		for range 5 {
			if _, err := a.Authenticate(bearer(tok)); auth.Reason(err) != auth.ReasonUnknownKID {
				t.Fatalf("Authenticate = %v, want %s", err, auth.ReasonUnknownKID)
			}
		}
	}
	steps := []struct {
		advance  time.Duration
		wantHits int32
	}{
		{0, 1},                // the fetch at start counts: no refetch within 10 s of it
		{10 * time.Second, 2}, // one refetch for five unknown-kid tokens
		{9 * time.Second, 2},  // 9 s later: still limited
		{time.Second, 3},      // 10 s later: one more
		{time.Hour, 4},
	}
	for i, s := range steps {
		clk.Advance(s.advance)
		unknown()
		if n := srv.hits.Load(); n != s.wantHits {
			t.Fatalf("step %d (+%v): JWKS fetched %d times, want %d", i, s.advance, n, s.wantHits)
		}
	}
}

func TestJWKSConcurrentUnknownKidsShareOneFetch(t *testing.T) {
	k := keys()
	srv := newJWKSServer(t, jwkOf("rsa-a", "RS256", &k.rsaA.PublicKey))
	clk := newClock()
	a := MustNew(t, jwksConfig(srv.URL, clk))
	srv.Set(jwkOf("rsa-a", "RS256", &k.rsaA.PublicKey), jwkOf("rsa-b", "RS256", &k.rsaB.PublicKey))
	release := srv.Block()
	t.Cleanup(release)
	clk.Advance(10 * time.Second)
	tok := MustSign(t, jwt.SigningMethodRS256, k.rsaB, "rsa-b", claimsFor(clk.Now(), "alice"))

	const callers = 20
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for range callers {
		wg.Go(func() {
			_, err := a.Authenticate(bearer(tok))
			errs <- err
		})
	}
	// Let every caller reach the fetch in flight, then let it answer.
	deadline := time.Now().Add(5 * time.Second)
	for srv.hits.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond)
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("Authenticate = %v, want accepted", err)
		}
	}
	if n := srv.hits.Load(); n != 2 {
		t.Errorf("JWKS fetched %d times for %d concurrent callers, want 2 (start + one shared)", n, callers)
	}
}

func TestJWKSRefreshesOnATimer(t *testing.T) {
	k := keys()
	srv := newJWKSServer(t, jwkOf("rsa-a", "RS256", &k.rsaA.PublicKey))
	clk := newClock() // never advanced: the unknown-kid path stays rate-limited
	cfg := jwksConfig(srv.URL, clk)
	cfg.JWKSRefresh = 20 * time.Millisecond
	a := MustNew(t, cfg)
	srv.Set(jwkOf("rsa-b", "RS256", &k.rsaB.PublicKey))
	tok := MustSign(t, jwt.SigningMethodRS256, k.rsaB, "rsa-b", claimsFor(clk.Now(), "alice"))
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := a.Authenticate(bearer(tok))
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("new kid still refused after the timer should have refreshed: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestJWKSFromAFile(t *testing.T) {
	k := keys()
	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwksJSON(jwkOf("ed-1", "EdDSA", k.ed.Public())), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{path, "file://" + path} {
		t.Run(src, func(t *testing.T) {
			clk := newClock()
			a := MustNew(t, jwksConfig(src, clk))
			tok := MustSign(t, jwt.SigningMethodEdDSA, k.ed, "ed-1", claimsFor(clk.Now(), "alice"))
			if c, err := a.Authenticate(bearer(tok)); err != nil || c.Account != "alice" {
				t.Fatalf("Authenticate = %+v, %v; want alice", c, err)
			}
		})
	}
	t.Run("RewrittenFileIsPickedUp", func(t *testing.T) {
		clk := newClock()
		a := MustNew(t, jwksConfig(path, clk))
		if err := os.WriteFile(path, jwksJSON(jwkOf("rsa-c", "RS256", &k.rsaC.PublicKey)), 0o600); err != nil {
			t.Fatal(err)
		}
		clk.Advance(10 * time.Second)
		tok := MustSign(t, jwt.SigningMethodRS256, k.rsaC, "rsa-c", claimsFor(clk.Now(), "alice"))
		if c, err := a.Authenticate(bearer(tok)); err != nil || c.Account != "alice" {
			t.Fatalf("Authenticate = %+v, %v; want alice", c, err)
		}
	})
}

func TestJWKSSkipsUnusableKeys(t *testing.T) {
	k := keys()
	small, err := rsaKeyOfBits(1024)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pt, err := p384.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	ec384 := map[string]any{"kty": "EC", "kid": "ec-384", "crv": "P-384", "x": b64(pt[1:49]), "y": b64(pt[49:])}
	enc := jwkOf("rsa-enc", "RSA-OAEP", &k.rsaB.PublicKey)
	enc["use"] = "enc"
	offCurve := jwkOf("ec-off", "ES256", &k.ec.PublicKey)
	offCurve["y"] = offCurve["x"]
	unusable := []map[string]any{
		{"kty": "oct", "kid": "hmac", "k": b64([]byte(secret))},
		enc,
		ec384,
		offCurve,
		jwkOf("rsa-1024", "RS256", &small.PublicKey),
	}
	srv := newJWKSServer(t, append(unusable, jwkOf("ed-1", "EdDSA", k.ed.Public()))...)
	clk := newClock()
	a := MustNew(t, jwksConfig(srv.URL, clk))
	tok := MustSign(t, jwt.SigningMethodEdDSA, k.ed, "ed-1", claimsFor(clk.Now(), "alice"))
	if c, err := a.Authenticate(bearer(tok)); err != nil || c.Account != "alice" {
		t.Fatalf("Authenticate = %+v, %v; want alice", c, err)
	}
	small1024 := MustSign(t, jwt.SigningMethodRS256, small, "rsa-1024", claimsFor(clk.Now(), "alice"))
	if _, err := a.Authenticate(bearer(small1024)); auth.Reason(err) != auth.ReasonUnknownKID {
		t.Fatalf("1024-bit key: Authenticate = %v, want %s", err, auth.ReasonUnknownKID)
	}

	path := filepath.Join(t.TempDir(), "jwks.json")
	if err := os.WriteFile(path, jwksJSON(unusable...), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := auth.New(t.Context(), jwksConfig(path, clk)); err == nil {
		t.Fatal("New accepted a JWKS file without one usable key")
	}
}

func TestJWKSBrokenDocumentKeepsTheKeysWeHave(t *testing.T) {
	k := keys()
	srv := newJWKSServer(t, jwkOf("rsa-a", "RS256", &k.rsaA.PublicKey))
	clk := newClock()
	a := MustNew(t, jwksConfig(srv.URL, clk))
	tok := MustSign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", claimsFor(clk.Now(), "alice"))
	for _, breakIt := range []func(){
		func() { srv.SetBody([]byte("<html>maintenance</html>")) },
		func() { srv.SetBody(jwksJSON()) },
		func() { srv.SetFailing(true) },
	} {
		breakIt()
		clk.Advance(10 * time.Second)
		unknown := MustSign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-z", claimsFor(clk.Now(), "alice"))
		if _, err := a.Authenticate(bearer(unknown)); auth.Reason(err) != auth.ReasonUnknownKID {
			t.Fatalf("unknown kid: %v", err)
		}
		if _, err := a.Authenticate(bearer(tok)); err != nil {
			t.Fatalf("known kid after a failed refresh: %v", err)
		}
	}
}

func TestJWKSUnavailableAtStart(t *testing.T) {
	k := keys()
	srv := newJWKSServer(t, jwkOf("rsa-a", "RS256", &k.rsaA.PublicKey))
	srv.SetFailing(true)
	clk := newClock()
	var logs logBuffer
	cfg := jwksConfig(srv.URL+"/jwks?client_secret=s3cr3t", clk)
	cfg.Logger = logs.Logger()
	a := MustNew(t, cfg) // the gateway may start before its identity provider
	tok := MustSign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", claimsFor(clk.Now(), "alice"))
	_, err := a.Authenticate(bearer(tok))
	if !errors.Is(err, auth.ErrUnavailable) || errors.Is(err, auth.ErrInvalidCredential) || auth.Reason(err) != auth.ReasonKeysUnavailable {
		t.Fatalf("Authenticate = %v, want ErrUnavailable", err)
	}
	if !contains(logs.String(), "JWKS not loaded") || contains(logs.String(), "s3cr3t") {
		t.Errorf("log should warn without the URL's query: %s", logs.String())
	}
	srv.SetFailing(false)
	clk.Advance(10 * time.Second)
	if c, err := a.Authenticate(bearer(tok)); err != nil || c.Account != "alice" {
		t.Fatalf("after the provider came up: Authenticate = %+v, %v; want alice", c, err)
	}
}

func TestJWKSFetchNeverBlocksLongerThanItsTimeout(t *testing.T) {
	k := keys()
	srv := newJWKSServer(t, jwkOf("rsa-a", "RS256", &k.rsaA.PublicKey))
	release := srv.Block() // the provider accepts the connection and never answers
	t.Cleanup(release)
	clk := newClock()
	cfg := jwksConfig(srv.URL, clk)
	cfg.FetchTimeout = 200 * time.Millisecond

	start := time.Now()
	a := MustNew(t, cfg)
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("New took %v", d)
	}
	clk.Advance(10 * time.Second)
	tok := MustSign(t, jwt.SigningMethodRS256, k.rsaA, "rsa-a", claimsFor(clk.Now(), "alice"))
	start = time.Now()
	_, err := a.Authenticate(bearer(tok))
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("Authenticate waited %v for a hanging JWKS", d)
	}
	if !errors.Is(err, auth.ErrUnavailable) {
		t.Fatalf("Authenticate = %v, want ErrUnavailable", err)
	}
}
