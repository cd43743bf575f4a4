package gateway

import (
	"fmt"
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/gateway/admin"
	"github.com/dlgate/dlgate/gateway/console"
	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/token"
)

// route is one line of a route table: each route is declared once, and
// the router (router.go), the 405 answers with their Allow header,
// OPTIONS * and the OpenAPI test are derived from the table.
type route struct {
	name    string // the route label of logs and metrics
	pattern string // a plain gorilla/mux path template (router.go)
	methods []string
	h       http.Handler
	// scope is what an admin route demands of its caller's key (SPEC §6):
	// one of the admin API's scopes, scopeOpen for the routes that need
	// no key at all (health, readiness, metrics, the OpenAPI document) and
	// scopeBootstrap for those only the admin token may use. Public
	// routes have none: their callers are recipients, not operators.
	scope string
	// console marks a route of the operator console: its caller is a
	// console session (a cookie), not a bearer, so guarded wraps it in the
	// console's check of the same scope (gateway/console).
	console bool
	// ownPath marks a route whose handler checks its own path variable
	// (an object key), so that cleanPaths hands it requests whose path is
	// not clean instead of refusing them.
	ownPath bool
}

// The admin API's scopes (SPEC §6, apikey's), and the two markers of
// routes that need none or more than any. objects:read is declared by the
// SPEC for the object listing, which the console's objects page serves.
const (
	scopeLinksRead     = string(apikey.LinksRead)
	scopeLinksWrite    = string(apikey.LinksWrite)
	scopeObjectsRead   = string(apikey.ObjectsRead)
	scopeObjectsWrite  = string(apikey.ObjectsWrite)
	scopeObjectsDelete = string(apikey.ObjectsDelete)
	scopeSessionsWrite = string(apikey.SessionsWrite)
	scopeAuditRead     = string(apikey.AuditRead)
	scopeKeysWrite     = string(apikey.KeysWrite)
	scopeOpen          = "open"
	scopeBootstrap     = "bootstrap"
)

// checkScope says what is wrong with a route's declared scope: empty, or
// neither a scope of apikey nor one of the two markers. New refuses a
// table with such a route, so that no route is served unprotected by
// mistake (TestEveryAdminRouteDeclaresAKnownScope walks the table too).
func checkScope(rt route) error {
	switch rt.scope {
	case "":
		return fmt.Errorf("gateway: admin route %s (%s) declares no scope", rt.name, rt.pattern)
	case scopeOpen, scopeBootstrap:
		return nil
	}
	if _, err := apikey.ParseScope(rt.scope); err != nil {
		return fmt.Errorf("gateway: admin route %s (%s) declares an unknown scope: %w", rt.name, rt.pattern, err)
	}
	return nil
}

var (
	get         = []string{http.MethodGet}
	getHead     = []string{http.MethodGet, http.MethodHead}
	getHeadPost = []string{http.MethodGet, http.MethodHead, http.MethodPost}
	post        = []string{http.MethodPost}
	put         = []string{http.MethodPut}
	del         = []string{http.MethodDelete}
)

// publicRoutes are GATEWAY_LISTEN's routes (SPEC §3). The mint route comes
// before the named link URL so that POST …/sessions always mints; a GET of
// …/sessions is the named URL of a file called "sessions". Each bounds the
// refusals of one client on one token (gateway/public/refusals.go).
func (s *Server) publicRoutes() []route {
	p := s.public
	link := func(h http.HandlerFunc) http.Handler { return p.Bound(token.Link, h) }
	session := func(h http.HandlerFunc) http.Handler { return p.Bound(token.Session, h) }
	return []route{
		{name: "mint", pattern: "/d/{token}/sessions", methods: post, h: link(p.Mint)},
		{name: "link", pattern: "/d/{token}", methods: getHeadPost, h: link(p.Link)},
		{name: "link", pattern: "/d/{token}/{name:.+}", methods: getHeadPost, h: link(p.Link)},
		{name: "session", pattern: "/s/{token}", methods: getHead, h: session(p.Session)},
		{name: "session", pattern: "/s/{token}/{name:.+}", methods: getHead, h: session(p.Session)},
	}
}

