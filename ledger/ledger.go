// Package ledger is the gateway's database: links, the atomic claim that
// spends one allowance, grants (the audit trail), transfer sessions, their
// byte budgets and concurrency slots. Implementations: ledger/mysql (MySQL
// 8.4 and MariaDB 10.11) and ledger/sqlite (the embedded default), both on
// the shared SQL core in ledger/sqlcore.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/dlgate/dlgate/storage"
)

// Delivery modes of a link (SPEC §1).
const (
	DeliveryStream  = "stream"
	DeliverySession = "session"
)

// Grant kinds and statuses.
const (
	KindStream  = "stream"
	KindSession = "session"

	StatusGranted  = "granted"
	StatusRefunded = "refunded"
)

// Reason says why a claim or lookup was refused. It goes to logs, metrics
// and the admin API, never to the public caller (who sees a generic 404).
type Reason string

const (
	ReasonUnknown      Reason = "unknown"
	ReasonExpired      Reason = "expired"
	ReasonRevoked      Reason = "revoked"
	ReasonExhausted    Reason = "exhausted"
	ReasonWrongAccount Reason = "wrong_account"
	ReasonNoBudget     Reason = "no_budget"
)

// Errors returned by every Ledger. Callers use errors.Is.
var (
	// ErrNotFound: no row with that id or token hash.
	ErrNotFound = errors.New("ledger: not found")
	// ErrRefused: the claim (or a session operation) was refused; errors.As
	// a *RefusedError for the reason.
	ErrRefused = errors.New("ledger: refused")
	// ErrNoSlot: every concurrency slot of the session is leased.
	ErrNoSlot = errors.New("ledger: no free slot")
	// ErrBudgetExhausted: the session's byte budget is spent.
	ErrBudgetExhausted = errors.New("ledger: byte budget exhausted")
	// ErrConflict: an idempotency key was reused with a different request.
	ErrConflict = errors.New("ledger: conflict")
	// ErrAmbiguous: the database failed during COMMIT, so whether the
	// transaction took effect is unknown. Never retried blindly.
	ErrAmbiguous = errors.New("ledger: commit outcome unknown")
	// ErrUnavailable: the database could not be reached or kept failing
	// after bounded retries.
	ErrUnavailable = errors.New("ledger: database unavailable")
	// ErrInvalid: the request breaks a rule of the ledger (for example a
	// non-positive allowance).
	ErrInvalid = errors.New("ledger: invalid request")
	// ErrRevoked: the link is revoked, so it cannot be changed any more
	// (adding allowance to it, for example).
	ErrRevoked = errors.New("ledger: link revoked")
	// ErrPinned: a live link or a live session pins the object version,
	// so it cannot be deleted; errors.As a *PinnedError for the counts.
	ErrPinned = errors.New("ledger: object version pinned by a live link")
	// ErrObjectDeleted: the object version the gateway stored is deleted,
	// or being deleted, so no new link can pin it.
	ErrObjectDeleted = errors.New("ledger: object version deleted")
)

// RefusedError carries the precise reason of a refusal.
type RefusedError struct {
	Reason Reason
}

func (e *RefusedError) Error() string { return "ledger: refused: " + string(e.Reason) }

// Is makes errors.Is(err, ErrRefused) true for every RefusedError.
func (e *RefusedError) Is(target error) bool { return target == ErrRefused }

// Refused returns a *RefusedError for r.
func Refused(r Reason) error { return &RefusedError{Reason: r} }

// ReasonOf returns the reason of a refusal, or "" when err is not one.
func ReasonOf(err error) Reason {
	var re *RefusedError
	if errors.As(err, &re) {
		return re.Reason
	}
	return ""
}

// Object is the immutable object version a link pins: storage's own
// Version, one type from the store through the ledger to the events
// (EventObjectOf) and the delivery pipeline.
type Object = storage.Version

// SessionSettings are the per-link session parameters (SPEC §4). Zero
// fields mean "use the gateway's defaults at mint time".
type SessionSettings struct {
	TTL            time.Duration
	ByteBudget     int64
	MaxConcurrency int
}

