package admin

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/dlgate/dlgate/gateway/problem"
)

// The admin API's cores. Each operation is one exported method of Handler
// that takes what the request says (a decoded body, a query, a path
// variable), validates it, calls the ledger or the store, and returns the
// body its JSON answer carries, or an error: a *Refusal for an answer the
// operation itself decides (a rule broken, a scope lacking), anything else
// an error of the ledger or the store that problem's table maps. The JSON
// handlers decode, call the core and write; the operator console
// (gateway/console) calls the same cores with what its forms say and shows
// the same detail texts beside the same fields, so no rule has a second
// copy.

// Refusal is an answer a core gives instead of its result.
type Refusal struct {
	Problem problem.Problem
	// Detail is the one-line detail of the problem: written by the
	// gateway, never an error's text.
	Detail string
	// Field names the input the refusal is about, as the JSON body names
	// it ("downloads", "session.ttl", "object.key", "scopes"); "" when it
	// is about no one field.
	Field string
	// Challenge is the WWW-Authenticate header of a 401 or 403.
	Challenge string
	// RetryAfter is the Retry-After of a 429, in seconds.
	RetryAfter int
}

func (e *Refusal) Error() string { return "admin: " + e.Problem.Type + ": " + e.Detail }

// refuse is the Refusal of p about field.
func refuse(p problem.Problem, field, detail string) *Refusal {
	return &Refusal{Problem: p, Field: field, Detail: detail}
}

// badRequest is a 400 bad-request about field.
func badRequest(field, detail string) *Refusal { return refuse(problem.BadRequest, field, detail) }

// RefusalOf returns err's Refusal, if it is one.
func RefusalOf(err error) (*Refusal, bool) {
	var r *Refusal
	ok := errors.As(err, &r)
	return r, ok
}

// writeError answers err: a Refusal as itself, anything else through
// problem's table, with notFound for what the ledger did not find.
func (h *Handler) writeError(w http.ResponseWriter, r *http.Request, err error, notFound problem.Problem, attrs ...any) {
	if ref, ok := RefusalOf(err); ok {
		if ref.Challenge != "" {
			w.Header().Set("WWW-Authenticate", ref.Challenge)
		}
		if ref.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(ref.RetryAfter))
		}
		problem.Write(w, r, ref.Problem, ref.Detail)
		return
	}
	problem.Fail(h.Log, w, r, err, notFound, attrs...)
}

// WithPrincipal returns ctx carrying p as the authenticated caller, as
// RequireScope leaves it for the handlers: the console puts its session's
// key there before it calls a core (KeyCreate reads it).
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}
