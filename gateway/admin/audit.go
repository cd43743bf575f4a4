package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/ledger"
)

// Audit serves the audit trail of the operators' changes (SPEC §6).
type Audit struct {
	ledger ledger.Audit
	log    *slog.Logger
}

// auditParams are the query parameters of GET /v1/audit (SPEC §6).
var auditParams = []string{"actor", "action", "target_id", "after", "before", "cursor", "limit"}

// AuditEntryBody is an entry as GET /v1/audit shows it.
type AuditEntryBody struct {
	ID    string `json:"id"`
	At    string `json:"at"`
	Actor struct {
		KeyID   string `json:"key_id"`
		KeyName string `json:"key_name"`
	} `json:"actor"`
	Action string `json:"action"`
	Target struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	} `json:"target"`
	RequestID *string         `json:"request_id"`
	Details   json.RawMessage `json:"details"`
}

// parseAuditQuery reads GET /v1/audit's query into a ledger query, or
// returns the one-line detail of a 400. The cursor is checked by the
// ledger, which alone knows its format.
func parseAuditQuery(v url.Values) (ledger.AuditQuery, string) {
	var q ledger.AuditQuery
	cursor, limit, detail := parsePage(v, auditParams)
	if detail != "" {
		return q, detail
	}
	q.Cursor, q.Limit = cursor, limit
	q.ActorKeyID = v.Get("actor")
	if len(q.ActorKeyID) > 36 || strings.ContainsFunc(q.ActorKeyID, func(r rune) bool { return r <= ' ' || r > '~' }) {
		return q, `actor must be a key id (a UUID, or "bootstrap" for the admin token).`
	}
	q.Action = v.Get("action")
	if q.Action != "" && !slices.Contains(ledger.Actions(), q.Action) {
		return q, "action must be one of " + strings.Join(ledger.Actions(), ", ") + "."
	}
	q.TargetID = v.Get("target_id")
	if len(q.TargetID) > 1024 {
		return q, "target_id must be at most 1024 bytes (an object key's length)."
	}
	_, detail = parseTimes(v, timeParam{"after", &q.After}, timeParam{"before", &q.Before})
	return q, detail
}

// AuditPageBody is the answer of GET /v1/audit.
type AuditPageBody struct {
	Entries    []AuditEntryBody `json:"entries"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

// ListAudit serves GET /v1/audit (AuditList).
func (h *Audit) ListAudit(w http.ResponseWriter, r *http.Request) {
	writeOK(h.log, w, r)(h.AuditList(r.Context(), r.URL.Query()))
}

// AuditList returns a page of the audit trail newest first; q is GET
// /v1/audit's query (actor, action, target_id, after, before, cursor,
// limit). Errors: *Refusal (400), the ledger's.
func (h *Audit) AuditList(ctx context.Context, v url.Values) (AuditPageBody, error) {
	q, detail := parseAuditQuery(v)
	if detail != "" {
		return AuditPageBody{}, badRequest("", detail)
	}
	page, err := h.ledger.AuditList(ctx, q)
	if err != nil {
		return AuditPageBody{}, pageErr(err)
	}
	out := AuditPageBody{Entries: make([]AuditEntryBody, 0, len(page.Entries)), NextCursor: page.Next}
	for _, e := range page.Entries {
		b := AuditEntryBody{ID: e.ID, At: httpx.RFC3339(e.At), Action: e.Action, Details: e.Details}
		b.Actor.KeyID, b.Actor.KeyName = e.Actor.KeyID, e.Actor.KeyName
		b.Target.Type, b.Target.ID = e.Target.Type, e.Target.ID
		if e.Actor.RequestID != "" {
			b.RequestID = &e.Actor.RequestID
		}
		if len(b.Details) == 0 {
			b.Details = json.RawMessage("{}")
		}
		out.Entries = append(out.Entries, b)
	}
	return out, nil
}
