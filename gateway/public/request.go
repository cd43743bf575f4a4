package public

import (
	"context"
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
	// caller is the verified caller; authErr why its credential was
	// refused (SPEC §8), answered where the route says.
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
	// it has none of the gateway's shape; address names a client without
	// one by its address and exact User-Agent (SPEC §5).
	cookie, address string
	// secure: cookies set on the answer are Secure (https).
	secure bool
	// idempotencyKey is the Idempotency-Key of a mint; badKey says it was
	// present but not 1–255 visible ASCII characters.
	idempotencyKey string
	badKey         bool
}

// read reads r into a call, for a route whose {token} is of kind. A token
// this gateway did not mint (forged or mistyped) is errForged: the
// generic 404 without any database query (SPEC §2). The caller's
// credential is verified here, never touching the database, so a wrong
// or invalid one costs nothing and consumes nothing.
func (h *Handler) read(r *http.Request, kind token.Kind) (*call, error) {
	tok := mux.Vars(r)["token"]
	if !h.Keys.Check(kind, tok) {
		return nil, errForged
	}
	c := &call{ctx: r.Context(), info: httpx.InfoOf(r), token: tok, hash: token.Hash(tok), confirmed: r.Method == http.MethodPost,
		conditional: httpx.Conditional(r),
		secure:      r.TLS != nil || strings.HasPrefix(h.PublicURL, "https://")}
	c.caller, c.authErr = h.Auth.Authenticate(r)
	if c.authErr != nil {
		// Why goes to the debug log and a metric, never the credential.
		reason := auth.Reason(c.authErr)
		h.Metrics.AuthFailures.WithLabelValues(reason).Inc()
		h.Log.DebugContext(c.ctx, "credentials rejected", "reason", reason)
	}
	if c.info != nil && c.caller.Addr.IsValid() {
		c.info.Client = c.caller.Addr.String()
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
	c.cookie, _ = cookieID(r)
	c.address = addressKey(r, c.caller)
	c.idempotencyKey = r.Header.Get("Idempotency-Key")
	_, present := r.Header["Idempotency-Key"]
	c.badKey = present && !httpx.ValidIdempotencyKey(c.idempotencyKey)
	return c, nil
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