// Link is one limited-use download link.
type Link struct {
	ID             string
	TokenHash      []byte
	Object         Object
	Filename       string
	AccountID      string // "" when the link is not bound to an account
	Allowance      int    // downloads granted at creation plus top-ups
	Remaining      int
	ExpiresAt      time.Time
	RevokedAt      *time.Time
	CreatedAt      time.Time
	Delivery       string
	Confirm        bool
	Session        SessionSettings
	IdempotencyKey string // admin create; "" when none
	// Retries is how many times the client of an interrupted stream
	// download may download it again under the same grant, 0 to
	// MaxRetries (SPEC §1; GrantRetryBegin).
	Retries int
	// ReadAt is the database's clock when the row was read by a lookup
	// (zero elsewhere). Checks made on the row judge time by it, so a
	// gateway whose own clock is off still agrees with the database.
	ReadAt time.Time
}

// LinkStatus is a link with its counts, for the admin API.
type LinkStatus struct {
	Link
	Grants map[string]int // count by status
	// Deliveries counts the grants by delivery status, every status
	// present.
	Deliveries     map[DeliveryStatus]int
	ActiveSessions int
}

// Grant is the audit record of one accepted claim.
type Grant struct {
	ID         string
	LinkID     string
	Kind       string
	AccountID  string
	Status     string
	CreatedAt  time.Time
	RefundedAt *time.Time
	Client     string
	SessionID  string
	// AffinityReuses counts the requests session affinity sent to the
	// grant's session instead of claiming again (SPEC §5).
	AffinityReuses int64
	// Delivery is what the grant's client acknowledged (SPEC §1).
	Delivery Delivery
}

// ClaimRequest asks to spend one allowance of a link.
type ClaimRequest struct {
	LinkID    string
	AccountID string // the verified caller, "" when anonymous
	Kind      string // KindStream or KindSession
	Client    string // short client descriptor without secrets
	// RetriesChecked says the caller asked GrantRetryBegin first and
	// found no retry to serve: a GET of a stream link with retries then
	// claims at once (Link.ClaimsAtOnce). Without it such a link is
	// returned unclaimed, so that no download is spent before the retry
	// was asked.
	RetriesChecked bool
}

// Session is an expiring transfer session minted by a claim.
type Session struct {
	ID             string
	TokenHash      []byte
	LinkID         string
	GrantID        string
	AccountID      string
	Object         Object
	Filename       string
	ByteBudget     int64
	BytesDrawn     int64
	MaxConcurrency int
	ExpiresAt      time.Time
	RevokedAt      *time.Time
	EndedAt        *time.Time
	CreatedAt      time.Time
	LinkRevokedAt  *time.Time
	// ReadAt is the database's clock when a lookup read the row (zero
	// elsewhere), as Link.ReadAt.
	ReadAt time.Time
	// Streaming is set by session affinity's lookup when a request of
	// the session holds a concurrency slot (its lease not lapsed).
	Streaming bool
}

// MintRequest asks to claim one allowance and mint a session in the same
// transaction. ID and TokenHash are chosen by the caller (the token is
// derived from the id); IdempotencyKey is scoped to (link, account).
type MintRequest struct {
	Claim          ClaimRequest
	SessionID      string
	TokenHash      []byte
	ByteBudget     int64
	MaxConcurrency int
	// ExpiresAt is computed by the caller from the link's expiry and the
	// session ttl (sessions.SessionExpiry).
	ExpiresAt      time.Time
	IdempotencyKey string
	// Affinity asks for session affinity (SPEC §5): when the claiming
	// account already has a live session of this link, that session is
	// returned (created=false) and nothing is claimed. Concurrent first
	// requests are decided by a unique key, so they make one session.
	// IdempotencyKey is ignored with Affinity. The mint is a GET without
	// Range, which wants the whole object: the client's session is reused
	// only when its undrawn budget covers the whole object
	// (Session.Usable with need the object's size), else the GET claims
	// anew.
	Affinity bool
	// AffinityKeys name the client within the (link, account) scope when
	// it is not the account itself (nil: the verified account of an
	// account-bound link): opaque keys of at most 64 visible ASCII
	// characters, such as "c:" and a cookie's client id, or "u:" and a
	// hash of the address and User-Agent. The session is looked up by the
	// first key that ever had one (see SessionGetByAffinity); a new one is
	// decided by the unique key of the key it was found under, or of the
	// last key when none was, and is registered under every key, so that
	// a later request found by any of them is sent to it.
	AffinityKeys []string
}

