package client

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"
)

// CreateKeyRequest is the body of POST /v1/keys (SPEC §6).
type CreateKeyRequest struct {
	Name   string   `json:"name"`
	Scopes []string `json:"scopes"`
	// ExpiresIn is the key's lifetime in seconds; 0 for a key that lasts
	// until revoked.
	ExpiresIn int64 `json:"expires_in,omitempty"`
}

// Key is an operator's API key as the admin API shows it: never its text
// but in the answer that created it (CreatedKey).
type Key struct {
	ID         string     `json:"id"`
	Name       string     `json:"name"`
	Scopes     []string   `json:"scopes"`
	CreatedAt  time.Time  `json:"created_at"`
	ExpiresAt  *time.Time `json:"expires_at"`
	RevokedAt  *time.Time `json:"revoked_at"`
	LastUsedAt *time.Time `json:"last_used_at"` // moved at most once a minute

	// Raw is the key as received.
	Raw json.RawMessage `json:"-"`
}

// CreatedKey is the answer of POST /v1/keys.
type CreatedKey struct {
	Key
	// Secret is the key's text ("dlk_…"), shown in this answer only: the
	// gateway keeps its SHA-256.
	Secret string `json:"key"`
}

// KeyPage is one page of GET /v1/keys.
type KeyPage struct {
	Keys       []Key
	NextCursor string // "" on the last page
}

// CreateKey makes a key with the scopes asked for (POST /v1/keys). A key
// can only give scopes it holds itself: asking for more is an *Error with
// Status 403 naming the scope (Error.Scope).
func (c *Client) CreateKey(ctx context.Context, r CreateKeyRequest) (CreatedKey, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return CreatedKey{}, err
	}
	var k CreatedKey
	err = c.do(ctx, http.MethodPost, "/v1/keys", func(req *http.Request) { setJSON(req, body) }, &k, &k.Raw)
	return k, err
}

// ListKeys returns one page of keys, newest first, revoked and expired
// ones included (GET /v1/keys). A zero limit is the server's default.
func (c *Client) ListKeys(ctx context.Context, cursor string, limit int) (KeyPage, error) {
	p := "/v1/keys" + new(query).page(cursor, limit).String()
	var raw struct {
		Keys       []json.RawMessage `json:"keys"`
		NextCursor string            `json:"next_cursor"`
	}
	if err := c.do(ctx, http.MethodGet, p, nil, &raw, nil); err != nil {
		return KeyPage{}, err
	}
	page := KeyPage{Keys: make([]Key, 0, len(raw.Keys)), NextCursor: raw.NextCursor}
	for _, r := range raw.Keys {
		var k Key
		if err := json.Unmarshal(r, &k); err != nil {
			return KeyPage{}, err
		}
		k.Raw = r
		page.Keys = append(page.Keys, k)
	}
	return page, nil
}

// RevokeKey revokes a key (DELETE /v1/keys/{id}): every gateway process
// refuses it within a second. Revoking a revoked key succeeds; an unknown
// id is an *Error with Status 404.
func (c *Client) RevokeKey(ctx context.Context, id string) error {
	if id == "" {
		return errors.New("missing key id")
	}
	var none struct{}
	return c.do(ctx, http.MethodDelete, "/v1/keys/"+url.PathEscape(id), nil, &none, nil)
}