// adminRoutes are GATEWAY_ADMIN_LISTEN's routes (SPEC §6), each with the
// scope it demands.
func (s *Server) adminRoutes() []route {
	a := s.admin
	return append([]route{
		{name: "admin_links_create", pattern: "/v1/links", methods: post, h: http.HandlerFunc(a.Links.CreateLink), scope: scopeLinksWrite},
		{name: "admin_links_list", pattern: "/v1/links", methods: get, h: http.HandlerFunc(a.Links.ListLinks), scope: scopeLinksRead},
		{name: "admin_links_show", pattern: "/v1/links/{id}", methods: get, h: http.HandlerFunc(a.Links.ShowLink), scope: scopeLinksRead},
		{name: "admin_links_revoke", pattern: "/v1/links/{id}/revoke", methods: post, h: http.HandlerFunc(a.Links.RevokeLink), scope: scopeLinksWrite},
		{name: "admin_links_allowance", pattern: "/v1/links/{id}/allowance", methods: post, h: http.HandlerFunc(a.Links.AddAllowance), scope: scopeLinksWrite},
		{name: "admin_links_allowance_changes", pattern: "/v1/links/{id}/allowance", methods: get, h: http.HandlerFunc(a.Links.AllowanceChanges), scope: scopeLinksRead},
		{name: "admin_links_grants", pattern: "/v1/links/{id}/grants", methods: get, h: http.HandlerFunc(a.Links.Grants), scope: scopeLinksRead},
		{name: "admin_sessions_revoke", pattern: "/v1/sessions/{id}", methods: del, h: http.HandlerFunc(a.Sessions.RevokeSession), scope: scopeSessionsWrite},
		{name: "admin_objects_put", pattern: "/v1/objects/{key:.+}", methods: put, h: http.HandlerFunc(a.Objects.PutObject), scope: scopeObjectsWrite, ownPath: true},
		{name: "admin_objects_delete", pattern: "/v1/objects/{key:.+}", methods: del, h: http.HandlerFunc(a.Objects.DeleteObject), scope: scopeObjectsDelete, ownPath: true},
		// tus 1.0 (SPEC §11): creation at the collection, the rest at an
		// upload's URL.
		{name: "admin_uploads", pattern: "/v1/uploads/", methods: []string{http.MethodPost, http.MethodOptions}, h: s.uploadsHandler(), scope: scopeObjectsWrite},
		{name: "admin_uploads", pattern: "/v1/uploads/{id}", methods: []string{http.MethodHead, http.MethodPatch, http.MethodDelete, http.MethodGet}, h: s.uploadsHandler(), scope: scopeObjectsWrite},
		{name: "admin_keys_create", pattern: "/v1/keys", methods: post, h: http.HandlerFunc(a.Keys.CreateKey), scope: scopeKeysWrite},
		// SPEC §6 has no keys:read: seeing which keys exist, their scopes
		// and last use is managing them.
		{name: "admin_keys_list", pattern: "/v1/keys", methods: get, h: http.HandlerFunc(a.Keys.ListKeys), scope: scopeKeysWrite},
		{name: "admin_keys_revoke", pattern: "/v1/keys/{id}", methods: del, h: http.HandlerFunc(a.Keys.RevokeKey), scope: scopeKeysWrite},
		{name: "admin_audit", pattern: "/v1/audit", methods: get, h: http.HandlerFunc(a.Audit.ListAudit), scope: scopeAuditRead},
		{name: "healthz", pattern: "/healthz", methods: getHead, h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		}), scope: scopeOpen},
		{name: "readyz", pattern: "/readyz", methods: getHead, h: http.HandlerFunc(s.handleReady), scope: scopeOpen},
		{name: "openapi", pattern: "/openapi.json", methods: getHead, h: http.HandlerFunc(admin.ServeOpenAPI), scope: scopeOpen},
		{name: "pprof", pattern: "/debug/pprof/{profile:.*}", methods: []string{http.MethodGet, http.MethodPost}, h: http.HandlerFunc(admin.Pprof), scope: scopeBootstrap},
		{name: "metrics", pattern: "/metrics", methods: get, h: promhttp.HandlerFor(s.metrics.Reg, promhttp.HandlerOpts{}), scope: scopeOpen},
	}, s.consoleRoutes()...)
}