// MaxAffinityKey is the longest client key of MintRequest.AffinityKeys.
const MaxAffinityKey = 64

// Usable reports whether s can still serve a request that needs need body
// bytes at now: what session affinity (SPEC §5) asks of a session before
// sending a client back to it.
//
// A request that wants the whole object (a GET without Range: need is the
// object's size) goes back only when the undrawn budget covers all of it;
// otherwise it would be sent to a session that cuts it short or answers
// 403 while the link still has downloads (issue 23: a spent session whose
// slot was still held in its idle window). A ranged request (need ≤ 1)
// goes back while any budget is left, and also when a request of the
// session still holds a slot with the budget wholly drawn: processes give
// back what they drew and did not send, so a resume goes to its session
// rather than spending another download.
func (s *Session) Usable(now time.Time, need int64) bool {
	if s.Refusal(now) != "" {
		return false
	}
	left := s.ByteBudget - s.BytesDrawn
	if need <= 1 {
		return left >= 1 || s.Streaming
	}
	return left >= need
}

// SweepResult counts what one Sweep call did.
type SweepResult struct {
	SessionsEnded int
	LeasesCleared int
	// ConsoleSessionsPurged counts the console sessions deleted because
	// they were past their end or idle timeout.
	ConsoleSessionsPurged int
}

// Page is a cursor page of grants.
type Page struct {
	Grants []Grant
	Next   string // cursor for the next page, "" at the end
}

// ClaimOutcome is what one claim by token hash found and decided, in one
// transaction: the row, and the grant or the reason for the refusal, both
// by the database's clock of the decision.
type ClaimOutcome struct {
	// Link is the row as the claim's transaction read it (ReadAt the
	// database's clock); nil only when the token is unknown or the
	// database failed.
	Link *Link
	// Grant is the claim's grant when it was granted.
	Grant *Grant
	// Refusal says why the claim was refused; "" when it was granted, or
	// when the link is not one a GET claims at once (Link.ClaimsAtOnce):
	// then nothing was tried, for the caller to mint a session or show a
	// landing page.
	Refusal Reason
}

// Claims is the download path on link URLs (gateway/public/claim.go, mint.go,
// affinity.go): it finds and claims links, mints sessions and refunds.
type Claims interface {
	// LinkGetByTokenHash returns the link, whatever its state. Errors:
	// ErrNotFound, ErrUnavailable.
	LinkGetByTokenHash(ctx context.Context, hash []byte) (*Link, error)
	// LinkClaim is the download path's one claim call: it reads the link
	// with token hash hash and, when a GET of its URL claims it at once
	// (Link.ClaimsAtOnce(confirmed, req.RetriesChecked), confirmed for a
	// POST from the landing page), spends one allowance and writes the
	// grant, all in one transaction, which may decide other claims of the
	// process with it (SPEC §1 "Group claims"). A refusal may come from the
	// process's cache of links it saw unclaimable; a grant never does.
	// req.LinkID is ignored. Errors: ErrNotFound, ErrAmbiguous (with the
	// outcome's grant), ErrUnavailable.
	LinkClaim(ctx context.Context, hash []byte, req ClaimRequest, confirmed bool) (ClaimOutcome, error)
	// GrantRefund gives back the allowance of a granted claim and marks the
	// grant refunded, revoking the grant's session if it has one;
	// refunding twice is a no-op. Errors: ErrNotFound.
	GrantRefund(ctx context.Context, grantID string) error
	// SessionMint claims one allowance of req.Claim.LinkID and creates a
	// session, atomically, in a transaction that may decide other claims
	// with it. With an idempotency key already used for (link, account)
	// it returns the existing session and created=false, claiming
	// nothing. Errors: ErrRefused (with the reason), ErrInvalid,
	// ErrAmbiguous (with the session it may have minted), ErrUnavailable.
	SessionMint(ctx context.Context, req MintRequest) (s *Session, created bool, err error)
	// SessionGetByAffinity returns the session that session affinity (SPEC
	// §5) gave the client on the link, when it is usable for a request
	// that needs need bytes (Session.Usable: the object's size for a
	// request without Range, 1 for a ranged one): the account when keys
	// is nil, else the newest session of the first of keys that ever had
	// one (see MintRequest.AffinityKeys). Errors: ErrNotFound when there
	// is none (or it died, or cannot serve need), ErrInvalid,
	// ErrUnavailable.
	SessionGetByAffinity(ctx context.Context, linkID, account string, keys []string, need int64) (*Session, error)
	// SessionNoteAffinityReuse records that session affinity sent a request to
	// the session instead of claiming (shown on its grant). Errors:
	// ErrUnavailable.
	SessionNoteAffinityReuse(ctx context.Context, sessionID string) error
}

