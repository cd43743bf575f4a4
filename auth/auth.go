// Package auth verifies who calls a public route (SPEC §8 "Verified
// accounts") and from which address ("Client address"). It imports nothing
// internal and needs no server: an Authenticator looks at one *http.Request,
// so the gateway only asks it and every rule is tested here with
// httptest.NewRequest.
package auth

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"time"
	"unicode/utf8"
)

// Caller is who sent a request, as far as it could be verified.
type Caller struct {
	// Account is the verified account, "" when the caller is anonymous.
	Account string
	// Addr is the client address per SPEC §8 (see ClientAddr). It is the
	// zero Addr only when the request's RemoteAddr does not parse, as on a
	// Unix socket.
	Addr netip.Addr
}

// Authenticator verifies the caller of one request.
//
// Authenticate returns a Caller with an empty Account and a nil error when
// the request carries no credential; an error wrapping ErrInvalidCredential
// when it carries one that fails verification (Reason(err) says why, for
// logs and metrics); ErrUnavailable when no verification key could be loaded
// yet. Caller.Addr is set whatever the outcome.
type Authenticator interface {
	Authenticate(r *http.Request) (Caller, error)
}

// Modes of GATEWAY_AUTH.
const (
	ModeNone   = "none"
	ModeJWT    = "jwt"
	ModeHeader = "header"
)

// Defaults applied by New to zero fields of Config.
const (
	DefaultAccountClaim = "sub"
	DefaultLeeway       = 30 * time.Second
	DefaultJWKSRefresh  = 5 * time.Minute
	// DefaultFetchTimeout bounds one JWKS fetch, and so the longest a
	// request can wait for one.
	DefaultFetchTimeout = 5 * time.Second
)

// Config is the verification part of the gateway's configuration. The
// comments name the environment variable each field comes from.
type Config struct {
	Mode           string         // GATEWAY_AUTH: "none" (or ""), "jwt" or "header"
	Cookie         string         // GATEWAY_AUTH_COOKIE: cookie that may carry the JWT; "" for none
	Header         string         // GATEWAY_AUTH_HEADER: account header set by a trusted proxy
	TrustedProxies []netip.Prefix // GATEWAY_TRUSTED_PROXIES, see ParsePrefixes

	// JWTKey is GATEWAY_JWT_KEY: PEM text ("-----BEGIN PUBLIC KEY-----…",
	// also "RSA PUBLIC KEY" or "CERTIFICATE") of an RSA (RS256), P-256
	// (ES256) or Ed25519 (EdDSA) public key; otherwise an HS256 secret of at
	// least 32 bytes. "@/path" reads the same from a file (its surrounding
	// whitespace trimmed), so neither secret nor key has to sit in the
	// environment. A plain path is not looked up: a secret that happened to
	// name an existing file would silently change meaning.
	JWTKey string
	// JWKSURL is GATEWAY_JWT_JWKS_URL: an http:// or https:// URL, a
	// file:// URL or a file path naming a JSON Web Key Set.
	JWKSURL string

	Issuer       string        // GATEWAY_JWT_ISSUER: required "iss" when set
	Audience     string        // GATEWAY_JWT_AUDIENCE: required in "aud" when set
	AccountClaim string        // GATEWAY_JWT_ACCOUNT_CLAIM; default "sub"
	Leeway       time.Duration // GATEWAY_JWT_LEEWAY on exp/nbf; 0 means 30s, negative means none

	JWKSRefresh  time.Duration // timer between JWKS fetches; default 5m
	FetchTimeout time.Duration // bound of one JWKS fetch; default 5s
	HTTPClient   *http.Client  // for JWKS fetches; default one with FetchTimeout
	Now          func() time.Time
	Logger       *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.Mode == "" {
		c.Mode = ModeNone
	}
	if c.AccountClaim == "" {
		c.AccountClaim = DefaultAccountClaim
	}
	switch {
	case c.Leeway == 0:
		c.Leeway = DefaultLeeway
	case c.Leeway < 0:
		c.Leeway = 0
	}
	if c.JWKSRefresh <= 0 {
		c.JWKSRefresh = DefaultJWKSRefresh
	}
	if c.FetchTimeout <= 0 {
		c.FetchTimeout = DefaultFetchTimeout
	}
	if c.HTTPClient == nil {
		c.HTTPClient = &http.Client{Timeout: c.FetchTimeout}
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// New checks c and returns the Authenticator for c.Mode. With a JWKS it
// loads the set once before returning and keeps refreshing it until ctx
// ends. A JWKS file that cannot be loaded is an error; a JWKS URL that
// cannot be fetched yet is only logged, so the gateway can start before its
// identity provider (tokens are answered with ErrUnavailable meanwhile).
//
// Errors are one line and name the variable at fault, e.g.
// "GATEWAY_AUTH=jwt needs GATEWAY_JWT_KEY or GATEWAY_JWT_JWKS_URL".
func New(ctx context.Context, c Config) (Authenticator, error) {
	c = c.withDefaults()
	switch c.Mode {
	case ModeNone:
		return noneAuth{trusted: c.TrustedProxies}, nil
	case ModeHeader:
		return newHeaderAuth(c)
	case ModeJWT:
		return newJWTAuth(ctx, c)
	}
	return nil, fmt.Errorf("GATEWAY_AUTH: want %q, %q or %q, got %q", ModeNone, ModeJWT, ModeHeader, c.Mode)
}

// noneAuth verifies nobody: every caller is anonymous, credentials or not.
type noneAuth struct{ trusted []netip.Prefix }

var _ Authenticator = noneAuth{}

func (a noneAuth) Authenticate(r *http.Request) (Caller, error) {
	return Caller{Addr: ClientAddr(r, a.trusted)}, nil
}

// maxAccountLen matches the ledger's VARCHAR(255) and the admin API's check
// of account_id, so every account a link can be bound to can be verified.
const maxAccountLen = 255

// validAccount reports whether s may be an account: non-empty, at most 255
// bytes of UTF-8, no control characters (they would forge log lines).
func validAccount(s string) bool {
	return s != "" && len(s) <= maxAccountLen && utf8.ValidString(s) &&
		!strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}
