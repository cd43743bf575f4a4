package admin

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
)

// listParams are the query parameters of GET /v1/links (SPEC §6). Any
// other is refused: a misspelt filter would otherwise list every link.
var listParams = []string{"cursor", "limit", "account", "object_key", "state", "created_after", "created_before"}

// parseListQuery reads GET /v1/links's query into a ledger query, or
// returns the 400 naming the parameter. The cursor is checked by the
// ledger, which alone knows its format.
func parseListQuery(v url.Values) (ledger.ListQuery, *Refusal) {
	var q ledger.ListQuery
	if d := checkParams(v, listParams); d != "" {
		return q, badRequest("", d)
	}
	q.Cursor = v.Get("cursor")
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > ledger.MaxListLimit {
			return q, badRequest("limit", fmt.Sprintf("limit must be a whole number between 1 and %d.", ledger.MaxListLimit))
		}
		q.Limit = n
	}
	q.AccountID = v.Get("account")
	if len(q.AccountID) > 255 || strings.ContainsFunc(q.AccountID, isControl) {
		return q, badRequest("account", "account must be at most 255 bytes (of UTF-8, not characters) without control characters.")
	}
	q.ObjectKey = v.Get("object_key")
	if len(q.ObjectKey) > 1024 {
		return q, badRequest("object_key", "object_key must be at most 1024 bytes.")
	}
	if s := v.Get("state"); s != "" {
		st, err := ledger.ParseLinkState(s)
		if err != nil {
			return q, badRequest("state", "state must be one of active, exhausted, expired, revoked.")
		}
		q.State = st
	}
	for _, b := range []struct {
		name string
		t    *time.Time
	}{{"created_after", &q.CreatedAfter}, {"created_before", &q.CreatedBefore}} {
		if s := v.Get(b.name); s != "" {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return q, badRequest(b.name, b.name+" must be an RFC 3339 time, like 2030-01-02T03:04:05Z.")
			}
			*b.t = t
		}
	}
	return q, nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// linkListItem is a link in the listing: GET /v1/links/{id}'s body
// without the token (SPEC §6). The outer Token, always nil, hides the
// embedded one from encoding/json.
type linkListItem struct {
	linkBody
	Token *string `json:"token,omitempty"`
}

// ListLinks serves GET /v1/links (LinkList).
func (h *Handler) ListLinks(w http.ResponseWriter, r *http.Request) {
	page, err := h.LinkList(r.Context(), r.URL.Query())
	if err != nil {
		h.writeError(w, r, err, problem.NotFound)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, page)
}

type allowanceChangeBody struct {
	Add       int    `json:"add"`
	Reason    string `json:"reason"`
	CreatedAt string `json:"created_at"`
}

// AllowanceChanges serves GET /v1/links/{id}/allowance: the audited top-ups.
func (h *Handler) AllowanceChanges(w http.ResponseWriter, r *http.Request) {
	changes, err := h.Admin.AllowanceList(r.Context(), mux.Vars(r)["id"])
	if err != nil {
		problem.Fail(h.Log, w, r, err, problem.NotFound)
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

// ShowLink serves GET /v1/links/{id} (LinkShow).
func (h *Handler) ShowLink(w http.ResponseWriter, r *http.Request) {
	h.writeLink(w, r)(h.LinkShow(r.Context(), mux.Vars(r)["id"]))
}

// RevokeLink serves POST /v1/links/{id}/revoke (LinkRevoke).
func (h *Handler) RevokeLink(w http.ResponseWriter, r *http.Request) {
	h.writeLink(w, r)(h.LinkRevoke(r.Context(), mux.Vars(r)["id"]))
}

// AddAllowance serves POST /v1/links/{id}/allowance (AllowanceAdd).
func (h *Handler) AddAllowance(w http.ResponseWriter, r *http.Request) {
	var req AllowanceRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	h.writeLink(w, r)(h.AllowanceAdd(r.Context(), mux.Vars(r)["id"], req))
}

// writeLink answers a core's link (200) or its error.
func (h *Handler) writeLink(w http.ResponseWriter, r *http.Request) func(LinkBody, error) {
	return func(b LinkBody, err error) {
		if err != nil {
			h.writeError(w, r, err, problem.NotFound)
			return
		}
		httpx.WriteJSON(w, http.StatusOK, b)
	}
}

type grantBody struct {
	ID         string  `json:"id"`
	Kind       string  `json:"kind"`
	Status     string  `json:"status"`
	AccountID  *string `json:"account_id"`
	SessionID  *string `json:"session_id"`
	Client     string  `json:"client"`
	CreatedAt  string  `json:"created_at"`
	RefundedAt *string `json:"refunded_at"`
	// AffinityReuses counts the requests sent to the grant's session
	// instead of claiming again (SPEC §5); 0 for a stream grant.
	AffinityReuses int64 `json:"affinity_reuses"`
	// Delivery is what the grant's client acknowledged (SPEC §1).
	Delivery deliveryBody `json:"delivery"`
}

// deliveryBody is a grant's delivery evidence (SPEC §1, docs/api.md).
type deliveryBody struct {
	Status      ledger.DeliveryStatus `json:"status"`
	BytesAcked  int64                 `json:"bytes_acked"`
	Coverage    float64               `json:"coverage"`
	Attempts    int                   `json:"attempts"`
	DeliveredAt *string               `json:"delivered_at"`
	// InterruptedAt is when a stream attempt last ended short, or when a
	// session ended without full coverage.
	InterruptedAt *string `json:"interrupted_at"`
	// Measured is false when a number is only what the gateway wrote
	// (HTTP/2, no TCP counters), an upper bound of what the client got.
	Measured bool `json:"measured"`
}

func deliveryOf(d ledger.Delivery) deliveryBody {
	return deliveryBody{Status: d.Status, BytesAcked: d.BytesAcked, Coverage: d.Coverage, Attempts: d.Attempts,
		DeliveredAt: rfc3339OrNull(d.DeliveredAt), InterruptedAt: rfc3339OrNull(d.InterruptedAt), Measured: d.Measured}
}

func rfc3339OrNull(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := httpx.RFC3339(*t)
	return &s
}

// Grants serves GET /v1/links/{id}/grants (GrantList).
func (h *Handler) Grants(w http.ResponseWriter, r *http.Request) {
	page, err := h.GrantList(r.Context(), mux.Vars(r)["id"], r.URL.Query())
	if err != nil {
		h.writeError(w, r, err, problem.NotFound)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, page)
}