// Sessions is what serving a session URL reads (gateway/public/session.go).
type Sessions interface {
	// SessionGetByTokenHash returns the session with its link's revocation.
	// Errors: ErrNotFound.
	SessionGetByTokenHash(ctx context.Context, hash []byte) (*Session, error)
}

// Budget is a session's byte budget, drawn and given back while a
// response streams (gateway/warm/warm.go).
type Budget interface {
	// BudgetDraw reserves up to want bytes of the session's budget and
	// returns how many were granted (≥ 1). Errors: ErrBudgetExhausted,
	// ErrRefused (session dead).
	BudgetDraw(ctx context.Context, sessionID string, want int64) (int64, error)
	// BudgetReturn gives back n reserved but unsent bytes.
	BudgetReturn(ctx context.Context, sessionID string, n int64) error
}

// Slots are a session's leased concurrency slots (gateway/warm/warm.go,
// gateway/warm/lease.go).
type Slots interface {
	// SlotAcquire leases one of the session's concurrency slots to holder
	// until now+lease. Errors: ErrNoSlot.
	SlotAcquire(ctx context.Context, sessionID, holder string, lease time.Duration) error
	// SlotRenew extends holder's lease. Errors: ErrNotFound when the lease
	// was lost.
	SlotRenew(ctx context.Context, sessionID, holder string, lease time.Duration) error
	// SlotRelease frees holder's slot; releasing a lost lease is a no-op.
	SlotRelease(ctx context.Context, sessionID, holder string) error
}

// Admin is the admin API's view of links and sessions
// (gateway/admin*.go).
type Admin interface {
	// LinkCreate inserts l (ID and TokenHash set by the caller). When
	// l.IdempotencyKey names an existing link, that link is returned with
	// created=false. Each change below made with an actor in ctx
	// (WithActor) writes its audit entry in its own transaction (a
	// replay, or revoking what is revoked, changes nothing and writes
	// none); the actor's Validate errors are ErrInvalid. Errors:
	// ErrInvalid, ErrUnavailable.
	LinkCreate(ctx context.Context, l *Link) (out *Link, created bool, err error)
	// LinkGet returns the link with its counts. Errors: ErrNotFound.
	LinkGet(ctx context.Context, id string) (*LinkStatus, error)
	// LinkRevoke revokes the link and ends its sessions; idempotent.
	// Errors: ErrNotFound.
	LinkRevoke(ctx context.Context, id string) error
	// AllowanceAdd adds n ≥ 1 to the link's allowance and remaining,
	// recording the reason. Errors: ErrNotFound, ErrInvalid.
	AllowanceAdd(ctx context.Context, id string, n int, reason string) error
	// GrantList lists a link's grants newest first, each with its
	// Delivery, filtered by delivery status (one index range scan).
	// Errors: ErrNotFound, ErrInvalid (bad cursor or delivery status).
	GrantList(ctx context.Context, q GrantQuery) (Page, error)
	// LinkList lists links newest first (created_at, then id,
	// descending), one page at a time, with their counts. Errors:
	// ErrInvalid (bad cursor, limit or state), ErrUnavailable.
	LinkList(ctx context.Context, q ListQuery) (LinkPage, error)
	// AllowanceList lists the audited allowance changes of a link,
	// newest first. Errors: ErrNotFound.
	AllowanceList(ctx context.Context, linkID string) ([]AllowanceChange, error)
	// SessionGet returns a session by id. Errors: ErrNotFound.
	SessionGet(ctx context.Context, id string) (*Session, error)
	// SessionRevoke revokes one session; idempotent. Errors: ErrNotFound.
	SessionRevoke(ctx context.Context, id string) error
}

