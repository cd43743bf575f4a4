package uploads

import (
	"context"
	"errors"

	"github.com/dlgate/dlgate/ledger"
)

// sweepBatch is how many uploads one Sweep hands out of each kind.
const sweepBatch = 100

// SweepResult counts what one Sweep did.
type SweepResult struct {
	Expired int // unfinished uploads whose bytes were removed
	Purged  int // finished uploads forgotten
}

// Sweep removes the bytes of at most a batch of unfinished uploads past
// their expiry (S3: aborts the multipart upload and deletes every version
// of its temporary objects; fs: removes the partial file) and then their
// rows, and forgets a batch of finished ones past theirs. Each expired
// upload goes to one sweeper at a time, whichever process runs it
// (ledger.Uploads.UploadExpiredClaim); one whose bytes the store failed to
// remove is taken up again once its lease lapses. The gateway's sweeper
// calls it on its interval. Errors: the ledger's (ErrUnavailable), and
// the first store failure, after the rest of the batch was tried.
func (h *Handler) Sweep(ctx context.Context) (SweepResult, error) {
	var out SweepResult
	due, err := h.cfg.Ledger.UploadExpiredClaim(ctx, h.cfg.LockLease, sweepBatch)
	if err != nil {
		return out, err
	}
	var first error
	for i := range due {
		u := &due[i]
		if err := h.up.UploadAbort(ctx, storageUpload(u)); err != nil {
			h.log.WarnContext(ctx, "expired upload not removed from the store", "upload_id", u.ID, "err", err)
			first = errors.Join(first, err)
			continue
		}
		if err := h.cfg.Ledger.UploadDelete(ctx, u.ID, u.Holder); err != nil && !errors.Is(err, ledger.ErrNotFound) {
			first = errors.Join(first, err)
			continue
		}
		h.log.InfoContext(ctx, "expired upload removed", "upload_id", u.ID, "key", u.Key, "offset", u.Offset, "bytes", u.Size)
		out.Expired++
	}
	n, err := h.cfg.Ledger.UploadPurge(ctx, sweepBatch)
	out.Purged = n
	return out, errors.Join(first, err)
}