// consoleRoutes are the operator console's routes (SPEC §11), none when
// it is off: each page declares the scope it needs, as an API route does
// (its controls are shown only to a key that holds theirs); the sign-in
// page, the sign-out and the static files are open. Pages are GET (and
// HEAD); each change is a POST of a form, after a confirmation page where
// it cannot be undone.
func (s *Server) consoleRoutes() []route {
	c := s.console
	if c == nil {
		return nil
	}
	h := func(f http.HandlerFunc) http.Handler { return f }
	routes := []route{
		{name: "console", pattern: "/console", methods: getHead, h: h(c.Home), scope: scopeOpen},
		{name: "console", pattern: "/console/", methods: getHead, h: h(c.Home), scope: scopeOpen},
		{name: "console_static", pattern: "/console/static/{file:.+}", methods: getHead, h: h(c.Static), scope: scopeOpen},
		{name: "console_sign_in", pattern: "/console/sign-in", methods: getHead, h: h(c.SignInPage), scope: scopeOpen},
		{name: "console_sign_in", pattern: "/console/sign-in", methods: post, h: h(c.SignIn), scope: scopeOpen},
		{name: "console_sign_out", pattern: "/console/sign-out", methods: post, h: h(c.SignOut), scope: scopeOpen},
		{name: "console_links", pattern: "/console/links", methods: getHead, h: h(c.Links.List), scope: scopeLinksRead},
		// Before /console/links/{id}, which would take "new" for an id.
		{name: "console_link_new", pattern: "/console/links/new", methods: getHead, h: h(c.Links.New), scope: scopeLinksWrite},
		{name: "console_link_new", pattern: "/console/links/new", methods: post, h: h(c.Links.Create), scope: scopeLinksWrite},
		{name: "console_link", pattern: "/console/links/{id}", methods: getHead, h: h(c.Links.Show), scope: scopeLinksRead},
		{name: "console_link_revoke", pattern: "/console/links/{id}/revoke", methods: getHead, h: h(c.Links.RevokeConfirm), scope: scopeLinksWrite},
		{name: "console_link_revoke", pattern: "/console/links/{id}/revoke", methods: post, h: h(c.Links.Revoke), scope: scopeLinksWrite},
		{name: "console_link_allowance", pattern: "/console/links/{id}/allowance", methods: getHead, h: h(c.Links.AllowanceConfirm), scope: scopeLinksWrite},
		{name: "console_link_allowance", pattern: "/console/links/{id}/allowance", methods: post, h: h(c.Links.AllowanceAdd), scope: scopeLinksWrite},
		{name: "console_session_revoke", pattern: "/console/sessions/{id}/revoke", methods: post, h: h(c.Links.SessionRevoke), scope: scopeSessionsWrite},
		{name: "console_objects", pattern: "/console/objects", methods: getHead, h: h(c.Objects.List), scope: scopeObjectsRead},
		{name: "console_object_delete", pattern: "/console/objects/delete", methods: getHead, h: h(c.Objects.DeleteConfirm), scope: scopeObjectsDelete},
		{name: "console_object_delete", pattern: "/console/objects/delete", methods: post, h: h(c.Objects.Delete), scope: scopeObjectsDelete},
		// SPEC §6 has no keys:read, as for GET /v1/keys.
		{name: "console_keys", pattern: "/console/keys", methods: getHead, h: h(c.Keys.List), scope: scopeKeysWrite},
		{name: "console_keys", pattern: "/console/keys", methods: post, h: h(c.Keys.Create), scope: scopeKeysWrite},
		{name: "console_key_revoke", pattern: "/console/keys/{id}/revoke", methods: getHead, h: h(c.Keys.RevokeConfirm), scope: scopeKeysWrite},
		{name: "console_key_revoke", pattern: "/console/keys/{id}/revoke", methods: post, h: h(c.Keys.Revoke), scope: scopeKeysWrite},
		{name: "console_audit", pattern: "/console/audit", methods: getHead, h: h(c.Audit.List), scope: scopeAuditRead},
		// tus 1.0 for the browser, as at /v1/uploads/.
		{name: "console_uploads", pattern: console.UploadsPath, methods: []string{http.MethodPost, http.MethodOptions}, h: h(c.Uploads), scope: scopeObjectsWrite},
		{name: "console_uploads", pattern: console.UploadsPath + "{id}", methods: []string{http.MethodHead, http.MethodPatch, http.MethodDelete, http.MethodGet}, h: h(c.Uploads), scope: scopeObjectsWrite},
	}
	for i := range routes {
		routes[i].console = true
	}
	return routes
}

