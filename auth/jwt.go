package auth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strings"

	"github.com/golang-jwt/jwt/v5"
)

// maxTokenLen refuses oversized tokens before any base64 or JSON work: real
// ones are well under 2 KiB, and parsing attacker-sized input costs memory.
const maxTokenLen = 8 << 10

// jwtAuth verifies a JWT from Authorization: Bearer or a cookie, SPEC §8
// mode "jwt".
type jwtAuth struct {
	cookie  string
	trusted []netip.Prefix
	claim   string
	methods []string // the algs the configured keys verify; all others are refused unread
	parser  *jwt.Parser
	key     func(ctx context.Context, t *jwt.Token) (any, error)
}

var _ Authenticator = (*jwtAuth)(nil)

func newJWTAuth(ctx context.Context, c Config) (*jwtAuth, error) {
	a := &jwtAuth{cookie: c.Cookie, trusted: c.TrustedProxies, claim: c.AccountClaim}
	switch {
	case c.JWTKey == "" && c.JWKSURL == "":
		return nil, fmt.Errorf("GATEWAY_AUTH=jwt needs GATEWAY_JWT_KEY or GATEWAY_JWT_JWKS_URL")
	case c.JWTKey != "" && c.JWKSURL != "":
		return nil, fmt.Errorf("GATEWAY_JWT_KEY and GATEWAY_JWT_JWKS_URL are both set; set one")
	case c.JWTKey != "":
		k, err := parseStaticKey(c.JWTKey)
		if err != nil {
			return nil, err
		}
		// Only the key's own algorithm: this is what refuses alg "none" and
		// HS256 tokens signed with an RSA key's PEM text (algorithm confusion).
		a.methods = []string{k.alg}
		a.key = func(context.Context, *jwt.Token) (any, error) { return k.key, nil }
	default:
		ks, err := newKeySet(ctx, c)
		if err != nil {
			return nil, err
		}
		a.methods = publicAlgs
		a.key = ks.key
	}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods(a.methods),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(c.Leeway),
		jwt.WithTimeFunc(c.Now),
	}
	if c.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(c.Issuer))
	}
	if c.Audience != "" {
		opts = append(opts, jwt.WithAudience(c.Audience))
	}
	a.parser = jwt.NewParser(opts...)
	return a, nil
}

// Authenticate verifies the JWT of r, if any.
func (a *jwtAuth) Authenticate(r *http.Request) (Caller, error) {
	c := Caller{Addr: ClientAddr(r, a.trusted)}
	raw, err := a.credential(r)
	if err != nil || raw == "" {
		return c, err
	}
	account, err := a.verify(r.Context(), raw)
	if err != nil {
		return c, err
	}
	c.Account = account
	return c, nil
}

// credential returns the token of r: from Authorization with the Bearer
// scheme (RFC 6750 §2.1; schemes are case-insensitive, RFC 9110 §11.1), else
// from the cookie. "" means no credential. Other schemes (Basic, …) are not
// ours and count as none.
func (a *jwtAuth) credential(r *http.Request) (string, error) {
	switch values := r.Header.Values("Authorization"); {
	case len(values) > 1:
		return "", refuse(ReasonMalformed)
	case len(values) == 1:
		scheme, tok, _ := strings.Cut(values[0], " ")
		if strings.EqualFold(scheme, "Bearer") {
			if tok = strings.TrimLeft(tok, " "); tok == "" {
				return "", refuse(ReasonMalformed)
			}
			return tok, nil
		}
	}
	if a.cookie != "" {
		if ck, err := r.Cookie(a.cookie); err == nil {
			return ck.Value, nil // "" (a logged-out cookie) is no credential
		}
	}
	return "", nil
}

// verify checks raw and returns its account.
func (a *jwtAuth) verify(ctx context.Context, raw string) (string, error) {
	if len(raw) > maxTokenLen {
		return "", refuse(ReasonTooLarge)
	}
	claims := jwt.MapClaims{}
	tok, err := a.parser.ParseWithClaims(raw, claims, func(t *jwt.Token) (any, error) { return a.key(ctx, t) })
	if err != nil {
		return "", a.refusal(tok, err)
	}
	v, ok := claims[a.claim]
	if !ok || v == nil || v == "" {
		return "", refuse(ReasonMissingClaim)
	}
	account, ok := v.(string)
	if !ok || !validAccount(account) {
		return "", refuse(ReasonBadAccount)
	}
	return account, nil
}

// refusal translates the JWT library's error into ours. The library's text
// is dropped: some of it quotes bytes of the token.
func (a *jwtAuth) refusal(tok *jwt.Token, err error) error {
	var ce *credError
	switch {
	case errors.As(err, &ce): // from the key function
		return ce
	case errors.Is(err, ErrUnavailable):
		return ErrUnavailable
	case errors.Is(err, jwt.ErrTokenMalformed):
		return refuse(ReasonMalformed)
	case tok == nil || tok.Method == nil || !slices.Contains(a.methods, tok.Method.Alg()):
		// alg none, an alg nobody implements, or one our keys are not for.
		return refuse(ReasonAlgMismatch)
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return refuse(ReasonBadSignature)
	case errors.Is(err, jwt.ErrTokenExpired):
		return refuse(ReasonExpired)
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return refuse(ReasonNotYetValid)
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return refuse(ReasonWrongIssuer)
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return refuse(ReasonWrongAudience)
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return refuse(ReasonMissingClaim)
	case errors.Is(err, jwt.ErrInvalidType):
		return refuse(ReasonMalformed)
	}
	return refuse(ReasonInvalid)
}
