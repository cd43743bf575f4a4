package ledger

import (
	"context"
	"fmt"
	"time"
)

// ValidSHA256 reports whether s is a SHA-256 as the ledger records one:
// 64 lowercase hex digits.
func ValidSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// ObjectState is where an object version the gateway stored stands.
type ObjectState string

const (
	// ObjectStored: in the store; links may pin it.
	ObjectStored ObjectState = "stored"
	// ObjectDeleting: decided for deletion, no link may pin it any more;
	// the store deletion is under way or waits for a retry.
	ObjectDeleting ObjectState = "deleting"
	// ObjectDeleted: gone from the store. The row stays as a tombstone
	// until the audit retention purges it.
	ObjectDeleted ObjectState = "deleted"
)

// Deletion timing. A deletion handed out by DeletionBegin or
// DeletionClaim is the caller's alone for DeletionLease; a caller that
// dies before DeletionFinish loses it then, and another process takes it
// up. A failed store deletion is tried again after a backoff that doubles
// from DeletionRetryMin up to DeletionRetryMax.
const (
	DeletionLease    = 5 * time.Minute
	DeletionRetryMin = 30 * time.Second
	DeletionRetryMax = time.Hour
)

// DeletionBackoff returns how long to wait after the attempts-th failed
// store deletion (1 for the first).
func DeletionBackoff(attempts int) time.Duration {
	d := DeletionRetryMin
	for i := 1; i < attempts && d < DeletionRetryMax; i++ {
		d *= 2
	}
	return min(d, DeletionRetryMax)
}

// StoredObject is an object version the gateway stored itself (PUT
// /v1/objects). Only these are ever deleted by the gateway: it never
// deletes objects it did not upload (SPEC §6).
type StoredObject struct {
	Object   // LastModified is not recorded
	StoredAt time.Time
	State    ObjectState
	// Attempts counts failed store deletions.
	Attempts  int
	DeletedAt *time.Time
}

// Deletion is an object version marked deleting and handed to one caller
// to delete from the store, which then reports with DeletionFinish.
type Deletion struct {
	Object Object
	// Attempts counts the failed store deletions before this one.
	Attempts int
	// DecidedBy is the actor whose DeletionBegin decided the deletion
	// (KeyID and KeyName), nil when retention did: the object.deleted
	// event names it, whichever process finishes the deletion.
	DecidedBy *Actor
}

// PinnedError says what keeps an object version from being deleted.
type PinnedError struct {
	Links    int // live links pinning the version
	Sessions int // live sessions of any of its links
}

func (e *PinnedError) Error() string {
	return fmt.Sprintf("ledger: object version pinned by %d live link(s) and %d live session(s)", e.Links, e.Sessions)
}

// Is makes errors.Is(err, ErrPinned) true for every PinnedError.
func (e *PinnedError) Is(target error) bool { return target == ErrPinned }

// PurgeResult counts what one LinkPurge call deleted.
type PurgeResult struct {
	Links      int // with their grants, sessions, allowance changes and idempotency keys
	Tombstones int // rows of deleted object versions
	Audit      int // audit entries
	Keys       int // keys revoked or expired as long ago
}

