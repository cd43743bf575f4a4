package gateway

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

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
	// ownPath marks a route whose handler checks its own path variable
	// (an object key), so that cleanPaths hands it requests whose path is
	// not clean instead of refusing them.
	ownPath bool
}

// The admin API's scopes (SPEC §6), and the two markers of routes that
// need none or more than any.
const (
	scopeLinksRead     = "links:read"
	scopeLinksWrite    = "links:write"
	scopeObjectsWrite  = "objects:write"
	scopeObjectsDelete = "objects:delete"
	scopeSessionsWrite = "sessions:write"
	scopeOpen          = "open"
	scopeBootstrap     = "bootstrap"
)

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
	return []route{
		{name: "admin_links_create", pattern: "/v1/links", methods: post, h: http.HandlerFunc(a.CreateLink), scope: scopeLinksWrite},
		{name: "admin_links_list", pattern: "/v1/links", methods: get, h: http.HandlerFunc(a.ListLinks), scope: scopeLinksRead},
		{name: "admin_links_show", pattern: "/v1/links/{id}", methods: get, h: http.HandlerFunc(a.ShowLink), scope: scopeLinksRead},
		{name: "admin_links_revoke", pattern: "/v1/links/{id}/revoke", methods: post, h: http.HandlerFunc(a.RevokeLink), scope: scopeLinksWrite},
		{name: "admin_links_allowance", pattern: "/v1/links/{id}/allowance", methods: post, h: http.HandlerFunc(a.AddAllowance), scope: scopeLinksWrite},
		{name: "admin_links_allowance_changes", pattern: "/v1/links/{id}/allowance", methods: get, h: http.HandlerFunc(a.AllowanceChanges), scope: scopeLinksRead},
		{name: "admin_links_grants", pattern: "/v1/links/{id}/grants", methods: get, h: http.HandlerFunc(a.Grants), scope: scopeLinksRead},
		{name: "admin_sessions_revoke", pattern: "/v1/sessions/{id}", methods: del, h: http.HandlerFunc(a.RevokeSession), scope: scopeSessionsWrite},
		{name: "admin_objects_put", pattern: "/v1/objects/{key:.+}", methods: put, h: http.HandlerFunc(a.PutObject), scope: scopeObjectsWrite, ownPath: true},
		{name: "admin_objects_delete", pattern: "/v1/objects/{key:.+}", methods: del, h: http.HandlerFunc(a.DeleteObject), scope: scopeObjectsDelete, ownPath: true},
		// tus 1.0 (SPEC §11): creation at the collection, the rest at an
		// upload's URL.
		{name: "admin_uploads", pattern: "/v1/uploads/", methods: []string{http.MethodPost, http.MethodOptions}, h: s.uploadsHandler(), scope: scopeObjectsWrite},
		{name: "admin_uploads", pattern: "/v1/uploads/{id}", methods: []string{http.MethodHead, http.MethodPatch, http.MethodDelete, http.MethodGet}, h: s.uploadsHandler(), scope: scopeObjectsWrite},
		{name: "healthz", pattern: "/healthz", methods: getHead, h: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			httpx.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		}), scope: scopeOpen},
		{name: "readyz", pattern: "/readyz", methods: getHead, h: http.HandlerFunc(s.handleReady), scope: scopeOpen},
		{name: "openapi", pattern: "/openapi.json", methods: getHead, h: http.HandlerFunc(a.ServeOpenAPI), scope: scopeOpen},
		{name: "pprof", pattern: "/debug/pprof/{profile:.*}", methods: []string{http.MethodGet, http.MethodPost}, h: http.HandlerFunc(a.Pprof), scope: scopeBootstrap},
		{name: "metrics", pattern: "/metrics", methods: get, h: promhttp.HandlerFor(s.metrics.Reg, promhttp.HandlerOpts{}), scope: scopeOpen},
	}
}

// guarded wraps each admin route in what its scope demands: the admin
// token for any scope, nothing for scopeOpen. An upload's body is bounded
// in its idle time outside the check, so a refused upload's body is not
// drained either.
func (s *Server) guarded(routes []route) []route {
	for i, rt := range routes {
		if rt.scope != scopeOpen {
			rt.h = s.admin.RequireAdmin(rt.h)
		}
		if rt.name == "admin_objects_put" || rt.name == "admin_uploads" {
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

// AdminRoutes lists the admin listener's route table as "METHOD PATTERN",
// one entry per method, patterns in gorilla/mux syntax
// ("/v1/objects/{key:.+}"). It exists so that tests and tools can compare
// the router with the OpenAPI document without starting a listener.
func (s *Server) AdminRoutes() []string {
	var out []string
	for _, rt := range s.adminRoutes() {
		for _, m := range rt.methods {
			out = append(out, m+" "+rt.pattern)
		}
	}
	return out
}
