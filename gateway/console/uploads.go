package console

import (
	"net/http"

	"github.com/dlgate/dlgate/gateway/problem"
)

// Uploads serves the browser's resumable uploads at UploadsPath: tus 1.0,
// answered by the same handler as /v1/uploads/ (the uploads package,
// whose state is the ledger's and the store's), reached with the console
// session's cookie instead of a bearer, so that the page's script never
// holds a key. A finished upload is recorded, and audited object.stored,
// as the session's key.
func (h *Handler) Uploads(w http.ResponseWriter, r *http.Request) {
	if h.Config.Uploads == nil {
		problem.Write(w, r, problem.UploadsUnsupported, "")
		return
	}
	h.Config.Uploads.ServeHTTP(w, r)
}