// ObjectLedger is the object lifecycle part of Ledger (SPEC §6). A link
// is dead when it is revoked, expired, or exhausted with no live session;
// a version is unreferenced when every link pinning it is dead and no
// session of theirs is live. The ledger decides, and marks a version
// deleting in the same transaction, before any store deletion; a link can
// then no longer pin it, and the links that pinned it can never come back
// to life (the exhausted ones are revoked, so no top-up revives them). It
// never calls the store: callers delete what it hands out and report.
type ObjectLedger interface {
	// ObjectRecord records a version the gateway stored. Recording the
	// same version again (an S3 bucket without versioning reuses version
	// "null") makes it stored anew with o's size and ETag. With an actor
	// in ctx it writes the object.stored audit entry in the same
	// transaction. Errors: ErrInvalid, ErrUnavailable.
	ObjectRecord(ctx context.Context, o Object) error
	// ObjectGet returns the record of a version the gateway stored.
	// Errors: ErrNotFound, ErrUnavailable.
	ObjectGet(ctx context.Context, bucket, key, versionID string) (*StoredObject, error)
	// DeletionBegin marks a version the gateway stored deleting, when
	// nothing live pins it, and hands it out for DeletionLease. With force
	// the live links are revoked first (LinkRevoke, which ends their
	// sessions). A version already deleting is handed out again, so an
	// operator can retry a failed deletion at once. With an actor in ctx
	// the transaction that decides the deletion writes the object.deleted
	// audit entry (and each revocation its link.revoked one): that
	// decision is what the operator did, and it stands whether the store
	// deletion then succeeds or is retried by the sweeper. Errors:
	// ErrNotFound (the gateway did not store it, or it is deleted),
	// ErrPinned (a *PinnedError), ErrUnavailable.
	DeletionBegin(ctx context.Context, bucket, key, versionID string, force bool) (*Deletion, error)
	// DeletionClaim hands out at most limit versions to delete: versions
	// unreferenced for at least retention (marked deleting in the same
	// transaction; retention 0 keeps every version), and deletions whose
	// failed attempt's backoff or lapsed lease has passed. Each is handed
	// to one caller at a time, whichever process asks. Errors:
	// ErrInvalid (negative retention, limit < 1), ErrUnavailable.
	DeletionClaim(ctx context.Context, retention time.Duration, limit int) ([]Deletion, error)
	// DeletionFinish records the store's answer for d: failure nil means
	// the version is gone (deleted now, or found missing), and the row
	// becomes a tombstone; otherwise the failure is recorded and the
	// deletion is handed out again after DeletionBackoff. Reporting on a
	// deletion already finished is a no-op. Errors: ErrNotFound,
	// ErrUnavailable.
	DeletionFinish(ctx context.Context, d Deletion, failure error) error
	// LinkPurge deletes at most limit links dead for at least retention
	// (revoked, or expired, with every session dead as long) with their
	// grants, sessions, slots, allowance changes and idempotency keys,
	// at most limit tombstones of versions deleted as long ago, at most
	// limit audit entries as old, and at most limit keys revoked or
	// expired as long ago (GATEWAY_AUDIT_RETENTION). Retention 0 keeps
	// everything. Errors: ErrInvalid, ErrUnavailable.
	LinkPurge(ctx context.Context, retention time.Duration, limit int) (PurgeResult, error)
}

// Digests is what the backfill of SHA-256s needs (gateway objects digest,
// SPEC §10): versions the gateway stored before it computed digests have
// none until it is run. Only the backfill uses it; the gateway's Ledger
// does not include it.
type Digests interface {
	// DigestCountMissing counts the stored versions without a SHA-256 and
	// their bytes. Errors: ErrUnavailable.
	DigestCountMissing(ctx context.Context) (count int, bytes int64, err error)
	// ObjectListWithoutDigest returns at most limit stored versions without
	// a SHA-256, in a fixed order, after the one the cursor after names
	// ("" for the first), and the cursor of the last one returned (""
	// when none was). A run that stops and starts again from "" finds
	// exactly the versions still without one. Errors: ErrInvalid (limit
	// < 1, a cursor not from here), ErrUnavailable.
	ObjectListWithoutDigest(ctx context.Context, after string, limit int) ([]StoredObject, string, error)
	// DigestRecord records sum as the SHA-256 of the version o names,
	// while it still has o's size and ETag, and on the links and
	// sessions pinning that version that have none yet, in one
	// transaction. Recording the same digest again changes nothing.
	// Errors: ErrInvalid (not a hex SHA-256), ErrNotFound (no such stored
	// version, or it changed), ErrConflict (the version already has
	// another digest: its bytes are not the ones recorded),
	// ErrUnavailable.
	DigestRecord(ctx context.Context, o Object, sum string) error
}
