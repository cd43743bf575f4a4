package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"
)

// Actor is who made a change through the admin API: the key that
// authenticated the request (KeyID BootstrapKeyID for the admin token) and
// the request's id. It reaches the ledger through the context
// (WithActor); a change made with one writes an audit entry in its own
// transaction, and the webhook events of that change carry it. Changes the
// gateway makes itself (the sweeper, retention) have none and write no
// entry.
type Actor struct {
	KeyID   string
	KeyName string
	// RequestID is the admin request's id (X-Request-Id), "" when none.
	RequestID string
}

// Bootstrap is the actor of a request authenticated by the bootstrap
// admin token.
func Bootstrap(requestID string) Actor {
	return Actor{KeyID: BootstrapKeyID, KeyName: BootstrapKeyID, RequestID: requestID}
}

// Validate checks what an audit entry can record. Errors: ErrInvalid.
func (a Actor) Validate() error {
	switch {
	case a.KeyID == "" || len(a.KeyID) > 36 || !visibleASCII(a.KeyID):
		return fmt.Errorf("%w: an actor needs a key id of at most 36 visible ASCII characters", ErrInvalid)
	case !utf8.ValidString(a.KeyName) || utf8.RuneCountInString(a.KeyName) > MaxKeyName:
		return fmt.Errorf("%w: the actor's key name is at most %d characters", ErrInvalid, MaxKeyName)
	case len(a.RequestID) > 64 || !visibleASCII(a.RequestID):
		return fmt.Errorf("%w: a request id is at most 64 visible ASCII characters", ErrInvalid)
	}
	return nil
}

func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}

type actorKey struct{}

// WithActor returns ctx carrying a: the ledger's changes made with it are
// audited as a's.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorOf returns the actor ctx carries, and false when it carries none.
func ActorOf(ctx context.Context) (Actor, bool) {
	a, ok := ctx.Value(actorKey{}).(Actor)
	return a, ok
}

// Audit actions (SPEC §6): one entry per change made through the admin
// API.
const (
	ActionLinkCreated        = "link.created"
	ActionLinkRevoked        = "link.revoked"
	ActionLinkAllowanceAdded = "link.allowance_added"
	ActionObjectStored       = "object.stored"
	ActionObjectDeleted      = "object.deleted"
	ActionSessionRevoked     = "session.revoked"
	ActionKeyCreated         = "key.created"
	ActionKeyRevoked         = "key.revoked"
)

// Actions lists every audit action.
func Actions() []string {
	return []string{ActionLinkCreated, ActionLinkRevoked, ActionLinkAllowanceAdded, ActionObjectStored,
		ActionObjectDeleted, ActionSessionRevoked, ActionKeyCreated, ActionKeyRevoked}
}

// Target types of audit entries. A link's, session's or key's id is its
// UUID; an object's is its key (the bucket and version are in the
// entry's details).
const (
	TargetLink    = "link"
	TargetObject  = "object"
	TargetSession = "session"
	TargetKey     = "key"
)

// AuditTarget is what an entry's change was made to.
type AuditTarget struct {
	Type string
	ID   string
}

// AuditEntry is one audited change.
type AuditEntry struct {
	ID     string
	At     time.Time
	Actor  Actor
	Action string
	Target AuditTarget
	// Details is a JSON object saying what changed (the allowance added
	// and its reason, the object's bucket, key and version, a link's
	// downloads and expiry, a key's name and scopes). It never holds a
	// secret.
	Details json.RawMessage
}

// AuditQuery selects a page of audit entries. Zero fields do not filter.
type AuditQuery struct {
	// Cursor is the Next of the previous page, "" for the first page.
	Cursor string
	// Limit is the page size, 1 to MaxListLimit; 0 means DefaultListLimit.
	Limit int
	// ActorKeyID is the key id of the actor (BootstrapKeyID for the
	// admin token).
	ActorKeyID string
	Action     string // one of Actions()
	TargetID   string
	// After and Before are exclusive bounds on At.
	After  time.Time
	Before time.Time
}

// AuditPage is a cursor page of audit entries, newest first.
type AuditPage struct {
	Entries []AuditEntry
	Next    string // cursor for the next page, "" at the end
}

// Audit reads the audit trail (GET /v1/audit). Entries are written by the
// changes themselves, and purged with the links by LinkPurge once older
// than the audit retention.
type Audit interface {
	// AuditList returns one page of entries newest first (At, then id,
	// descending); a filtered page is one index range scan. Errors:
	// ErrInvalid (bad cursor, limit or action), ErrUnavailable.
	AuditList(ctx context.Context, q AuditQuery) (AuditPage, error)
}