// Sweeper ends expired sessions and clears lapsed slot leases
// (gateway/upkeep.go).
type Sweeper interface {
	// SessionSweep ends sessions that expired, were revoked or spent their
	// budget (wholly drawn, no slot leased, no process's report for
	// SpentGrace), clears lapsed leases and deletes dead console
	// sessions, at most limit of each; a session's grant that is not
	// complete gets grant.interrupted in the transaction that ends it.
	// Safe to run in many processes at once.
	SessionSweep(ctx context.Context, limit int) (SweepResult, error)
}

// SpentGrace is how long the sweeper waits after the last report of any
// process on a session whose budget is wholly drawn and whose slots are
// all free before it ends the session: a process keeps what it drew and
// did not send for about a second after a request (the gateway's warm
// sessions) and gives it back with its report, so a session is spent for
// good only once no process reported for a while. A minute is sixty
// times that second, and four sweeps.
const SpentGrace = time.Minute

// Health is the readiness check and the end of the pool (gateway
// /readyz, cmd/gateway).
type Health interface {
	// Ping checks the database is reachable.
	Ping(ctx context.Context) error
	// Close releases the connection pool.
	Close() error
}

// Ledger is everything the gateway needs from its database, cut by who
// uses it: each part of the gateway holds only the interface it calls,
// and a backend implements them all (ledger/sqlcore). ObjectLedger and
// Outbox are the object lifecycle and the webhook outbox; Keys, Audit and
// ConsoleSessions the operators' credentials and what they did.
type Ledger interface {
	Claims
	Deliveries
	Sessions
	Budget
	Slots
	Admin
	Sweeper
	ObjectLedger
	Keys
	Audit
	ConsoleSessions
	Views
	Health
}

// LinkState is where a link stands at some instant, as the admin listing
// filters it (SPEC §6). Every link is in exactly one state.
type LinkState string

const (
	// StateActive: not revoked, not expired, downloads remaining.
	StateActive LinkState = "active"
	// StateExhausted: not revoked, not expired, nothing remaining.
	StateExhausted LinkState = "exhausted"
	// StateExpired: not revoked, expires_at <= now (whatever remains).
	StateExpired LinkState = "expired"
	// StateRevoked: revoked_at is set (whether or not it also expired).
	StateRevoked LinkState = "revoked"
)

// State returns l's state at now. Revocation wins over expiry, expiry over
// exhaustion; the listing's SQL filters follow the same order.
func (l *Link) State(now time.Time) LinkState {
	switch {
	case l.RevokedAt != nil:
		return StateRevoked
	case !l.ExpiresAt.After(now):
		return StateExpired
	case l.Remaining <= 0:
		return StateExhausted
	}
	return StateActive
}

// ParseLinkState returns the state named s. Errors: ErrInvalid.
func ParseLinkState(s string) (LinkState, error) {
	switch st := LinkState(s); st {
	case StateActive, StateExhausted, StateExpired, StateRevoked:
		return st, nil
	}
	return "", fmt.Errorf("%w: state must be active, exhausted, expired or revoked", ErrInvalid)
}

// GrantQuery selects a page of a link's grants.
type GrantQuery struct {
	LinkID string
	// Cursor is the Next of the previous page, "" for the first page.
	Cursor string
	// Limit is the page size, 1 to MaxListLimit; anything else means
	// DefaultListLimit.
	Limit int
	// Delivery keeps the grants of that delivery status; "" keeps all.
	Delivery DeliveryStatus
}

