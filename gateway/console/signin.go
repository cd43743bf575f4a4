package console

import (
	"errors"
	"net/http"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/gateway/admin"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
)

// signInPage is the data of templates/sign_in.html.
type signInPage struct {
	Next  string
	Error string
}

func (signInPage) title() string { return "Sign in" }

// SignInPage serves GET /console/sign-in: a form with one field, key.
func (h *Handler) SignInPage(w http.ResponseWriter, r *http.Request) {
	h.render(w, r, http.StatusOK, "sign_in", signInPage{Next: localNext(r.URL.Query().Get("next"))})
}

// SignIn serves POST /console/sign-in (form field key, the bootstrap
// token or an API key): the key is verified exactly as a bearer of the
// admin API (admin.Auth.SignIn: throttle, constant-time comparison, lookup),
// a failure counting toward the same penalty, and a console session is
// opened in the ledger for it; the answer sets the session's cookie and
// goes on to next, or to the first page the key's scopes open
// (afterSignIn).
func (h *Handler) SignIn(w http.ResponseWriter, r *http.Request) {
	if !h.parseForm(w, r) {
		return
	}
	next := r.PostForm.Get("next")
	p, err := h.Admin.Auth.SignIn(r, r.PostForm.Get("key"))
	if ref, ok := admin.RefusalOf(err); ok {
		if v := ref.RetryAfterHeader(); v != "" {
			w.Header().Set("Retry-After", v)
		}
		msg := "That key is not one this gateway knows, or it was revoked or has expired."
		if ref.Problem.Status == http.StatusTooManyRequests {
			msg = "Too many failed sign-ins from this address: wait " + ref.RetryAfterHeader() + " s and try again."
		}
		h.render(w, r, ref.Problem.Status, "sign_in", signInPage{Next: localNext(next), Error: msg})
		return
	}
	if err != nil {
		h.failErr(w, r, err, problem.AdminUnauthorized)
		return
	}
	secret, hash := h.Admin.Auth.NewConsoleSession(p)
	if _, err := h.Sessions.ConsoleSessionCreate(r.Context(), p.KeyID, hash); err != nil {
		if errors.Is(err, ledger.ErrRefused) || errors.Is(err, ledger.ErrNotFound) {
			// Revoked between the check and the session: as refused.
			h.render(w, r, http.StatusUnauthorized, "sign_in", signInPage{Next: localNext(next),
				Error: "That key is not one this gateway knows, or it was revoked or has expired."})
			return
		}
		h.failErr(w, r, err, problem.AdminUnauthorized)
		return
	}
	h.Log.InfoContext(r.Context(), "console signed in", "key_id", p.KeyID)
	setCookie(w, r, secret)
	http.Redirect(w, r, afterSignIn(p.Scopes, next), http.StatusSeeOther)
}

// SignOut serves POST /console/sign-out: the session's row is deleted,
// so every process refuses its cookie from now on, and the cookie is
// cleared.
func (h *Handler) SignOut(w http.ResponseWriter, r *http.Request) {
	if c, err := r.Cookie(CookieName); err == nil && apikey.ValidSession(c.Value) {
		if err := h.Sessions.ConsoleSessionDelete(r.Context(), apikey.Hash(c.Value)); err != nil {
			h.failErr(w, r, err, problem.NotFound)
			return
		}
		h.Log.InfoContext(r.Context(), "console signed out")
	}
	clearCookie(w, r)
	http.Redirect(w, r, SignInPath, http.StatusSeeOther)
}
