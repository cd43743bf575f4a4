package admin

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/dlgate/dlgate/gateway/warm"
	"github.com/dlgate/dlgate/ledger"
)

// Sessions serves the transfer sessions' route (SPEC §6): their
// revocation.
type Sessions struct {
	ledger ledger.Admin
	warm   *warm.Sessions
	log    *slog.Logger
}

// RevokeSession serves DELETE /v1/sessions/{id} (SessionRevoke).
func (h *Sessions) RevokeSession(w http.ResponseWriter, r *http.Request) {
	writeDone(h.log, w, r, h.SessionRevoke(r.Context(), mux.Vars(r)["id"]))
}

// SessionRevoke revokes the transfer session id (idempotent); this
// process lets go of it at once, the others within their warm row's
// life. Errors: the ledger's (ErrNotFound).
func (h *Sessions) SessionRevoke(ctx context.Context, id string) error {
	if err := h.ledger.SessionRevoke(ctx, id); err != nil {
		return err
	}
	h.log.InfoContext(ctx, "session revoked", "session_id", id)
	h.warm.ForgetSession(id)
	return nil
}
