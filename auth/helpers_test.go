package auth_test

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlgate/dlgate/auth"
	"github.com/golang-jwt/jwt/v5"
)

// secret is an HS256 key of the minimum length.
const secret = "0123456789abcdef0123456789abcdef"

// testKeys are generated once: RSA generation is the slow part of the suite.
type testKeys struct {
	rsaA, rsaB, rsaC *rsa.PrivateKey
	ec               *ecdsa.PrivateKey
	ed               ed25519.PrivateKey
}

var keys = sync.OnceValue(func() testKeys {
	var k testKeys
	for _, p := range []**rsa.PrivateKey{&k.rsaA, &k.rsaB, &k.rsaC} {
		var err error
		if *p, err = rsa.GenerateKey(rand.Reader, 2048); err != nil {
			panic(err)
		}
	}
	var err error
	if k.ec, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader); err != nil {
		panic(err)
	}
	if _, k.ed, err = ed25519.GenerateKey(rand.Reader); err != nil {
		panic(err)
	}
	return k
})

// clock is a settable Config.Now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// MustNew is auth.New bound to the test's lifetime.
func MustNew(tb testing.TB, c auth.Config) auth.Authenticator {
	tb.Helper()
	a, err := auth.New(tb.Context(), c)
	if err != nil {
		tb.Fatalf("auth.New: %v", err)
	}
	return a
}

// MustSign signs claims with method and key, naming kid when it is not "".
func MustSign(tb testing.TB, method jwt.SigningMethod, key any, kid string, claims jwt.MapClaims) string {
	tb.Helper()
	t := jwt.NewWithClaims(method, claims)
	if kid != "" {
		t.Header["kid"] = kid
	}
	s, err := t.SignedString(key)
	if err != nil {
		tb.Fatalf("signing %s: %v", method.Alg(), err)
	}
	return s
}

// claimsFor is a valid claim set for account at now.
func claimsFor(now time.Time, account string) jwt.MapClaims {
	return jwt.MapClaims{"sub": account, "iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
}

// newRequest is a GET from remote with the given header name/value pairs.
func newRequest(remote string, header ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/d/x", nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	return r
}

func bearer(tok string) *http.Request {
	return newRequest("192.0.2.10:5555", "Authorization", "Bearer "+tok)
}

// MustPEM is the PKIX PEM text of pub.
func MustPEM(tb testing.TB, pub any) string {
	tb.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		tb.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// jwkOf is the public JWK of pub; alg is left out when "".
func jwkOf(kid, alg string, pub any) map[string]any {
	m := map[string]any{"kid": kid, "use": "sig"}
	switch k := pub.(type) {
	case *rsa.PublicKey:
		m["kty"], m["n"], m["e"] = "RSA", b64(k.N.Bytes()), b64(big.NewInt(int64(k.E)).Bytes())
	case *ecdsa.PublicKey:
		pt, err := k.Bytes()
		if err != nil {
			panic(err)
		}
		m["kty"], m["crv"], m["x"], m["y"] = "EC", "P-256", b64(pt[1:33]), b64(pt[33:])
	case ed25519.PublicKey:
		m["kty"], m["crv"], m["x"] = "OKP", "Ed25519", b64(k)
	default:
		panic("jwkOf: unsupported key")
	}
	if alg != "" {
		m["alg"] = alg
	}
	return m
}

func jwksJSON(keys ...map[string]any) []byte {
	b, err := json.Marshal(map[string]any{"keys": keys})
	if err != nil {
		panic(err)
	}
	return b
}

// jwksServer is an OIDC provider's JWKS endpoint whose keys a test rotates.
type jwksServer struct {
	*httptest.Server
	mu    sync.Mutex
	body  []byte
	fail  bool
	hits  atomic.Int32
	block chan struct{} // when non-nil, requests wait for it to close
}

func newJWKSServer(tb testing.TB, keys ...map[string]any) *jwksServer {
	s := &jwksServer{body: jwksJSON(keys...)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		body, fail, block := s.body, s.fail, s.block
		s.mu.Unlock()
		if block != nil {
			select {
			case <-block:
			case <-r.Context().Done():
				return
			}
		}
		if fail {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/jwk-set+json")
		w.Write(body)
	}))
	tb.Cleanup(s.Close)
	return s
}

func (s *jwksServer) Set(keys ...map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body = jwksJSON(keys...)
}

func (s *jwksServer) SetFailing(fail bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = fail
}

// logBuffer is a debug-level logger writing into a buffer a test can search.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// assertNoLeak fails when text holds tok or any long piece of it.
func assertNoLeak(tb testing.TB, what, text, tok string) {
	tb.Helper()
	if tok != "" && strings.Contains(text, tok) {
		tb.Errorf("%s contains the token: %q", what, text)
		return
	}
	for _, part := range strings.Split(tok, ".") {
		if len(part) >= 8 && strings.Contains(text, part) {
			tb.Errorf("%s contains a segment of the token: %q", what, text)
		}
	}
}

func (s *jwksServer) SetBody(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body = b
}

func (s *jwksServer) Block() (release func()) {
	ch := make(chan struct{})
	s.mu.Lock()
	s.block = ch
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			s.block = nil
			s.mu.Unlock()
			close(ch)
		})
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
