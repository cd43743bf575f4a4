package admin

import (
	"net/http"

	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/gorilla/mux"
)

// RevokeSession serves DELETE /v1/sessions/{id}.
func (h *Handler) RevokeSession(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	if err := h.Admin.SessionRevoke(r.Context(), id); err != nil {
		problem.Fail(h.Log, w, r, err, problem.NotFound)
		return
	}
	h.Log.InfoContext(r.Context(), "session revoked", "session_id", id)
	h.Warm.ForgetSession(id)
	w.WriteHeader(http.StatusNoContent)
}
