package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Webhook event types (SPEC §6). Each is written to the outbox in the
// transaction of the change it names.
const (
	EventLinkCreated   = "link.created"
	EventLinkRevoked   = "link.revoked"
	EventLinkExhausted = "link.exhausted"
	EventGrantCreated  = "grant.created"
	EventGrantRefunded = "grant.refunded"
	// EventGrantDelivered: the grant's client acknowledged every byte of
	// the version, once per grant.
	EventGrantDelivered = "grant.delivered"
	// EventGrantInterrupted: a stream response ended short (once per
	// attempt), or a session ended without full coverage (once).
	EventGrantInterrupted = "grant.interrupted"
	EventSessionCreated   = "session.created"
	EventObjectDeleted    = "object.deleted"
)

// Event is one webhook event, and its JSON form is the body a receiver
// gets: {"type", "timestamp", "data"}, the payload structure of the
// Standard Webhooks specification. It carries ids, the account, the client
// descriptor, counts and times, never a token or a token hash.
type Event struct {
	Type string `json:"type"`
	// Timestamp is when the change happened (the record's own stamp), not
	// when the event is delivered; RFC 3339 in UTC.
	Timestamp time.Time `json:"timestamp"`
	Data      EventData `json:"data"`
}

// EventData is what an event says. Which fields an event's JSON carries
// is decided by its type (eventFields), not by which are empty; an event
// of a type eventFields does not know carries the fields that have a
// value (the omitempty tags).
type EventData struct {
	LinkID    string `json:"link_id,omitempty"`
	GrantID   string `json:"grant_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	// AccountID is the link's account in link events, the verified caller
	// in grant events, the session's (its link's) in session.created;
	// null in the JSON when anonymous.
	AccountID string `json:"account_id,omitempty"`
	// Client is the client address and user agent as the grant records
	// them (GET /v1/links/{id}/grants shows the same).
	Client string `json:"client,omitempty"`
	Kind   string `json:"kind,omitempty"` // grant kind: stream or session
	// Downloads is the link's allowance (downloads at creation plus
	// top-ups); Remaining what is left after the change.
	Downloads *int   `json:"downloads,omitempty"`
	Remaining *int   `json:"remaining,omitempty"`
	Delivery  string `json:"delivery,omitempty"`
	Filename  string `json:"filename,omitempty"`
	// ExpiresAt is the link's expiry; in session.created the session's.
	ExpiresAt      *time.Time   `json:"expires_at,omitempty"`
	ByteBudget     int64        `json:"byte_budget,omitempty"`
	MaxConcurrency int          `json:"max_concurrency,omitempty"`
	Object         *EventObject `json:"object,omitempty"`
	// SHA256 is the hex SHA-256 of the link's object version in grant
	// events (SPEC §10); null when unknown.
	SHA256 string `json:"sha256,omitempty"`
	// Actor is the admin API key whose call caused the change (SPEC §6,
	// "Audit"); null when the gateway made it itself (the sweeper,
	// retention).
	Actor *EventActor `json:"actor,omitempty"`
	// Size, BytesAcked, Coverage, Attempts, Measured and DeliveredAt are
	// the grant's Delivery after the change, in grant.delivered and
	// grant.interrupted; Size is the object version's.
	Size        *int64     `json:"size,omitempty"`
	BytesAcked  *int64     `json:"bytes_acked,omitempty"`
	Coverage    *float64   `json:"coverage,omitempty"`
	Attempts    *int       `json:"attempts,omitempty"`
	Measured    *bool      `json:"measured,omitempty"`
	DeliveredAt *time.Time `json:"delivered_at,omitempty"`
	// Reason says why grant.interrupted: a stream response that ended
	// short, or the session's end (InterruptedEndedShort, …Expired, …Revoked,
	// …BudgetSpent).
	Reason string `json:"reason,omitempty"`
}

// EventActor names the key of an admin call in the events it causes, as
// its audit entry does.
type EventActor struct {
	KeyID   string `json:"key_id"`
	KeyName string `json:"key_name"`
}

// EventActorOf is a's key as events name it, nil for none.
func EventActorOf(a *Actor) *EventActor {
	if a == nil {
		return nil
	}
	return &EventActor{KeyID: a.KeyID, KeyName: a.KeyName}
}

// Reasons of grant.interrupted.
const (
	InterruptedEndedShort  = "ended_short"
	InterruptedExpired     = "expired"
	InterruptedRevoked     = "revoked"
	InterruptedBudgetSpent = "budget_spent"
)

// EventObjectOf is o as events name it.
func EventObjectOf(o Object) *EventObject {
	return &EventObject{Bucket: o.Bucket, Key: o.Key, VersionID: o.VersionID, Size: o.Size,
		ETag: o.ETag, ContentType: o.ContentType, SHA256: OrNull(o.SHA256)}
}

// EventObject names an object version in link events and object.deleted:
// Object's JSON form there.
type EventObject struct {
	Bucket      string `json:"bucket"`
	Key         string `json:"key"`
	VersionID   string `json:"version_id"`
	Size        int64  `json:"size"`
	ETag        string `json:"etag"`
	ContentType string `json:"content_type"`
	// SHA256 is the version's hex SHA-256, null when unknown.
	SHA256 *string `json:"sha256"`
}

// eventFields are the data fields of each event type, in the order and
// with the names docs/api.md ("Webhooks") documents them (a test holds
// the two together). Each is always present: one without a value is
// null, never left out (account_id of an anonymous link or caller,
// session_id of a stream grant), as the admin API writes them, so that a
// receiver can tell "anonymous" from "not sent".
var eventFields = map[string][]string{
	EventLinkCreated:      linkEventFields,
	EventLinkRevoked:      linkEventFields,
	EventGrantCreated:     grantEventFields,
	EventGrantRefunded:    grantEventFields,
	EventGrantDelivered:   append(slices.Clone(deliveryEventFields), "delivered_at"),
	EventGrantInterrupted: append(slices.Clone(deliveryEventFields), "reason"),
	EventSessionCreated:   {"link_id", "grant_id", "session_id", "account_id", "client", "expires_at", "byte_budget", "max_concurrency"},
	EventLinkExhausted:    {"link_id", "account_id", "downloads", "remaining", "expires_at"},
	EventObjectDeleted:    {"object", "actor"},
}

var (
	linkEventFields  = []string{"link_id", "account_id", "downloads", "remaining", "delivery", "filename", "expires_at", "object", "actor"}
	grantEventFields = []string{"link_id", "grant_id", "session_id", "account_id", "client", "kind", "downloads", "remaining", "expires_at", "sha256"}
	// deliveryEventFields begin grant.delivered and grant.interrupted.
	deliveryEventFields = []string{"link_id", "grant_id", "session_id", "account_id", "client", "kind", "size", "bytes_acked", "coverage", "attempts", "measured"}
)

// EventFields returns the data fields of events of type typ, nil for an
// unknown type.
func EventFields(typ string) []string { return eventFields[typ] }

// MarshalJSON writes e as a receiver gets it: {"type", "timestamp",
// "data"}, data with exactly the fields of e.Type (eventFields). An event
// of an unknown type keeps the fields that have a value.
func (e Event) MarshalJSON() ([]byte, error) {
	type plain Event // without this method
	fields, ok := eventFields[e.Type]
	if !ok {
		// EventData's own tags leave every empty field out.
		return json.Marshal(plain(e))
	}
	data := []byte{'{'}
	for i, name := range fields {
		v, err := e.Data.field(name)
		if err != nil {
			return nil, fmt.Errorf("ledger: event %s: %w", e.Type, err)
		}
		enc, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		if i > 0 {
			data = append(data, ',')
		}
		data = append(strconv.AppendQuote(data, name), ':')
		data = append(data, enc...)
	}
	data = append(data, '}')
	return json.Marshal(struct {
		Type      string          `json:"type"`
		Timestamp time.Time       `json:"timestamp"`
		Data      json.RawMessage `json:"data"`
	}{e.Type, e.Timestamp, data})
}

// field is the value of the data field name, nil for null.
func (d *EventData) field(name string) (any, error) {
	switch name {
	case "link_id":
		return d.LinkID, nil
	case "grant_id":
		return d.GrantID, nil
	case "session_id":
		return orNull(d.SessionID), nil
	case "account_id":
		return orNull(d.AccountID), nil
	case "client":
		return d.Client, nil
	case "kind":
		return d.Kind, nil
	case "downloads":
		return d.Downloads, nil
	case "remaining":
		return d.Remaining, nil
	case "delivery":
		return d.Delivery, nil
	case "filename":
		return d.Filename, nil
	case "expires_at":
		return d.ExpiresAt, nil
	case "byte_budget":
		return d.ByteBudget, nil
	case "max_concurrency":
		return d.MaxConcurrency, nil
	case "object":
		return d.Object, nil
	case "sha256":
		return orNull(d.SHA256), nil
	case "actor":
		return d.Actor, nil
	case "size":
		return d.Size, nil
	case "bytes_acked":
		return d.BytesAcked, nil
	case "coverage":
		return d.Coverage, nil
	case "attempts":
		return d.Attempts, nil
	case "measured":
		return d.Measured, nil
	case "delivered_at":
		return d.DeliveredAt, nil
	case "reason":
		return d.Reason, nil
	}
	return nil, fmt.Errorf("unknown data field %q", name)
}

// OrNull is s, or nil (JSON null) when s is empty.
func OrNull(s string) *string { return orNull(s) }

func orNull(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// OutboxEvent is an event as the outbox hands it to a deliverer.
type OutboxEvent struct {
	// Seq orders the outbox: events of one link have increasing Seq in
	// the order their transactions committed.
	Seq int64
	// ID is the webhook-id: the same on every delivery attempt, so a
	// receiver can drop a redelivery.
	ID     string
	Type   string
	LinkID string // "" when the event is about no link
	// Body is the JSON of the Event, exactly as it is signed and sent.
	Body      []byte
	CreatedAt time.Time
	// Attempts counts delivery attempts, the one this claim starts
	// included.
	Attempts int
}

// Outbox is the delivery side of the webhook outbox (SPEC §6): any number
// of processes claim due events, try to deliver them, and report back.
// Events of one link are handed out one at a time, in order: the next is
// not due while an earlier one is neither delivered nor dead.
type Outbox interface {
	// EventClaim leases up to limit due events to holder for lease, the
	// oldest first; an event whose lease lapses (its holder died) is due
	// again. Concurrent callers never get the same event under a live
	// lease. Errors: ErrUnavailable.
	EventClaim(ctx context.Context, holder string, limit int, lease time.Duration) ([]OutboxEvent, error)
	// EventMarkDelivered marks the event delivered. Errors: ErrNotFound when
	// holder no longer holds its lease.
	EventMarkDelivered(ctx context.Context, seq int64, holder string) error
	// EventMarkFailed records a failed attempt and makes the event due again
	// after retryIn. Errors: ErrNotFound when holder no longer holds its
	// lease.
	EventMarkFailed(ctx context.Context, seq int64, holder, reason string, retryIn time.Duration) error
	// EventExpire marks dead, at most limit, undelivered events created
	// maxAge or longer ago that no one is delivering, and returns how
	// many.
	EventExpire(ctx context.Context, maxAge time.Duration, limit int) (int, error)
	// EventPurge deletes, at most limit, delivered or dead events created
	// keep or longer ago, and returns how many.
	EventPurge(ctx context.Context, keep time.Duration, limit int) (int, error)
	// OutboxAge returns the age of the oldest undelivered event, 0 when
	// there is none.
	OutboxAge(ctx context.Context) (time.Duration, error)
}
