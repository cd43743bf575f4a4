package client

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// ListOptions selects the links GET /v1/links returns. Zero fields do not
// filter.
type ListOptions struct {
	Cursor    string // a previous page's NextCursor
	Limit     int    // 1 to 500; 0 for the server's default (100)
	Account   string
	ObjectKey string
	State     string // "active", "exhausted", "expired" or "revoked"
	// CreatedAfter and CreatedBefore are exclusive bounds.
	CreatedAfter  time.Time
	CreatedBefore time.Time
}

func (o ListOptions) query() string {
	q := url.Values{}
	set := func(k, v string) {
		if v != "" {
			q.Set(k, v)
		}
	}
	set("cursor", o.Cursor)
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	set("account", o.Account)
	set("object_key", o.ObjectKey)
	set("state", o.State)
	if !o.CreatedAfter.IsZero() {
		q.Set("created_after", o.CreatedAfter.UTC().Format(time.RFC3339Nano))
	}
	if !o.CreatedBefore.IsZero() {
		q.Set("created_before", o.CreatedBefore.UTC().Format(time.RFC3339Nano))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// LinkPage is one page of GET /v1/links. Each link's Raw holds its JSON
// as the server sent it; Token is always empty (the listing omits it).
type LinkPage struct {
	Links      []Link
	NextCursor string // "" on the last page
}

// ListLinks returns one page of links, newest first (GET /v1/links).
func (c *Client) ListLinks(ctx context.Context, o ListOptions) (LinkPage, error) {
	var raw struct {
		Links      []json.RawMessage `json:"links"`
		NextCursor string            `json:"next_cursor"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/links"+o.query(), nil, &raw, nil); err != nil {
		return LinkPage{}, err
	}
	page := LinkPage{Links: make([]Link, 0, len(raw.Links)), NextCursor: raw.NextCursor}
	for _, r := range raw.Links {
		var l Link
		if err := json.Unmarshal(r, &l); err != nil {
			return LinkPage{}, err
		}
		l.Raw = r
		page.Links = append(page.Links, l)
	}
	return page, nil
}

// Grant is one entry of a link's audit trail.
type Grant struct {
	ID         string     `json:"id"`
	Kind       string     `json:"kind"`   // "stream" or "session"
	Status     string     `json:"status"` // "granted" or "refunded"
	AccountID  string     `json:"account_id"`
	SessionID  string     `json:"session_id"`
	Client     string     `json:"client"`
	CreatedAt  time.Time  `json:"created_at"`
	RefundedAt *time.Time `json:"refunded_at"`
	// AffinityReuses counts the requests sent to the grant's session
	// instead of claiming again.
	AffinityReuses int64 `json:"affinity_reuses"`
	// Delivery is what the grant's client acknowledged.
	Delivery Delivery `json:"delivery"`

	// Raw is the grant as received.
	Raw json.RawMessage `json:"-"`
}

// Delivery is what a grant's client acknowledged (SPEC §1): the body
// bytes its TCP stack acknowledged, for a session over all its requests.
type Delivery struct {
	// Status is "complete" (every byte of the version acknowledged at
	// least once), "partial" or "none".
	Status string `json:"status"`
	// BytesAcked counts the version's bytes acknowledged at least once;
	// Coverage is that share of the size, 0 to 1 (1 only when complete).
	BytesAcked int64   `json:"bytes_acked"`
	Coverage   float64 `json:"coverage"`
	// Attempts counts the downloads served under the grant: the first,
	// then each retry of an interrupted stream download.
	Attempts      int        `json:"attempts"`
	DeliveredAt   *time.Time `json:"delivered_at"`
	InterruptedAt *time.Time `json:"interrupted_at"`
	// Measured is false when a number is only what the gateway wrote
	// (HTTP/2, no TCP counters): an upper bound of what the client got.
	Measured bool `json:"measured"`
}

// GrantOptions selects the grants GET /v1/links/{id}/grants returns.
type GrantOptions struct {
	Cursor string // a previous page's NextCursor
	Limit  int    // 1 to 500; 0 for the server's default (100)
	// Delivery keeps the grants of one delivery status: "none",
	// "partial" or "complete"; "" keeps all.
	Delivery string
}

// GrantPage is one page of GET /v1/links/{id}/grants.
type GrantPage struct {
	Grants     []Grant
	NextCursor string // "" on the last page
}

// Grants returns one page of a link's grants, newest first, each with
// its delivery (GET /v1/links/{id}/grants).
func (c *Client) Grants(ctx context.Context, id string, o GrantOptions) (GrantPage, error) {
	p, err := linkPath(id, "/grants")
	if err != nil {
		return GrantPage{}, err
	}
	q := url.Values{}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	if o.Limit != 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Delivery != "" {
		q.Set("delivery", o.Delivery)
	}
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	var raw struct {
		Grants     []json.RawMessage `json:"grants"`
		NextCursor string            `json:"next_cursor"`
	}
	if err := c.do(ctx, http.MethodGet, p, nil, &raw, nil); err != nil {
		return GrantPage{}, err
	}
	page := GrantPage{Grants: make([]Grant, 0, len(raw.Grants)), NextCursor: raw.NextCursor}
	for _, r := range raw.Grants {
		var g Grant
		if err := json.Unmarshal(r, &g); err != nil {
			return GrantPage{}, err
		}
		g.Raw = r
		page.Grants = append(page.Grants, g)
	}
	return page, nil
}

// AllowanceChange is one audited top-up of a link.
type AllowanceChange struct {
	Add       int       `json:"add"`
	Reason    string    `json:"reason"`
	CreatedAt time.Time `json:"created_at"`
}

// AllowanceChanges returns a link's audited top-ups, newest first (GET
// /v1/links/{id}/allowance).
func (c *Client) AllowanceChanges(ctx context.Context, id string) ([]AllowanceChange, error) {
	p, err := linkPath(id, "/allowance")
	if err != nil {
		return nil, err
	}
	var out struct {
		Changes []AllowanceChange `json:"changes"`
	}
	err = c.do(ctx, http.MethodGet, p, nil, &out, nil)
	return out.Changes, err
}