// Listing limits.
const (
	DefaultListLimit = 100
	MaxListLimit     = 500
)

// ListQuery selects a page of links. Zero fields do not filter.
type ListQuery struct {
	// Cursor is the Next of the previous page, "" for the first page.
	Cursor string
	// Limit is the page size, 1 to MaxListLimit; 0 means DefaultListLimit.
	Limit     int
	AccountID string
	ObjectKey string
	State     LinkState // "" for every state
	// CreatedAfter and CreatedBefore are exclusive bounds on CreatedAt.
	CreatedAfter  time.Time
	CreatedBefore time.Time
}

// LinkPage is a cursor page of links.
type LinkPage struct {
	Links []LinkStatus
	Next  string // cursor for the next page, "" at the end
}

// AllowanceChange is one audited top-up of a link.
type AllowanceChange struct {
	Add       int
	Reason    string
	CreatedAt time.Time
}

// Clock returns the current time; ledgers take one so tests can move time.
type Clock func() time.Time

// Micro truncates t to the microsecond precision every backend stores, in
// UTC, so that what goes in compares equal to what comes out.
func Micro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// Validate checks the rules every backend enforces on a new link.
func (l *Link) Validate() error {
	switch {
	case l.ID == "" || len(l.TokenHash) != 32:
		return fmt.Errorf("%w: id and token hash are required", ErrInvalid)
	case l.Allowance < 1:
		return fmt.Errorf("%w: downloads must be at least 1", ErrInvalid)
	case l.Remaining < 0 || l.Remaining > l.Allowance:
		return fmt.Errorf("%w: remaining out of range", ErrInvalid)
	case l.Delivery != DeliveryStream && l.Delivery != DeliverySession:
		return fmt.Errorf("%w: delivery must be stream or session", ErrInvalid)
	case l.Object.Key == "" || l.Object.VersionID == "" || l.Object.Size < 0:
		return fmt.Errorf("%w: a pinned object version is required", ErrInvalid)
	case l.ExpiresAt.IsZero():
		return fmt.Errorf("%w: expiry is required", ErrInvalid)
	case l.Retries < 0 || l.Retries > MaxRetries:
		return fmt.Errorf("%w: retries must be between 0 and %d", ErrInvalid, MaxRetries)
	}
	return nil
}

// Refusal says why l cannot be claimed by account at now, in the order
// the claim's condition checks it (claimableSQL in ledger/sqlcore), or ""
// when it can. The claim transaction judges each claim with it from the
// row it locked, by the database's clock read with the row, and its
// decrement repeats the condition in SQL; anywhere else it explains a
// decision (logs, HEAD) and never makes one.
func (l *Link) Refusal(account string, now time.Time) Reason {
	switch {
	case l.RevokedAt != nil:
		return ReasonRevoked
	case !l.ExpiresAt.After(now):
		return ReasonExpired
	case l.AccountID != "" && l.AccountID != account:
		return ReasonWrongAccount
	case l.Remaining <= 0:
		return ReasonExhausted
	}
	return ""
}

// ClaimsAtOnce reports whether a GET of l's URL claims it and streams the
// object at once: delivery stream, no confirmation asked unless the
// request is the confirmation (a POST from the landing page), and no
// retries unless the caller already asked for one (retriesChecked,
// ClaimRequest.RetriesChecked): a link with retries may serve an
// interrupted download again without a claim (SPEC §1), which must be
// asked before a download is spent. A link without retries costs what it
// always did. The claim transaction asks it of the row it locked, as
// everything else does.
func (l *Link) ClaimsAtOnce(confirmed, retriesChecked bool) bool {
	return l.Delivery == DeliveryStream && (!l.Confirm || confirmed) && (l.Retries == 0 || retriesChecked)
}

// Refusal says why s cannot serve bytes at now, or "" when it can.
func (s *Session) Refusal(now time.Time) Reason {
	switch {
	case s.RevokedAt != nil || s.LinkRevokedAt != nil:
		return ReasonRevoked
	case !s.ExpiresAt.After(now), s.EndedAt != nil:
		return ReasonExpired
	}
	return ""
}
