package gateway

import (
	_ "embed"
	"net/http"
	"slices"
	"strconv"
)

// openAPIDoc describes the admin API (SPEC §6). gateway/openapi_test.go
// checks it against adminRoutes both ways, validates its examples and
// validates real exchanges against it; client/openapi_test.go checks the
// CLI's client against it.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns a copy of the admin API's OpenAPI 3.1 document, as
// served at GET /openapi.json on the admin listener.
func OpenAPI() []byte { return slices.Clone(openAPIDoc) }

// handleOpenAPI serves the document without a token: it describes the
// API, it grants nothing.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(openAPIDoc)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(openAPIDoc) //nolint:errcheck // the client is gone
	}
}

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
