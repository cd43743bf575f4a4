package client

import (
	"encoding/json"
	"time"
)

// ObjectRef names the object a link is created for (SPEC §6). Without
// VersionID the gateway pins the current version.
type ObjectRef struct {
	Key       string `json:"key"`
	Bucket    string `json:"bucket,omitempty"`
	VersionID string `json:"version_id,omitempty"`
}

// SessionSettings overrides the gateway's transfer session defaults for one
// link (SPEC §4). Zero fields are left to the gateway.
type SessionSettings struct {
	TTL            int64 `json:"ttl,omitempty"` // seconds
	ByteBudget     int64 `json:"byte_budget,omitempty"`
	MaxConcurrency int   `json:"max_concurrency,omitempty"`
}

// CreateLinkRequest is the body of POST /v1/links. Set one of ExpiresIn and
// ExpiresAt.
type CreateLinkRequest struct {
	Object    ObjectRef        `json:"object"`
	Downloads int              `json:"downloads"`
	ExpiresIn int64            `json:"expires_in,omitempty"` // seconds
	ExpiresAt time.Time        `json:"expires_at,omitzero"`
	AccountID string           `json:"account_id,omitempty"`
	Filename  string           `json:"filename,omitempty"`
	Delivery  string           `json:"delivery,omitempty"` // "stream" or "session"
	Confirm   bool             `json:"confirm,omitempty"`
	Session   *SessionSettings `json:"session,omitempty"`
	// Retries lets the client of an interrupted stream download fetch it
	// again, whole, under the same grant, up to this many times (0 to 10).
	Retries int `json:"retries,omitempty"`

	// IdempotencyKey is sent as the Idempotency-Key header, so that a retry
	// returns the same link instead of creating a second one.
	IdempotencyKey string `json:"-"`
}

// LinkObject is the object version a link is pinned to.
type LinkObject struct {
	Bucket      string `json:"bucket"`
	Key         string `json:"key"`
	VersionID   string `json:"version_id"`
	Size        int64  `json:"size"`
	ETag        string `json:"etag"`
	ContentType string `json:"content_type"`
	// SHA256 is the version's hex SHA-256, "" when the gateway does not
	// know it (SPEC §10); downloads carry it as Repr-Digest and Digest.
	SHA256 string `json:"sha256"`
}

// Link is the admin API's view of a link. RevokedAt, Grants, Deliveries
// and ActiveSessions come with GET /v1/links/{id}.
type Link struct {
	ID        string           `json:"id"`
	URL       string           `json:"url"`
	NamedURL  string           `json:"named_url"` // URL + "/" + the escaped file name (SPEC §3)
	Token     string           `json:"token"`
	Downloads int              `json:"downloads"`
	Remaining int              `json:"remaining"`
	ExpiresAt time.Time        `json:"expires_at"`
	CreatedAt time.Time        `json:"created_at"`
	Delivery  string           `json:"delivery"`
	Retries   int              `json:"retries"`
	AccountID string           `json:"account_id"`
	Filename  string           `json:"filename"`
	Object    LinkObject       `json:"object"`
	Session   *SessionSettings `json:"session"`
	RevokedAt *time.Time       `json:"revoked_at"`
	Grants    map[string]int   `json:"grants"` // count by grant status
	// Deliveries counts the grants by delivery status: "none",
	// "partial", "complete".
	Deliveries     map[string]int `json:"deliveries"`
	ActiveSessions int            `json:"active_sessions"`

	// Raw is the answer as received, including fields this client does not
	// know, for printing it whole.
	Raw json.RawMessage `json:"-"`
}

// Object is the answer to an upload (PUT /v1/objects/{key}).
type Object struct {
	Bucket    string `json:"bucket"`
	Key       string `json:"key"`
	VersionID string `json:"version_id"`
	Size      int64  `json:"size"`
	ETag      string `json:"etag"`
	// SHA256 is the hex SHA-256 the gateway computed while storing it.
	SHA256 string `json:"sha256"`
}

// allowanceRequest is the body of POST /v1/links/{id}/allowance.
type allowanceRequest struct {
	Add    int    `json:"add"`
	Reason string `json:"reason,omitempty"`
}
