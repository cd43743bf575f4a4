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
// One file per page; the pages are html/template files embedded from
// templates/ and rendered by one function (render.go); the few scripts
// and the style sheet are embedded from static/ and served by the console
// itself. What keeps it safe is in one place each: the headers every
// answer carries, the Content-Security-Policy among them (headers), the
// refusal of cross-origin requests (net/http's CrossOriginProtection),
// and the session check (session.go).
package console

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/gateway/admin"
	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
)

// Base is the path the console is served under.
const Base = "/console/"

// CSP is the Content-Security-Policy of every console answer (SPEC §11):
// scripts, styles and images only from the console itself (images also
// as data: URLs, for the QR codes), and no framing. No page has an inline
// script or style, so nothing needs 'unsafe-inline'.
const CSP = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'"

// Config is what the console needs; every field but Uploads is required.
type Config struct {
	// Admin is the admin API's handlers: their cores do every operation,
	// and its Auth checks sign-ins and counts failures.
	Admin *admin.Handler
	// Sessions keeps the console sessions (in the ledger, so every
	// process serves them).
	Sessions ledger.ConsoleSessions
	// Views are the ledger's reads the pages show beside the API's.
	Views ledger.Views
	// Uploads serves tus at UploadsPath for the browser (the uploads
	// package's handler); nil answers 501.
	Uploads http.Handler
	Log     *slog.Logger
	Now     func() time.Time
}

// Handler serves the console's pages.
type Handler struct {
	Config
	cop *http.CrossOriginProtection
}

// New returns the console's handler.
func New(c Config) *Handler {
	h := &Handler{Config: c, cop: http.NewCrossOriginProtection()}
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

// fail answers p with detail: a page to a browser, problem+json to a
// script (an upload, a fetch).
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, p problem.Problem, detail string) {
	if !httpx.WantsHTML(r) {
		problem.Write(w, r, p, detail)
		return
	}
	if p.Status >= 500 {
		w.Header().Set("Cache-Control", "no-store")
	}
	h.render(w, r, p.Status, "error", errorPage{Problem: p, Type: problem.Base + p.Type, Detail: detail, RequestID: httpx.RequestID(r)})
}

// refuse answers a core's Refusal.
func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, ref *admin.Refusal) {
	if ref.Challenge != "" {
		w.Header().Set("WWW-Authenticate", ref.Challenge)
	}
	if v := ref.RetryAfterHeader(); v != "" {
		w.Header().Set("Retry-After", v)
	}
	h.fail(w, r, ref.Problem, ref.Detail)
}

// failErr answers an error of a core: its Refusal, or the problem the
// gateway's table names for a ledger's or store's error (logged), with
// notFound for what is not there.
func (h *Handler) failErr(w http.ResponseWriter, r *http.Request, err error, notFound problem.Problem) {
	if ref, ok := admin.RefusalOf(err); ok {
		h.refuse(w, r, ref)
		return
	}
	if errorsIsNotFound(err) {
		h.fail(w, r, notFound, "")
		return
	}
	p, known := problem.For(err)
	level := slog.LevelWarn
	if !known {
		level = slog.LevelError
	}
	h.Log.Log(r.Context(), level, "console request failed", "status", p.Status, "err", err)
	h.fail(w, r, p, "")
}

// errorPage is the data of templates/error.html.
type errorPage struct {
	problem.Problem
	Type      string
	Detail    string
	RequestID string
}

func (e errorPage) title() string { return e.Title }
