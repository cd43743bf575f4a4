package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlgate/dlgate/sessions"
)

// DeliveryStatus says how much of its object version a grant's client
// acknowledged (SPEC §1, "Delivery evidence").
type DeliveryStatus string

const (
	// DeliveryNone: no body byte acknowledged (or nothing recorded yet:
	// a download in progress, a session not used).
	DeliveryNone DeliveryStatus = "none"
	// DeliveryPartial: some bytes, not all.
	DeliveryPartial DeliveryStatus = "partial"
	// DeliveryComplete: every byte of the version acknowledged at least
	// once. A grant never leaves it.
	DeliveryComplete DeliveryStatus = "complete"
)

// ParseDeliveryStatus returns the delivery status named s, as the grants
// listing's filter takes it. Errors: ErrInvalid.
func ParseDeliveryStatus(s string) (DeliveryStatus, error) {
	switch st := DeliveryStatus(s); st {
	case DeliveryNone, DeliveryPartial, DeliveryComplete:
		return st, nil
	}
	return "", fmt.Errorf("%w: delivery must be none, partial or complete", ErrInvalid)
}

// Delivery is what a grant's client acknowledged, as the ledger recorded
// it at the end of each response (a stream grant) or about once a second
// per process (a session's grant).
type Delivery struct {
	Status DeliveryStatus
	// BytesAcked counts the bytes of the object acknowledged at least once:
	// for a stream grant the most any of its attempts got (each sends
	// from byte 0), for a session the size of the union of the ranges
	// acknowledged over all its requests and processes.
	BytesAcked int64
	// Coverage is BytesAcked over the object's size, from 0 to 1; exactly
	// 1 only when Status is complete.
	Coverage float64
	// Attempts counts the downloads served under the grant: the first,
	// then each retry of an interrupted stream download (SPEC §1). A
	// session's grant has 1.
	Attempts int
	// DeliveredAt is when the grant became complete (the process clock of
	// the record that completed it); nil until then.
	DeliveredAt *time.Time
	// InterruptedAt is when a stream attempt last ended short, or when a
	// session ended without full coverage; nil otherwise.
	InterruptedAt *time.Time
	// Measured reports that the numbers are bytes the client's TCP stack
	// acknowledged (the socket's counters). False when nothing was
	// recorded yet, and when any record was only what the gateway wrote
	// (off Linux, or where the counters cannot tell one response's bytes
	// from another's): an upper bound of what the client got, marked as
	// such.
	Measured bool
}

// MaxRetries is the most Link.Retries may be (SPEC §6, "retries" on POST
// /v1/links).
const MaxRetries = 10

// MaxClientKeys is how many client keys a stream grant records for its
// retries (StreamDelivery.ClientKeys).
const MaxClientKeys = 3

// StreamDelivery is what one response of a stream grant delivered, as the
// gateway measured it when the response ended.
type StreamDelivery struct {
	GrantID string
	// Attempt is the attempt the response served: 1 for the claim's own
	// download, else the Delivery.Attempts GrantRetryBegin returned.
	Attempt int
	// BytesAcked counts the body bytes of this response the client
	// acknowledged, from byte 0; more than the object's size counts as
	// the size.
	BytesAcked int64
	// Measured: BytesAcked is from the client's TCP acknowledgements, not
	// only what the gateway wrote (Delivery.Measured).
	Measured bool
	// Size is the size of the object version the grant's link pins, as
	// the claim's (or retry's) link row gave it: a link's version never
	// changes. The record judges "complete" against it without reading
	// the link's row, which claims of a hot link lock. 0 has the ledger
	// read it (one plain read more).
	Size int64
	// ClientKeys name the client for a later retry (SPEC §5's identity,
	// as MintRequest.AffinityKeys do: "c:" and the cookie's client id,
	// "u:" and the hash of the address and User-Agent), at most
	// MaxClientKeys of at most MaxAffinityKey visible ASCII characters.
	// The first record of a grant keeps them; later ones do not change
	// them. A grant of an account-bound link is its account's, whatever
	// the keys.
	ClientKeys []string
}

// SessionDelivery is what a process gathered about a session since its
// last record: the ranges its requests' clients acknowledged, and the
// budget it drew and did not send.
type SessionDelivery struct {
	SessionID string
	// Acked are the ranges acknowledged since the last record of this
	// process (a record may repeat ranges: the union keeps each byte
	// once).
	Acked sessions.Coverage
	// Return is the drawn and unsent budget given back (BudgetReturn's
	// n); 0 for none.
	Return int64
	// Measured: every range in Acked is from TCP acknowledgements
	// (Delivery.Measured).
	Measured bool
}

