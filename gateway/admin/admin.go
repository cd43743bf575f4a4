// Package admin serves the admin API on GATEWAY_ADMIN_LISTEN (SPEC §6):
// links (create, list, show, revoke, allowance, grants), sessions
// (revoke), objects (upload, delete), operators' keys (create, list,
// revoke), the audit trail, and the OpenAPI document that describes them
// (openapi.json). Every route is declared once, with its scope, in the
// gateway's route table; this package holds the handlers, one per
// resource, each with the cores of its operations (core.go), which the
// operator console calls too, and the check of keys and scopes (auth.go).
package admin

import (
	"log/slog"
	"net/http"
	"net/netip"
	"time"

	"github.com/dlgate/dlgate/gateway/metrics"
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

// Handler is the admin API: a handler per resource, and the check of
// keys and scopes every route but the open ones passes. The route table
// (gateway/routes.go) names each route's handler; the OpenAPI document
// (ServeOpenAPI) and the profiler (Pprof) need none of this state.
type Handler struct {
	Auth     *Auth
	Links    *Links
	Sessions *Sessions
	Objects  *Objects
	Keys     *Keys
	Audit    *Audit
}

// New returns the admin API's handlers, each given the part of c it
// uses.
func New(c Config) *Handler {
	auth := &Auth{clock: c.Now, log: c.Log, metrics: c.Metrics, clientAddr: c.ClientAddr,
		v: newVerifier(c.APIKeys, c.AdminToken, c.Metrics.AdminKeyLookups.Inc)}
	return &Handler{
		Auth: auth,
		Links: &Links{clock: c.Now, ledger: c.Admin, store: c.Store, tokens: c.Keys, warm: c.Warm, log: c.Log,
			publicURL: c.PublicURL, defaults: c.Defaults},
		Sessions: &Sessions{ledger: c.Admin, warm: c.Warm, log: c.Log},
		Objects:  &Objects{ledger: c.Objects, store: c.Store, log: c.Log},
		Keys:     &Keys{clock: c.Now, ledger: c.APIKeys, auth: auth, log: c.Log},
		Audit:    &Audit{ledger: c.Audit, log: c.Log},
	}
}
