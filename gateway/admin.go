package gateway

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// requireAdmin checks the admin bearer token in constant time.
func (s *Server) requireAdmin(h http.HandlerFunc) http.HandlerFunc {
	want := []byte(s.AdminToken)
	return func(w http.ResponseWriter, r *http.Request) {
		// RFC 9110 §11.1: the scheme name is case-insensitive.
		scheme, got, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") || len(want) == 0 ||
			subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="admin"`)
			writeProblem(w, r, probAdminUnauthorized, "")
			return
		}
		h(w, r)
	}
}

// decodeJSON reads a small JSON body strictly: unknown fields, trailing
// data and bodies over 64 KiB are a 400.
func decodeJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeProblem(w, r, probBadRequest, "The body is not valid JSON for this endpoint: "+jsonProblem(err))
		return false
	}
	if dec.More() {
		writeProblem(w, r, probBadRequest, "The body has data after the JSON value.")
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
