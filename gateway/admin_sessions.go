package gateway

import (
	"net/http"

	"github.com/gorilla/mux"
)

func (s *Server) handleRevokeSession(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	if err := s.admin.SessionRevoke(r.Context(), id); err != nil {
		s.fail(w, r, err, probNotFound)
		return
	}
	s.log.InfoContext(r.Context(), "session revoked", "session_id", id)
	s.warm.forget(func(e *warmSession) bool { return e.id == id })
	w.WriteHeader(http.StatusNoContent)
}
