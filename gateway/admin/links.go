package admin

import (
	"errors"
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
// returns the one-line detail of a 400. The cursor is checked by the
// ledger, which alone knows its format.
func parseListQuery(v url.Values) (ledger.ListQuery, string) {
	var q ledger.ListQuery
	if d := checkParams(v, listParams); d != "" {
		return q, d
	}
	q.Cursor = v.Get("cursor")
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > ledger.MaxListLimit {
			return q, fmt.Sprintf("limit must be a whole number between 1 and %d.", ledger.MaxListLimit)
		}
		q.Limit = n
	}
	q.AccountID = v.Get("account")
	if len(q.AccountID) > 255 || strings.ContainsFunc(q.AccountID, isControl) {
		return q, "account must be at most 255 bytes (of UTF-8, not characters) without control characters."
	}
	q.ObjectKey = v.Get("object_key")
	if len(q.ObjectKey) > 1024 {
		return q, "object_key must be at most 1024 bytes."
	}
	if s := v.Get("state"); s != "" {
		st, err := ledger.ParseLinkState(s)
		if err != nil {
			return q, "state must be one of active, exhausted, expired, revoked."
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
				return q, b.name + " must be an RFC 3339 time, like 2030-01-02T03:04:05Z."
			}
			*b.t = t
		}
	}
	return q, ""
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// linkListItem is a link in the listing: GET /v1/links/{id}'s body
// without the token (SPEC §6). The outer Token, always nil, hides the
// embedded one from encoding/json.
type linkListItem struct {
	linkBody
	Token *string `json:"token,omitempty"`
}

// ListLinks serves GET /v1/links: a cursor page of links, newest first, filtered.
func (h *Handler) ListLinks(w http.ResponseWriter, r *http.Request) {
	q, detail := parseListQuery(r.URL.Query())
	if detail != "" {
		problem.Write(w, r, problem.BadRequest, detail)
		return
	}
	page, err := h.Admin.LinkList(r.Context(), q)
	if errors.Is(err, ledger.ErrInvalid) {
		// Every other parameter was checked above: it is the cursor.
		problem.Write(w, r, problem.BadRequest, badCursor)
		return
	}
	if err != nil {
		problem.Fail(h.Log, w, r, err, problem.NotFound)
		return
	}
	out := struct {
		Links      []linkListItem `json:"links"`
		NextCursor string         `json:"next_cursor,omitempty"`
	}{Links: make([]linkListItem, 0, len(page.Links)), NextCursor: page.Next}
	for i := range page.Links {
		st := &page.Links[i]
		item := linkListItem{linkBody: h.linkBody(&st.Link)}
		item.Grants, item.Deliveries, item.ActiveSessions = &st.Grants, &st.Deliveries, &st.ActiveSessions
		out.Links = append(out.Links, item)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
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

// ShowLink serves GET /v1/links/{id}: the link with its counts.
func (h *Handler) ShowLink(w http.ResponseWriter, r *http.Request) {
	h.showLink(w, r, http.StatusOK)
}

func (h *Handler) showLink(w http.ResponseWriter, r *http.Request, status int) {
	st, err := h.Admin.LinkGet(r.Context(), mux.Vars(r)["id"])
	if err != nil {
		problem.Fail(h.Log, w, r, err, problem.NotFound)
		return
	}
	b := h.linkBody(&st.Link)
	b.Grants, b.Deliveries, b.ActiveSessions = &st.Grants, &st.Deliveries, &st.ActiveSessions
	httpx.WriteJSON(w, status, b)
}

// RevokeLink serves POST /v1/links/{id}/revoke; idempotent, and it ends the link's sessions.
func (h *Handler) RevokeLink(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	if err := h.Admin.LinkRevoke(r.Context(), id); err != nil {
		problem.Fail(h.Log, w, r, err, problem.NotFound)
		return
	}
	h.Log.InfoContext(r.Context(), "link revoked", "link_id", id)
	// Its sessions die at once on this process; elsewhere within WarmRowTTL.
	h.Warm.ForgetLink(id)
	h.showLink(w, r, http.StatusOK)
}

// AddAllowance serves POST /v1/links/{id}/allowance: a top-up with its reason.
func (h *Handler) AddAllowance(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Add    int    `json:"add"`
		Reason string `json:"reason"`
	}
	if !decodeJSON(w, r, &req) {
		return
	}
	if req.Add < 1 || req.Add > maxDownloads || len(req.Reason) > 1024 {
		problem.Write(w, r, problem.BadRequest, fmt.Sprintf("add must be between 1 and %d; reason at most 1024 bytes.", maxDownloads))
		return
	}
	id := mux.Vars(r)["id"]
	if err := h.Admin.AllowanceAdd(r.Context(), id, req.Add, req.Reason); err != nil {
		problem.Fail(h.Log, w, r, err, problem.NotFound)
		return
	}
	h.Log.InfoContext(r.Context(), "allowance added", "link_id", id, "added", req.Add)
	h.showLink(w, r, http.StatusOK)
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

// Grants serves GET /v1/links/{id}/grants: the link's grants, newest
// first, paginated, each with its delivery; ?delivery= keeps the grants
// of one delivery status (SPEC §6).
func (h *Handler) Grants(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			problem.Write(w, r, problem.BadRequest, "limit must be between 1 and 500.")
			return
		}
		limit = n
	}
	var delivery ledger.DeliveryStatus
	if v, present := q["delivery"]; present {
		d, err := ledger.ParseDeliveryStatus(q.Get("delivery"))
		if err != nil || len(v) > 1 {
			problem.Write(w, r, problem.BadRequest, "delivery must be one of none, partial, complete, given once.")
			return
		}
		delivery = d
	}
	p, err := h.Admin.GrantList(r.Context(), ledger.GrantQuery{LinkID: mux.Vars(r)["id"], Cursor: q.Get("cursor"), Limit: limit, Delivery: delivery})
	if err != nil {
		problem.Fail(h.Log, w, r, err, problem.NotFound)
		return
	}
	out := struct {
		Grants     []grantBody `json:"grants"`
		NextCursor string      `json:"next_cursor,omitempty"`
	}{Grants: []grantBody{}, NextCursor: p.Next}
	for _, g := range p.Grants {
		b := grantBody{ID: g.ID, Kind: g.Kind, Status: g.Status, Client: g.Client, CreatedAt: httpx.RFC3339(g.CreatedAt),
			AffinityReuses: g.AffinityReuses, Delivery: deliveryOf(g.Delivery), RefundedAt: rfc3339OrNull(g.RefundedAt)}
		if g.AccountID != "" {
			b.AccountID = &g.AccountID
		}
		if g.SessionID != "" {
			b.SessionID = &g.SessionID
		}
		out.Grants = append(out.Grants, b)
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}
