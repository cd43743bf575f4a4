// Package admin serves the admin API on GATEWAY_ADMIN_LISTEN (SPEC §6):
// links (create, list, show, revoke, allowance, grants), sessions
// (revoke), objects (upload, delete), operators' keys (create, list,
// revoke), the audit trail, and the OpenAPI document that describes them
// (openapi.json). Every route is declared once, with its scope, in the
// gateway's route table; this package holds the handlers and the check
// of keys and scopes (auth.go).
package admin

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/dlgate/dlgate/gateway/metrics"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/gateway/warm"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/sessions"
	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/token"
)

// Config is what the admin API needs; every field is required (the
// gateway applies its Options' defaults once, in gateway.New).
type Config struct {
	Admin   ledger.Admin
	Objects ledger.ObjectLedger
	// APIKeys are the operators' keys (auth.go, keys.go); Audit the
	// trail of their changes (audit.go).
	APIKeys ledger.Keys
	Audit   ledger.Audit
	Store   storage.Store
	Keys    *token.Keys
	// Warm lets go at once of the sessions this process keeps warm when
	// they are revoked here.
	Warm *warm.Sessions
	Log  *slog.Logger
	// PublicURL is the base of link URLs, without a trailing slash.
	PublicURL string
	// AdminToken is GATEWAY_ADMIN_TOKEN, the bootstrap token: every
	// scope, and the only credential of the bootstrap routes. Empty: none
	// is accepted.
	AdminToken string
	// ClientAddr names a request's client (SPEC §8, trusted proxies
	// applied): failed authentications are counted per address.
	ClientAddr func(*http.Request) netip.Addr
	Metrics    *metrics.Metrics
	// Defaults are the gateway-wide session defaults (SPEC §4), shown
	// resolved on each link.
	Defaults sessions.Defaults
	Now      func() time.Time
}

// Handler serves the admin API.
type Handler struct {
	Config
	auth *verifier
}

// New returns the admin API's handler.
func New(c Config) *Handler {
	return &Handler{Config: c, auth: newVerifier(c.APIKeys, c.AdminToken, c.Metrics.AdminKeyLookups.Inc)}
}

// now is the server clock in the ledger's precision.
func (h *Handler) now() time.Time { return ledger.Micro(h.Now()) }

// decodeJSON reads a small JSON body strictly: unknown fields, trailing
// data and bodies over 64 KiB are a 400.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		problem.Write(w, r, problem.BadRequest, "The body is not valid JSON for this endpoint: "+jsonProblem(err))
		return false
	}
	if dec.More() {
		problem.Write(w, r, problem.BadRequest, "The body has data after the JSON value.")
		return false
	}
	return true
}

// jsonProblem describes a decoding error without echoing the input.
func jsonProblem(err error) string {
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
		me *http.MaxBytesError
	)
	switch {
	case errors.As(err, &se):
		return "syntax error at byte " + strconv.FormatInt(se.Offset, 10) + "."
	case errors.As(err, &te):
		return "field " + strconv.Quote(te.Field) + " has the wrong type."
	case errors.As(err, &me):
		return "body too large."
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ") + "."
	case errors.Is(err, io.EOF):
		return "empty body."
	}
	return "malformed."
}

// sessionDefaults layers the link's session settings over the gateway's.
func (h *Handler) sessionDefaults(l *ledger.Link) sessions.Defaults {
	return sessions.Defaults{TTL: l.Session.TTL, ByteBudget: l.Session.ByteBudget, MaxConcurrency: l.Session.MaxConcurrency}.Or(h.Defaults)
}
