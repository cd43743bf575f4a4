package admin

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
)

// The admin API's cores. Each operation is one exported method of its
// resource's handler (Links, Sessions, Objects, Keys, Audit) that takes
// what the request says (a decoded body, a query, a path variable),
// validates it, calls the ledger or the store, and returns the body its
// JSON answer carries, or an error: a *Refusal for an answer the
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

// RetryAfterHeader is a Refusal's Retry-After value, "" for none.
func (e *Refusal) RetryAfterHeader() string {
	if e.RetryAfter <= 0 {
		return ""
	}
	return strconv.Itoa(e.RetryAfter)
}

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
func writeError(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error, notFound problem.Problem, attrs ...any) {
	if ref, ok := RefusalOf(err); ok {
		if ref.Challenge != "" {
			w.Header().Set("WWW-Authenticate", ref.Challenge)
		}
		if v := ref.RetryAfterHeader(); v != "" {
			w.Header().Set("Retry-After", v)
		}
		problem.Write(w, r, ref.Problem, ref.Detail)
		return
	}
	problem.Fail(log, w, r, err, notFound, attrs...)
}

// writeOK returns what answers a core's result: its body with 200, or
// its error (writeError, 404 for what the ledger did not find). A JSON
// handler passes the core's call straight to it:
// writeOK(log, w, r)(l.LinkShow(ctx, id)).
func writeOK(log *slog.Logger, w http.ResponseWriter, r *http.Request) func(any, error) {
	return func(body any, err error) {
		if err != nil {
			writeError(log, w, r, err, problem.NotFound)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, body)
	}
}

// writeDone answers a core that returns no body: 204, or its error as
// writeOK's.
func writeDone(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error) {
	if err != nil {
		writeError(log, w, r, err, problem.NotFound)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// decodeJSON reads a small JSON body strictly: unknown fields, trailing
// data and bodies over 64 KiB are a 400.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		problem.Write(w, r, problem.BadRequest, "The body is not valid JSON for this endpoint: "+jsonProblem(err))
		return false
	}
	if dec.More() {
		problem.Write(w, r, problem.BadRequest, "The body has data after the JSON value.")
		return false
	}
	return true
}

// jsonProblem describes a decoding error without echoing the input.
func jsonProblem(err error) string {
	var (
		se *json.SyntaxError
		te *json.UnmarshalTypeError
		me *http.MaxBytesError
	)
	switch {
	case errors.As(err, &se):
		return "syntax error at byte " + strconv.FormatInt(se.Offset, 10) + "."
	case errors.As(err, &te):
		return "field " + strconv.Quote(te.Field) + " has the wrong type."
	case errors.As(err, &me):
		return "body too large."
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return "unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ") + "."
	case errors.Is(err, io.EOF):
		return "empty body."
	}
	return "malformed."
}

// clock is the server clock; a handler that stamps what it stores embeds
// it.
type clock func() time.Time

// now is the server clock in the ledger's precision.
func (c clock) now() time.Time { return ledger.Micro(c()) }
