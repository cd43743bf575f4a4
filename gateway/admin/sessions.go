package admin

import (
	"context"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/dlgate/dlgate/gateway/problem"
)

// RevokeSession serves DELETE /v1/sessions/{id} (SessionRevoke).
func (h *Handler) RevokeSession(w http.ResponseWriter, r *http.Request) {
	if err := h.SessionRevoke(r.Context(), mux.Vars(r)["id"]); err != nil {
		h.writeError(w, r, err, problem.NotFound)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// SessionRevoke revokes the transfer session id (idempotent); this
// process lets go of it at once, the others within their warm row's
// life. Errors: the ledger's (ErrNotFound).
func (h *Handler) SessionRevoke(ctx context.Context, id string) error {
	if err := h.Admin.SessionRevoke(ctx, id); err != nil {
		return err
	}
	h.Log.InfoContext(ctx, "session revoked", "session_id", id)
	h.Warm.ForgetSession(id)
	return nil
}
