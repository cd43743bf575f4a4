package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// AuditOptions selects the entries GET /v1/audit returns. Zero fields do
// not filter.
type AuditOptions struct {
	Cursor   string // a previous page's NextCursor
	Limit    int    // 1 to 500; 0 for the server's default (100)
	Actor    string // a key id, or "bootstrap" for the admin token
	Action   string // "link.created", "key.revoked", …
	TargetID string // a link's, session's or key's id, or an object's key
	// After and Before are exclusive bounds on the entry's time.
	After  time.Time
	Before time.Time
}

func (o AuditOptions) query() string {
	q := new(query).page(o.Cursor, o.Limit).str("actor", o.Actor).str("action", o.Action).str("target_id", o.TargetID)
	return q.time("after", o.After).time("before", o.Before).String()
}

// AuditEntry is one change made through the admin API.
type AuditEntry struct {
	ID    string    `json:"id"`
	At    time.Time `json:"at"`
	Actor struct {
		KeyID   string `json:"key_id"`
		KeyName string `json:"key_name"`
	} `json:"actor"`
	Action string `json:"action"`
	Target struct {
		Type string `json:"type"` // "link", "object", "session" or "key"
		ID   string `json:"id"`
	} `json:"target"`
	RequestID string          `json:"request_id"`
	Details   json.RawMessage `json:"details"`

	// Raw is the entry as received.
	Raw json.RawMessage `json:"-"`
}

// AuditPage is one page of GET /v1/audit.
type AuditPage struct {
	Entries    []AuditEntry
	NextCursor string // "" on the last page
}

// Audit returns one page of the audit trail, newest first (GET
// /v1/audit).
func (c *Client) Audit(ctx context.Context, o AuditOptions) (AuditPage, error) {
	var raw struct {
		Entries    []json.RawMessage `json:"entries"`
		NextCursor string            `json:"next_cursor"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/audit"+o.query(), nil, &raw, nil); err != nil {
		return AuditPage{}, err
	}
	page := AuditPage{Entries: make([]AuditEntry, 0, len(raw.Entries)), NextCursor: raw.NextCursor}
	for _, r := range raw.Entries {
		var e AuditEntry
		if err := json.Unmarshal(r, &e); err != nil {
			return AuditPage{}, err
		}
		e.Raw = r
		page.Entries = append(page.Entries, e)
	}
	return page, nil
}
