// Package console is the operator console (SPEC §11): server-rendered
// pages on the admin listener under /console/, for people who hand out
// files to do in a browser what the admin API does — upload a file
// (resumably, over tus), make a link and copy it or show its QR code, see
// who downloaded it and how much arrived, top it up, revoke it, delete
// objects, make and revoke keys, read the audit trail.
//
// It is a client of the admin API's own code: every change goes through
// the cores of gateway/admin (LinkCreate, AllowanceAdd, KeyCreate,
// ObjectDelete, …) with the signed-in key as the ledger's actor, so its
// rules and their detail texts are the API's, and every change is audited
// as that key. The routes are declared in the gateway's one route table
// (gateway/routes.go), each with the scope it needs; a control the key
// may not use is not shown, and its route refuses it anyway (403).
//
// A handler per resource (LinkPages, ObjectPages, KeyPages, AuditPages),
// one file per page; the pages are html/template files embedded from
// templates/ and rendered by one function (render.go); the few scripts
// and the style sheet are embedded from static/ and served by the console
// itself. What keeps it safe is in one place each: the headers every
// answer carries, the Content-Security-Policy among them (headers), the
// refusal of cross-origin requests (net/http's CrossOriginProtection),
// and the session check (session.go).
package console

import (
	"context"
	"net/http"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/gateway/admin"
	"github.com/dlgate/dlgate/gateway/problem"
)

// CSP is the Content-Security-Policy of every console answer (SPEC §11):
// scripts, styles and images only from the console itself (images also
// as data: URLs, for the QR codes), and no framing. No page has an inline
// script or style, so nothing needs 'unsafe-inline'.
const CSP = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"

// Handler serves the console: the check every request passes (Open,
// Require), the pages of no one resource (home, sign-in, the static files,
// the uploads), and the pages of each resource. The route table
// (gateway/routes.go) names each route's handler.
type Handler struct {
	*site
	cop *http.CrossOriginProtection

	Links   *LinkPages
	Objects *ObjectPages
	Keys    *KeyPages
	Audit   *AuditPages
}

// New returns the console's handler.
func New(c Config) *Handler {
	s := &site{Config: c}
	h := &Handler{site: s, cop: http.NewCrossOriginProtection(),
		Links: &LinkPages{s}, Objects: &ObjectPages{s}, Keys: &KeyPages{s}, Audit: &AuditPages{s}}
	// A cross-origin state change is refused before anything else reads
	// the request (SPEC §11): 403, as a page or as problem+json.
	h.cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.Log.InfoContext(r.Context(), "console request refused", "reason", "cross_origin",
			"origin", r.Header.Get("Origin"), "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"))
		h.fail(w, r, CrossOrigin, "")
	}))
	return h
}

// UploadsPath is where the browser's resumable uploads go: tus, as at
// /v1/uploads/, under the console's path so that its cookie (Path=/console/)
// reaches it and no script ever holds a key.
const UploadsPath = Base + "uploads/"

// CrossOrigin is the answer to a cross-origin request.
var CrossOrigin = problem.Problem{Status: http.StatusForbidden, Type: "cross-origin-request",
	Title: "Cross-origin requests are refused", Help: "Open the console itself and try again from there."}

// headers sets what every console answer carries, whatever it is.
func headers(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

// Open wraps a route that needs no session (the sign-in page, the static
// files): the console's headers and the cross-origin check, nothing else.
func (h *Handler) Open(next http.Handler) http.Handler {
	inner := h.cop.Handler(next)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers(w)
		inner.ServeHTTP(w, r)
	})
}

// Require wraps a route that needs a signed-in session whose key holds
// sc: the console's headers, the cross-origin check, then the session
// (session.go) and the scope. The request goes on with the key as the
// ledger's actor and the admin API's caller.
func (h *Handler) Require(sc apikey.Scope, next http.Handler) http.Handler {
	return h.Open(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := h.session(w, r)
		if !ok {
			return
		}
		ctx, ref := h.Admin.Auth.Allow(r, admin.PrincipalOfKey(s.Key), sc)
		if ref != nil {
			// The refusal's page shows the session (its navigation,
			// sign-out), which is live: only this page is not the key's.
			h.refuse(w, r.WithContext(context.WithValue(r.Context(), sessionKey{}, s)), ref)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(ctx, sessionKey{}, s)))
	}))
}