// guarded wraps each admin route in what its scope demands
// (gateway/admin/auth.go): a key holding the scope (or the bootstrap
// token, which holds every one), the bootstrap token alone for
// scopeBootstrap, nothing for scopeOpen, which is never throttled either.
// New has checked every scope (checkScope). An upload's body is bounded
// in its idle time outside the check, so a refused upload's body is not
// drained either.
func (s *Server) guarded(routes []route) []route {
	for i, rt := range routes {
		switch {
		case rt.console && rt.scope == scopeOpen:
			rt.h = s.console.Open(rt.h)
		case rt.console:
			rt.h = s.console.Require(apikey.Scope(rt.scope), rt.h)
		case rt.scope == scopeOpen:
		case rt.scope == scopeBootstrap:
			rt.h = s.admin.Auth.RequireBootstrap(rt.h)
		default:
			rt.h = s.admin.Auth.RequireScope(apikey.Scope(rt.scope), rt.h)
		}
		if rt.name == "admin_objects_put" || rt.name == "admin_uploads" || rt.name == "console_uploads" {
			rt.h = s.idleUpload(rt.h)
		}
		routes[i] = rt
	}
	return routes
}

// uploadsHandler is the tus handler, or 501 when the store or the ledger
// cannot keep resumable uploads.
func (s *Server) uploadsHandler() http.Handler {
	if s.uploads == nil {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			problem.Write(w, r, problem.UploadsUnsupported, "")
		})
	}
	return s.uploads
}

// PublicHandler returns the handler for GATEWAY_LISTEN.
func (s *Server) PublicHandler() http.Handler { return s.router(true, s.publicRoutes()) }

// AdminHandler returns the handler for GATEWAY_ADMIN_LISTEN.
func (s *Server) AdminHandler() http.Handler { return s.router(false, s.guarded(s.adminRoutes())) }

// AdminRoute is one method of one route of the admin listener's table.
type AdminRoute struct {
	Name    string // the route label of logs and metrics
	Method  string
	Pattern string // gorilla/mux syntax: "/v1/objects/{key:.+}"
	// Scope is what the route demands: an apikey scope, "open" (nothing)
	// or "bootstrap" (the admin token only).
	Scope string
	// Console marks a route of the operator console, whose caller is a
	// console session's cookie instead of a bearer, and which the OpenAPI
	// document does not describe.
	Console bool
}

// Scope markers of AdminRoute.Scope.
const (
	ScopeOpen      = scopeOpen
	ScopeBootstrap = scopeBootstrap
)

// AdminRoutes lists the admin listener's route table, one entry per
// method. It exists so that tests and tools can compare the router with
// the OpenAPI document, and each route's scope with its documentation,
// without starting a listener.
func (s *Server) AdminRoutes() []AdminRoute {
	var out []AdminRoute
	for _, rt := range s.adminRoutes() {
		for _, m := range rt.methods {
			out = append(out, AdminRoute{Name: rt.name, Method: m, Pattern: rt.pattern, Scope: rt.scope, Console: rt.console})
		}
	}
	return out
}
