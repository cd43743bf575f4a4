package gateway

import (
	"net/http"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dlgate/dlgate/token"
)

// route is one line of a route table. Each route is declared once; the
// 405 answer and its Allow header are derived from the table, not
// repeated per path.
type route struct {
	name    string // the route label of logs and metrics
	pattern string
	methods []string
	h       http.Handler
}

var (
	getHead     = []string{http.MethodGet, http.MethodHead}
	getHeadPost = []string{http.MethodGet, http.MethodHead, http.MethodPost}
	post        = []string{http.MethodPost}
)

// publicRoutes are GATEWAY_LISTEN's routes (SPEC §3). The mint route comes
// before the named link URL so that POST …/sessions always mints; a GET of
// …/sessions is the named URL of a file called "sessions". Each bounds the
// refusals of one client on one token (refusals.go).
func (s *Server) publicRoutes() []route {
	link := func(h http.HandlerFunc) http.Handler { return s.boundRefusals(token.Link, h) }
	session := func(h http.HandlerFunc) http.Handler { return s.boundRefusals(token.Session, h) }
	return []route{
		{"mint", "/d/{token}/sessions", post, link(s.handleMint)},
		{"link", "/d/{token}", getHeadPost, link(s.handleLink)},
		{"link", "/d/{token}/{name:.+}", getHeadPost, link(s.handleLink)},
		{"session", "/s/{token}", getHead, session(s.handleSession)},
		{"session", "/s/{token}/{name:.+}", getHead, session(s.handleSession)},
	}
}

// adminRoutes are GATEWAY_ADMIN_LISTEN's routes (SPEC §6).
func (s *Server) adminRoutes() []route {
	admin := func(h http.HandlerFunc) http.Handler { return s.requireAdmin(h) }
	open := func(h http.HandlerFunc) http.Handler { return h }
	return []route{
		{"admin_links_create", "/v1/links", post, admin(s.handleCreateLink)},
		{"admin_links_list", "/v1/links", []string{http.MethodGet}, admin(s.handleListLinks)},
		{"admin_links_show", "/v1/links/{id}", []string{http.MethodGet}, admin(s.handleShowLink)},
		{"admin_links_revoke", "/v1/links/{id}/revoke", post, admin(s.handleRevokeLink)},
		{"admin_links_allowance", "/v1/links/{id}/allowance", post, admin(s.handleAllowance)},
		{"admin_links_allowance_changes", "/v1/links/{id}/allowance", []string{http.MethodGet}, admin(s.handleAllowanceChanges)},
		{"admin_links_grants", "/v1/links/{id}/grants", []string{http.MethodGet}, admin(s.handleGrants)},
		{"admin_sessions_revoke", "/v1/sessions/{id}", []string{http.MethodDelete}, admin(s.handleRevokeSession)},
		{"admin_objects_put", "/v1/objects/{key:.+}", []string{http.MethodPut}, checksOwnPath(s.idleUpload(admin(s.handlePutObject)))},
		{"admin_objects_delete", "/v1/objects/{key:.+}", []string{http.MethodDelete}, checksOwnPath(admin(s.handleDeleteObject))},
		{"healthz", "/healthz", getHead, open(func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
		})},
		{"readyz", "/readyz", getHead, open(s.handleReady)},
		{"openapi", "/openapi.json", getHead, open(s.handleOpenAPI)},
		{"pprof", "/debug/pprof/{profile:.*}", []string{http.MethodGet, http.MethodPost}, admin(s.handlePprof)},
		{"metrics", "/metrics", []string{http.MethodGet}, promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})},
	}
}

// PublicHandler returns the handler for GATEWAY_LISTEN.
func (s *Server) PublicHandler() http.Handler { return s.router(true, true, s.publicRoutes()) }

// AdminHandler returns the handler for GATEWAY_ADMIN_LISTEN.
func (s *Server) AdminHandler() http.Handler { return s.router(false, false, s.adminRoutes()) }

// router builds a mux router from a route table and wraps all of it, so
// that even mux's own answers (404, 405) and those of cleanPaths (308 for
// a GET or HEAD of an unclean path, 400 for other methods, OPTIONS *)
// carry the listener's headers and request id and are logged and
// counted. On the public listener, fast puts fastRoutes in front of mux.
func (s *Server) router(public, fast bool, routes []route) http.Handler {
	// mux's own cleaning answers every method with a 301; cleanPaths
	// cleans instead, without ever changing a method or a target.
	r := mux.NewRouter().SkipClean(true)
	if !public {
		// Object keys may contain encoded characters; match on the raw
		// path and unescape the variable ourselves.
		r.UseEncodedPath()
	}
	hs := make([]http.Handler, len(routes))
	owners := map[*mux.Route]bool{}
	for i, rt := range routes {
		hs[i] = named(rt.name, rt.h)
		mr := r.Handle(rt.pattern, hs[i]).Methods(rt.methods...)
		if _, ok := rt.h.(pathChecker); ok {
			owners[mr] = true
		}
	}
	r.NotFoundHandler = named("unknown", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeProblem(w, req, probNotFound, "")
	}))
	r.MethodNotAllowedHandler = named("method_not_allowed", http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		// RFC 9110 §15.5.6: a 405 names the methods the target allows.
		w.Header().Set("Allow", allowed(r, req))
		writeProblem(w, req, probMethodNotAllowed, "")
	}))
	var h http.Handler = r
	if fast {
		h = newFastRoutes(routes, hs, r)
	}
	h = cleanPaths(h, r, owners, !public, tableMethods(routes))
	if public {
		// Bodies are settled before routing, so before any lookup or
		// claim (gateway/limits.go).
		return s.wrap(public, s.limitPublicBodies(h))
	}
	return s.wrap(public, h)
}

// allowed lists the methods some route of r accepts for req's path.
func allowed(r *mux.Router, req *http.Request) string {
	var list string
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete} {
		probe := req.Clone(req.Context())
		probe.Method = m
		var match mux.RouteMatch
		if r.Match(probe, &match) && match.MatchErr == nil {
			if list != "" {
				list += ", "
			}
			list += m
		}
	}
	return list
}
