package admin

import (
	_ "embed"
	"net/http"
	"slices"
	"strconv"
)

// openAPIDoc describes the admin API (SPEC §6). gateway/openapi_test.go
// checks it against the admin route table both ways, validates its examples and
// validates real exchanges against it; client/openapi_test.go checks the
// CLI's client against it.
//
//go:embed openapi.json
var openAPIDoc []byte

// OpenAPI returns a copy of the admin API's OpenAPI 3.1 document, as
// served at GET /openapi.json on the admin listener.
func OpenAPI() []byte { return slices.Clone(openAPIDoc) }

// ServeOpenAPI serves the document without a token: it describes the
// API, it grants nothing.
func ServeOpenAPI(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Content-Length", strconv.Itoa(len(openAPIDoc)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(openAPIDoc) //nolint:errcheck // the client is gone
	}
}
