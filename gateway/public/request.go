package public

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"github.com/gorilla/mux"

	"github.com/dlgate/dlgate/auth"
	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/token"
)

// A call is what one request on a public route asks, read from the
// request once, before anything is looked up (SPEC §2, §3, §5, §8): the
// rest of its way through this package works from it, and only the byte
// pipeline and the page writers see the request again.
type call struct {
	ctx  context.Context
	info *httpx.Info
	// token is the path's token, one this gateway minted for its kind;
	// hash its SHA-256, what the ledger knows it by.
	token string
	hash  []byte
	// kind is what a request on a link URL asks for (classifyLink).
	kind linkRequest
	// confirmed: a POST, the landing page's form or a plain client's
	// explicit claim.
	confirmed bool
	// caller is the verified caller. authErr is the answer to a
	// credential the authenticator refused (SPEC §8: 401, or 503 while
	// the keys to check it cannot be had), given where the route says.
	caller  auth.Caller
	authErr error
	// preview says why the request is a link preview or a prefetch
	// (SPEC §8), "" when it is not (and always for a POST).
	preview string
	// conditional: the request carries a precondition (RFC 9110 §13).
	conditional bool
	// client is the grant's short, secret-free note of who claimed.
	client string
	// cookie is the client id of the request's affinity cookie, "" when
	// it has none of the gateway's shape. userAgent is the exact
	// User-Agent, which with the address names a client without a cookie
	// (SPEC §5): address is that name once asked for (clients.addressOf).
	cookie, userAgent, address string
	// secure: cookies set on the answer are Secure (https).
	secure bool
	// idempotencyKey is the Idempotency-Key of a mint; badKey says it was
	// present but not 1–255 visible ASCII characters.
	idempotencyKey string
	badKey         bool
	// linkID, sessionID and grantID are what the request turned out to be
	// about, noted as they are learned, for the line that logs what
	// stopped it (Handler.fail).
	linkID, sessionID, grantID string
}

// linkRequest is what a request on a link URL asks for, decided from the
// request alone, before any database access (SPEC §3, §5, §8).
type linkRequest int

const (
	// linkRange is a GET or HEAD with Range: never a claim (§3 step 2),
	// at most a 303 to the client's session (§5).
	linkRange linkRequest = iota
	// linkPreview is a link previewer or a prefetch (§8): a preview page.
	linkPreview
	// linkHead is a HEAD: what a GET would answer, never a claim.
	linkHead
	// linkClaim is a GET or a POST: a claim, unless the link first shows
	// a landing page.
	linkClaim
)

// read reads r into a call, for a route whose {token} is of kind. A token
// this gateway did not mint (forged or mistyped) is errForged: the
// generic 404 without any database query (SPEC §2); the router's check
// of it (WithMinted) is not made again. The caller's credential is
// verified here, never touching the database, so a wrong or invalid one
// costs nothing and consumes nothing.
func (h *Handler) read(r *http.Request, kind token.Kind) (*call, error) {
	tok := mux.Vars(r)["token"]
	if !minted(r, kind, tok) && !h.Keys.Check(kind, tok) {
		return nil, errForged
	}
	c := &call{ctx: r.Context(), token: tok, hash: token.Hash(tok), confirmed: r.Method == http.MethodPost,
		userAgent: r.UserAgent(), secure: r.TLS != nil || strings.HasPrefix(h.PublicURL, "https://")}
	var err error
	if c.caller, err = h.Auth.Authenticate(r); err != nil {
		// Why goes to the debug log and a metric, never the credential.
		reason := auth.Reason(err)
		h.Metrics.AuthFailures.WithLabelValues(reason).Inc()
		h.Log.DebugContext(c.ctx, "credentials rejected", "reason", reason)
		c.authErr = errInvalidCredential
		if errors.Is(err, auth.ErrUnavailable) {
			c.authErr = errAuthUnavailable
		}
	}
	if !c.confirmed {
		c.preview = h.Previews.Check(r.Header)
	}
	c.kind = classifyLink(r.Method, r.Header.Get("Range") != "", c.preview)
	host := "-"
	if c.caller.Addr.IsValid() {
		host = c.caller.Addr.String()
	}
	c.client = host + " " + UserAgent(r, 120)
	c.cookie = cookieID(r)
	c.idempotencyKey = r.Header.Get("Idempotency-Key")
	_, present := r.Header["Idempotency-Key"]
	c.badKey = present && !httpx.ValidIdempotencyKey(c.idempotencyKey)
	c.conditional = httpx.Conditional(r)
	if c.info = httpx.InfoOf(r); c.info != nil && c.caller.Addr.IsValid() {
		c.info.Client = c.caller.Addr.String()
	}
	return c, nil
}

// classifyLink sorts a request on a link URL by its method, whether it
// has a Range, and the previewer or prefetch it is ("" for none). A POST
// is the landing page's form or a plain client's explicit claim: Range
// and previewers play no part in it.
func classifyLink(method string, ranged bool, preview string) linkRequest {
	switch {
	case method == http.MethodPost:
		return linkClaim
	case ranged:
		return linkRange
	case preview != "":
		return linkPreview
	case method == http.MethodHead:
		return linkHead
	}
	return linkClaim
}

// UserAgent is r's User-Agent cut to n bytes with anything but printable
// ASCII dropped, safe for logs and grants.
func UserAgent(r *http.Request, n int) string {
	ua := strings.Map(func(c rune) rune {
		if c < 0x20 || c > 0x7e {
			return -1
		}
		return c
	}, r.UserAgent())
	if len(ua) > n {
		ua = ua[:n]
	}
	return ua
}

// cookieID returns the client id of r's affinity cookie (affinity.go)
// when it has the shape the gateway gives one (22 base64url characters);
// anything else is no cookie at all, "".
func cookieID(r *http.Request) string {
	ck, err := r.Cookie(affinityCookie)
	if err != nil || len(ck.Value) != clientIDLen {
		return ""
	}
	if _, err := base64.RawURLEncoding.DecodeString(ck.Value); err != nil {
		return ""
	}
	return ck.Value
}

// mintedToken is the mark WithMinted leaves on a request.
type mintedToken struct {
	kind token.Kind
	tok  string
}

type mintedKey struct{}

// WithMinted returns r marked as carrying tok, a token of kind that
// token.Keys.Check found this gateway minted: the router checks a public
// URL's token before routing (SPEC §2: a forged one is answered there), so
// that the route's handler need not check its MAC again.
// The mark goes in the request's Info when it has one (no copy of the
// request), in its context otherwise.
func WithMinted(r *http.Request, kind token.Kind, tok string) *http.Request {
	if info := httpx.InfoOf(r); info != nil {
		info.MintedKind, info.Minted = kind, tok
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), mintedKey{}, mintedToken{kind, tok}))
}

// minted reports whether r carries WithMinted's mark for tok of kind.
func minted(r *http.Request, kind token.Kind, tok string) bool {
	if info := httpx.InfoOf(r); info != nil && info.Minted != "" {
		return info.MintedKind == kind && info.Minted == tok
	}
	m, ok := r.Context().Value(mintedKey{}).(mintedToken)
	return ok && m == mintedToken{kind, tok}
}
