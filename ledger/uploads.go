package ledger

import (
	"context"
	"errors"
	"time"
)

// ErrLocked: another holder has the upload's lock, its lease not lapsed.
var ErrLocked = errors.New("ledger: upload locked by another request")

// Upload is a resumable upload (SPEC §11) as the ledger keeps it: where
// it goes, how far it is, the state of its SHA-256 and the store's own
// state at that offset, and who holds its lock. Every gateway process
// reads and writes it here, so a PATCH may reach any of them.
type Upload struct {
	ID          string
	Bucket      string // the store's own name, resolved when it began
	Key         string
	Filename    string // "" when none was given
	ContentType string
	Size        int64 // declared when created (Upload-Length)
	PartSize    int64 // the store's (storage.Upload.PartSize)
	// Offset is how many bytes the store holds for the upload, as the
	// last advance recorded it.
	Offset int64
	// SHA256State is the SHA-256 of those bytes, marshaled by
	// crypto/sha256 (encoding.BinaryMarshaler); StoreState is the
	// store's own (storage.Upload.State). Both are empty once finished.
	SHA256State []byte
	StoreState  []byte
	CreatedAt   time.Time
	// ExpiresAt is when an unfinished upload is given up (its bytes
	// removed) and a finished one forgotten: the expiry after its
	// creation, its last advance or its finish, by the database's clock.
	ExpiresAt time.Time
	// FinishedAt and Object are set once the upload became a version.
	FinishedAt *time.Time
	Object     *Object
	// Holder holds the upload's lock until LeaseUntil (zero: nobody).
	Holder     string
	LeaseUntil time.Time
	// ReadAt is the database's clock when the row was read, as
	// Link.ReadAt: expiry is judged by it.
	ReadAt time.Time
}

// Expired reports whether u had expired when it was read.
func (u *Upload) Expired() bool { return !u.ExpiresAt.After(u.ReadAt) }

// UploadAdvanceParams moves an upload forward by one append.
type UploadAdvanceParams struct {
	ID     string
	Holder string // must hold the upload's lock
	// From is the offset the append started at, which must still be the
	// recorded one; Offset is where it ended (From <= Offset <= Size).
	From, Offset int64
	SHA256State  []byte
	StoreState   []byte
	// Expiry extends the upload's life to this long after the database's
	// now.
	Expiry time.Duration
}

// Uploads is the ledger of resumable uploads (uploads/, SPEC §11). The
// lock is a lease row like a session slot's (SlotAcquire): a request
// holds it while it reads or writes the upload, and the conditional
// advance refuses anyone but its holder, so two PATCHes of one upload
// never both write, in any process. Only the uploads package uses it; the
// gateway's Ledger does not include it.
type Uploads interface {
	// UploadCreate records u (ID chosen by the caller, Offset 0, not
	// locked), expiring expiry after the database's now, and returns it
	// as stored. Errors: ErrInvalid (a required field missing, a value
	// too long, expiry not positive), ErrConflict (the id is taken),
	// ErrUnavailable.
	UploadCreate(ctx context.Context, u Upload, expiry time.Duration) (*Upload, error)
	// UploadGet returns the upload with ReadAt set. Errors: ErrNotFound,
	// ErrUnavailable.
	UploadGet(ctx context.Context, id string) (*Upload, error)
	// UploadLock gives the upload's lock to holder until lease past the
	// database's now, when nobody holds it or its lease lapsed; holder
	// taking it again renews it. Errors: ErrNotFound, ErrLocked,
	// ErrUnavailable.
	UploadLock(ctx context.Context, id, holder string, lease time.Duration) error
	// UploadUnlock frees holder's lock at once; a lock holder no longer
	// has is left as it is. Errors: ErrUnavailable.
	UploadUnlock(ctx context.Context, id, holder string) error
	// UploadAdvance records p's offset, digest state and store state in
	// one conditional UPDATE: only while p.Holder holds the lock and the
	// recorded offset is still p.From. Errors: ErrInvalid (offsets out of
	// order or past the size), ErrNotFound (no such unfinished upload),
	// ErrLocked (p.Holder does not hold the lock), ErrConflict (the
	// offset moved on), ErrUnavailable.
	UploadAdvance(ctx context.Context, p UploadAdvanceParams) error
	// UploadFinish records o as the version the complete upload became
	// (while holder holds its lock), clears its digest and store state,
	// and keeps it for expiry more, so that it can be read back. Errors:
	// ErrInvalid, ErrNotFound, ErrLocked, ErrConflict (not complete, or
	// finished already), ErrUnavailable.
	UploadFinish(ctx context.Context, id, holder string, o Object, expiry time.Duration) error
	// UploadExpiredClaim hands out at most limit unfinished uploads past
	// their expiry, each locked for lease by a holder of its own (the
	// returned Holder), so that one sweeper at a time removes an upload's
	// bytes, whichever process asks; an upload whose lock is held is not
	// handed out. Errors: ErrInvalid (limit < 1, lease not positive),
	// ErrUnavailable.
	UploadExpiredClaim(ctx context.Context, lease time.Duration, limit int) ([]Upload, error)
	// UploadDelete deletes the upload while holder holds its lock (the
	// termination of tus, or a sweeper done with an expired one). Errors:
	// ErrNotFound, ErrLocked, ErrUnavailable.
	UploadDelete(ctx context.Context, id, holder string) error
	// UploadPurge deletes at most limit finished uploads past their
	// expiry, whose lock nobody holds, and says how many. Errors:
	// ErrInvalid (limit < 1), ErrUnavailable.
	UploadPurge(ctx context.Context, limit int) (int, error)
}
