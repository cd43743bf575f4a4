package admin

import (
	"time"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/ledger"
)

// What the admin API answers about links: a link, a link in the listing,
// a grant with its delivery, an allowance change.

// linkBody is a link as the admin API shows it.
type linkBody struct {
	ID        string          `json:"id"`
	URL       string          `json:"url"`
	NamedURL  string          `json:"named_url"`
	Token     string          `json:"token"`
	Downloads int             `json:"downloads"`
	Remaining int             `json:"remaining"`
	ExpiresAt string          `json:"expires_at"`
	RevokedAt *string         `json:"revoked_at"`
	CreatedAt string          `json:"created_at"`
	Delivery  string          `json:"delivery"`
	Confirm   bool            `json:"confirm"`
	Retries   int             `json:"retries"`
	AccountID *string         `json:"account_id"`
	Filename  string          `json:"filename"`
	Object    httpx.Object    `json:"object"`
	Session   sessionRequest  `json:"session"`
	Grants    *map[string]int `json:"grants,omitempty"`
	// Deliveries counts the grants by delivery status (SPEC §1): none,
	// partial, complete.
	Deliveries     *map[ledger.DeliveryStatus]int `json:"deliveries,omitempty"`
	ActiveSessions *int                           `json:"active_sessions,omitempty"`
}

// linkListItem is a link in the listing: GET /v1/links/{id}'s body
// without the token (SPEC §6). The outer Token, always nil, hides the
// embedded one from encoding/json.
type linkListItem struct {
	linkBody
	Token *string `json:"token,omitempty"`
}

// allowanceChangeBody is a top-up as GET /v1/links/{id}/allowance shows it.
type allowanceChangeBody struct {
	Add       int    `json:"add"`
	Reason    string `json:"reason"`
	CreatedAt string `json:"created_at"`
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
