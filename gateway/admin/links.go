package admin

import (
	"net/http"

	"github.com/gorilla/mux"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/problem"
)

// The JSON handlers of the link routes: each decodes what the request
// says, calls its core (link_core.go) and writes the answer.

// CreateLink serves POST /v1/links (SPEC §6) (LinkCreate): 201 with the
// new link, 200 with the one an Idempotency-Key already made.
func (h *Links) CreateLink(w http.ResponseWriter, r *http.Request) {
	var req createLinkRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	_, keyGiven := r.Header["Idempotency-Key"]
	b, created, err := h.LinkCreate(r.Context(), req, r.Header.Get("Idempotency-Key"), keyGiven)
	if err != nil {
		writeError(h.log, w, r, err, problem.NotFound)
		return
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	httpx.WriteJSON(w, status, b)
}

// ListLinks serves GET /v1/links (LinkList).
func (h *Links) ListLinks(w http.ResponseWriter, r *http.Request) {
	writeOK(h.log, w, r)(h.LinkList(r.Context(), r.URL.Query()))
}

// ShowLink serves GET /v1/links/{id} (LinkShow).
func (h *Links) ShowLink(w http.ResponseWriter, r *http.Request) {
	writeOK(h.log, w, r)(h.LinkShow(r.Context(), mux.Vars(r)["id"]))
}

// RevokeLink serves POST /v1/links/{id}/revoke (LinkRevoke).
func (h *Links) RevokeLink(w http.ResponseWriter, r *http.Request) {
	writeOK(h.log, w, r)(h.LinkRevoke(r.Context(), mux.Vars(r)["id"]))
}

// AddAllowance serves POST /v1/links/{id}/allowance (AllowanceAdd).
func (h *Links) AddAllowance(w http.ResponseWriter, r *http.Request) {
	var req AllowanceRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	writeOK(h.log, w, r)(h.AllowanceAdd(r.Context(), mux.Vars(r)["id"], req))
}

// AllowanceChanges serves GET /v1/links/{id}/allowance: the audited top-ups.
func (h *Links) AllowanceChanges(w http.ResponseWriter, r *http.Request) {
	changes, err := h.ledger.AllowanceList(r.Context(), mux.Vars(r)["id"])
	if err != nil {
		problem.Fail(h.log, w, r, err, problem.NotFound)
		return
	}
	out := struct {
		Changes []allowanceChangeBody `json:"changes"`
	}{Changes: make([]allowanceChangeBody, 0, len(changes))}
	for _, c := range changes {
		out.Changes = append(out.Changes, allowanceChangeBody{Add: c.Add, Reason: c.Reason, CreatedAt: httpx.RFC3339(c.CreatedAt)})
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}

// Grants serves GET /v1/links/{id}/grants (GrantList).
func (h *Links) Grants(w http.ResponseWriter, r *http.Request) {
	writeOK(h.log, w, r)(h.GrantList(r.Context(), mux.Vars(r)["id"], r.URL.Query()))
}
