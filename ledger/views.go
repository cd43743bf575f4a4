package ledger

import (
	"context"
	"time"
)

// Views are the reads the operator console (SPEC §11) shows beside what
// the admin API answers: a link's live sessions with the slots they hold,
// its webhook events with their delivery, and the versions the gateway
// stored with the links that pin each. They only read; every change the
// console makes goes through the admin API's own calls.
type Views interface {
	// SessionListByLink returns the link's live sessions (not revoked,
	// not ended, not expired by the database's clock, the link not
	// revoked), newest first, at most limit (1 to MaxListLimit; 0 means
	// DefaultListLimit), each with the concurrency slots whose lease has
	// not lapsed. Errors: ErrInvalid (limit), ErrUnavailable.
	SessionListByLink(ctx context.Context, linkID string, limit int) ([]SessionUse, error)
	// EventListByLink returns the link's webhook events in the outbox,
	// newest first (by the link's own sequence, the order they are
	// delivered in), at most limit (as SessionListByLink's), with where
	// each delivery stands. Delivered and dead events stay until the
	// outbox purges them. Errors: ErrInvalid (limit), ErrUnavailable.
	EventListByLink(ctx context.Context, linkID string, limit int) ([]EventRecord, error)
	// ObjectList returns one page of the versions the gateway stored,
	// newest first (stored_at, then the version's hash, descending),
	// all or those of q.State, each with the links that pin it: one
	// index range scan per page, plus one statement for the links of the
	// whole page. Errors: ErrInvalid (bad cursor, limit or state),
	// ErrUnavailable.
	ObjectList(ctx context.Context, q ObjectQuery) (ObjectPage, error)
}

// SessionUse is a live session and what it holds now.
type SessionUse struct {
	Session
	// SlotsInUse counts its concurrency slots leased and not lapsed at
	// the database's now: the requests streaming it (and, briefly, the
	// slots a process keeps for the next one).
	SlotsInUse int
}

// Outbox event statuses.
const (
	EventPending   = "pending"
	EventDelivered = "delivered"
	EventDead      = "dead"
)

// EventRecord is a webhook event as the outbox keeps it, with its
// delivery: pending (not yet delivered, maybe retrying), delivered, or
// dead (given up after GATEWAY_WEBHOOK_MAX_AGE).
type EventRecord struct {
	Seq  int64
	ID   string // the webhook-id
	Type string
	// Status is EventPending, EventDelivered or EventDead.
	Status string
	// Attempts counts delivery attempts so far.
	Attempts  int
	CreatedAt time.Time
	// NextAttemptAt is when a pending event is tried next (or its
	// lease ends, while a deliverer holds it).
	NextAttemptAt time.Time
	// FinishedAt is when it was delivered or given up, nil while pending.
	FinishedAt *time.Time
	// LastError says why the last attempt failed, "" when none did. It
	// is the deliverer's own text (a status code, a timeout), never a
	// secret.
	LastError string
}

// ObjectQuery selects a page of stored object versions.
type ObjectQuery struct {
	// Cursor is the Next of the previous page, "" for the first page.
	Cursor string
	// Limit is the page size, 1 to MaxListLimit; 0 means DefaultListLimit.
	Limit int
	// State keeps the versions in that state; "" keeps all.
	State ObjectState
	// Bucket, Key and VersionID, when Key is set, select the one version
	// they name (by its primary key), in whatever state.
	Bucket, Key, VersionID string
}

// MaxObjectLinks is how many of a version's pinning links ObjectList
// names, newest first; ObjectListing counts them all.
const MaxObjectLinks = 10

// ObjectListing is a stored version with the links that pin it.
type ObjectListing struct {
	StoredObject
	// Links are the newest of its links, at most MaxObjectLinks, each as
	// it stands at the database's now.
	Links []ObjectLink
	// LinkCount counts every link pinning it; LiveLinks those that are
	// live or have a live session: what DeletionBegin with force would
	// revoke.
	LinkCount int
	LiveLinks int
}

// ObjectLink is a link as the objects listing names it.
type ObjectLink struct {
	ID        string
	State     LinkState
	CreatedAt time.Time
	// LiveSessions counts its live sessions.
	LiveSessions int
}

// Live reports whether deleting the version with force would revoke the
// link: it is active, or a session of it still lives.
func (l ObjectLink) Live() bool { return l.State == StateActive || l.LiveSessions > 0 }

// ObjectPage is a cursor page of stored versions.
type ObjectPage struct {
	Objects []ObjectListing
	Next    string // cursor for the next page, "" at the end
}

// ParseObjectState returns the state named s. Errors: ErrInvalid.
func ParseObjectState(s string) (ObjectState, error) {
	switch st := ObjectState(s); st {
	case ObjectStored, ObjectDeleting, ObjectDeleted:
		return st, nil
	}
	return "", ErrInvalid
}
