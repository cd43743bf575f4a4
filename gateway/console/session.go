package console

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/gateway/admin"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
)

// Console sessions (SPEC §11). Signing in with a key opens a row in the
// ledger (ConsoleSessionCreate) named by the SHA-256 of a random secret;
// the secret is the cookie's value and nothing else keeps it. Every
// request reads the row again (ConsoleSessionGet, which ends a session 12
// h after sign-in or after 1 h without a request, both by the database's
// clock, and with its key), so any gateway process serves a signed-in
// console and a sign-out, which deletes the row, ends it on all of them
// at once. A session of the bootstrap token also ends, for a process, once
// that process runs with another GATEWAY_ADMIN_TOKEN: its secret carries a
// MAC by the token it was opened with (admin.Auth.NewConsoleSession).
// Each request of a session counts as a use of its key (last_used_at, at
// most once a minute: admin.Auth.TouchKey).

// CookieName is the console session's cookie.
const CookieName = "dlgate_console"

// session returns the live console session of r's cookie, or answers the
// request itself and returns false: while r's address is under penalty
// 429 before the cookie is read; without a cookie, or with one that opens
// no session, a page is sent to the sign-in page (303) and anything else
// gets 401. A cookie that opens no session counts as a failed
// authentication, as a wrong key does, and is cleared.
func (h *site) session(w http.ResponseWriter, r *http.Request) (*ledger.ConsoleSession, bool) {
	if ref := h.Admin.Auth.Throttled(r); ref != nil {
		h.refuse(w, r, ref)
		return nil, false
	}
	c, err := r.Cookie(CookieName)
	if err != nil {
		h.signInFirst(w, r, &admin.Refusal{Problem: problem.AdminUnauthorized, Detail: signInDetail})
		return nil, false
	}
	var s *ledger.ConsoleSession
	if apikey.ValidSession(c.Value) {
		s, err = h.Sessions.ConsoleSessionGet(r.Context(), apikey.Hash(c.Value))
	} else {
		err = ledger.ErrNotFound
	}
	// A session of the bootstrap token is bound to the token it was
	// opened with (admin.Auth.NewConsoleSession): once
	// GATEWAY_ADMIN_TOKEN is replaced, it has ended for this process.
	if err == nil && s.Key.ID == ledger.BootstrapKeyID && !h.Admin.Auth.ConsoleSessionBound(c.Value) {
		err = ledger.ErrNotFound
	}
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		clearCookie(w, r)
		ref := h.Admin.Auth.RefuseSession(r)
		ref.Detail = "This console session has ended (signed out, 12 hours after sign-in, an hour unused, its key revoked, or the admin token it was opened with replaced). Sign in again."
		h.signInFirst(w, r, ref)
		return nil, false
	case err != nil:
		h.failErr(w, r, err, problem.AdminUnauthorized)
		return nil, false
	}
	// A request of the console is a use of its key, as a bearer's is.
	h.Admin.Auth.TouchKey(r.Context(), admin.PrincipalOfKey(s.Key))
	return s, true
}

const signInDetail = "Sign in to the console first."

// signInFirst sends a page request to the sign-in page, coming back to
// where it was, and refuses anything else with ref (401).
func (h *site) signInFirst(w http.ResponseWriter, r *http.Request, ref *admin.Refusal) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, SignInPath+"?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		return
	}
	h.refuse(w, r, ref)
}

// SignInPath is the sign-in page.
const SignInPath = Base + "sign-in"

// localNext is next when it is a path of the console a sign-in may go on
// to (never another host: "//evil" or "/\evil" are not paths here, nor
// the sign-in page itself), else "".
func localNext(next string) string {
	if !strings.HasPrefix(next, Base) || strings.ContainsAny(next, "\\\r\n") || strings.HasPrefix(next, Base+"/") ||
		strings.HasPrefix(next, SignInPath) {
		return ""
	}
	return next
}

// setCookie sets the session cookie: HttpOnly (no script reads it),
// SameSite=Strict (no other site's page sends it), Secure over https,
// for the console's path only, lasting as long as a session can.
func setCookie(w http.ResponseWriter, r *http.Request, secret string) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: secret, Path: Base, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: int(ledger.ConsoleLifetime.Seconds())})
}

// clearCookie tells the browser to forget the session cookie.
func clearCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: Base, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil, MaxAge: -1})
}

// maxForm bounds a console form's body: the largest, a new link's, is a
// few hundred bytes.
const maxForm = 64 << 10

// parseForm reads a POST's form, bounded; a body that is not one is a
// 400 answered here.
func (h *site) parseForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		h.fail(w, r, problem.BadRequest, "The form could not be read.")
		return false
	}
	return true
}
