package gateway

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

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
	for name, vals := range v {
		switch {
		case !knownListParam(name):
			return q, fmt.Sprintf("Unknown query parameter %q; known: %s.", name, strings.Join(listParams, ", "))
		case len(vals) > 1:
			return q, name + " is given more than once."
		case vals[0] == "" && name != "cursor":
			return q, name + " must not be empty."
		}
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

func knownListParam(name string) bool {
	for _, p := range listParams {
		if p == name {
			return true
		}
	}
	return false
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// linkListItem is a link in the listing: GET /v1/links/{id}'s body
// without the token (SPEC §6). The outer Token, always nil, hides the
// embedded one from encoding/json.
type linkListItem struct {
	linkBody
	Token *string `json:"token,omitempty"`
}

func (s *Server) handleListLinks(w http.ResponseWriter, r *http.Request) {
	q, detail := parseListQuery(r.URL.Query())
	if detail != "" {
		writeProblem(w, r, probBadRequest, detail)
		return
	}
	page, err := s.Ledger.ListLinks(r.Context(), q)
	if errors.Is(err, ledger.ErrInvalid) {
		// Every other parameter was checked above: it is the cursor.
		writeProblem(w, r, probBadRequest, "cursor is not one this API returned; pass a previous page's next_cursor unchanged.")
		return
	}
	if err != nil {
		s.fail(w, r, err, probNotFound)
		return
	}
	out := struct {
		Links      []linkListItem `json:"links"`
		NextCursor string         `json:"next_cursor,omitempty"`
	}{Links: make([]linkListItem, 0, len(page.Links)), NextCursor: page.Next}
	for i := range page.Links {
		st := &page.Links[i]
		item := linkListItem{linkBody: s.linkBody(&st.Link)}
		item.Grants, item.ActiveSessions = &st.Grants, &st.ActiveSessions
		out.Links = append(out.Links, item)
	}
	writeJSON(w, http.StatusOK, out)
}

type allowanceChangeBody struct {
	Add       int    `json:"add"`
	Reason    string `json:"reason"`
	CreatedAt string `json:"created_at"`
}

func (s *Server) handleAllowanceChanges(w http.ResponseWriter, r *http.Request) {
	changes, err := s.Ledger.AllowanceChanges(r.Context(), mux.Vars(r)["id"])
	if err != nil {
		s.fail(w, r, err, probNotFound)
		return
	}
	out := struct {
		Changes []allowanceChangeBody `json:"changes"`
	}{Changes: make([]allowanceChangeBody, 0, len(changes))}
	for _, c := range changes {
		out.Changes = append(out.Changes, allowanceChangeBody{Add: c.Add, Reason: c.Reason, CreatedAt: rfc3339(c.CreatedAt)})
	}
	writeJSON(w, http.StatusOK, out)
}
