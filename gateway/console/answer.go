package console

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/dlgate/dlgate/gateway/admin"
	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
)

// The answers of what stops a request: a problem, a core's Refusal, an
// error of the ledger or the store. A browser gets a page, a script
// problem+json.

// fail answers p with detail: a page to a browser, problem+json to a
// script (an upload, a fetch).
func (h *site) fail(w http.ResponseWriter, r *http.Request, p problem.Problem, detail string) {
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
func (h *site) refuse(w http.ResponseWriter, r *http.Request, ref *admin.Refusal) {
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
func (h *site) failErr(w http.ResponseWriter, r *http.Request, err error, notFound problem.Problem) {
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

// errorsIsNotFound reports whether err says the thing asked for is not
// there (or is one the caller may not see).
func errorsIsNotFound(err error) bool {
	return errors.Is(err, ledger.ErrNotFound) || errors.Is(err, ledger.ErrRefused)
}