// RetryRequest asks to serve an interrupted stream download again under
// its grant (SPEC §1, "Retries of an interrupted download").
type RetryRequest struct {
	LinkID string
	// AccountID is the verified caller, "" when anonymous. With no
	// ClientKeys the caller is that account: the grants of it on an
	// account-bound link, as session affinity has it.
	AccountID string
	// ClientKeys name the caller as StreamDelivery.ClientKeys did: a grant
	// that recorded any of them is the caller's.
	ClientKeys []string
	// Lease is how long the attempt stays in flight without a renewal
	// (GrantRetryRenew); 0 means DefaultRetryLease.
	Lease time.Duration
}

// ErrRetryInFlight is GrantRetryBegin's answer to a caller whose
// interrupted grant is being served again right now: another request of
// the same client won the conditional UPDATE, or its retry still streams
// (SPEC §1: of two concurrent retries one is served, the other refused).
// The caller is refused, not sent on to a claim, which would spend a
// download of a link the client has one under way of. Errors from
// GrantRetryBegin that are it are a *RetryInFlightError.
var ErrRetryInFlight = errors.New("ledger: a retry of the grant is in flight")

// RetryInFlightError is ErrRetryInFlight with the grant and how long its
// attempt in flight stays so without a renewal, by the database's clock:
// a process that died serving it lets go within that time.
type RetryInFlightError struct {
	GrantID string
	Left    time.Duration
}

func (e *RetryInFlightError) Error() string {
	return fmt.Sprintf("ledger: a retry of grant %s is in flight (its lease ends in %v)", e.GrantID, e.Left)
}

// Is makes errors.Is(err, ErrRetryInFlight) hold.
func (e *RetryInFlightError) Is(target error) bool { return target == ErrRetryInFlight }

// DefaultRetryLease is how long a retry's attempt stays in flight without
// a renewal: the process serving it renews every third of it, so a live
// one never lapses, and a crashed process's lapses within it, after which
// the client may try again. As the slots' GATEWAY_SLOT_LEASE: a person's
// next click comes later than that.
const DefaultRetryLease = 30 * time.Second

// Deliveries is the delivery evidence (SPEC §1): what the end of each
// stream response records and the retries of an interrupted download it
// allows (gateway/public/claim.go, stream.go), and what a process reports
// of a session's requests with its budget returns (gateway/warm/warm.go).
type Deliveries interface {
	// SessionDeliveryRecord gives back d.Return unsent bytes, as
	// BudgetReturn, and merges d.Acked into the session's coverage under
	// the row's lock, in one transaction: the session's grant gets its
	// status, delivered_at and — with webhooks on, in the same
	// transaction — grant.delivered once when the coverage reaches the
	// whole object. A process calls it with its budget returns, at most
	// about once a second per session for its ranges (gateway/warm: a
	// timer sends those that ended within a second of its last report),
	// and when it lets go of the session (a second after the session's
	// last request on it, or at shutdown or a revocation), never with
	// nothing to report; the sweeper waits SpentGrace after the last
	// report before it ends a spent session. Evidence that comes after
	// the session ended still counts. Errors:
	// ErrNotFound, ErrInvalid, ErrUnavailable.
	SessionDeliveryRecord(ctx context.Context, d SessionDelivery) error
	// GrantDeliveryRecord records the end of one response of a stream
	// grant: the most bytes acknowledged over its attempts, the status,
	// delivered_at, the client keys, and — with webhooks on, in the same
	// transaction — grant.delivered once when the grant becomes complete
	// and grant.interrupted when the response ended short. Each attempt
	// is recorded once: a second record of it changes nothing and
	// returns nil. With webhooks off it is one UPDATE. Errors: ErrNotFound
	// (no such stream grant), ErrInvalid, ErrUnavailable.
	GrantDeliveryRecord(ctx context.Context, d StreamDelivery) error
	// GrantRetryBegin decides whether the caller may download the link
	// again under an interrupted stream grant of its own, and starts that
	// attempt: the newest of the caller's granted, not complete stream
	// grants of the link whose last attempt ended (or lapsed), while the
	// link is live by the database's clock and the grant has had fewer
	// than 1 + Link.Retries attempts. One conditional UPDATE of the grant
	// decides (its attempts as read, and no attempt in flight), so of two
	// concurrent retries exactly one wins. Nothing is claimed. It returns
	// the grant with Delivery.Attempts the attempt now in flight.
	// Errors: ErrNotFound (no such grant), ErrRetryInFlight (the
	// caller's newest such grant has a retry in flight while the link
	// lives: another retry won, or still streams), ErrInvalid,
	// ErrUnavailable.
	GrantRetryBegin(ctx context.Context, req RetryRequest) (*Grant, error)
	// GrantRetryRenew extends the lease of the attempt in flight to now +
	// lease. Errors: ErrNotFound when the attempt is no longer the
	// grant's one in flight (recorded, or another began after its lease
	// lapsed), ErrUnavailable.
	GrantRetryRenew(ctx context.Context, grantID string, attempt int, lease time.Duration) error
}
