package warm

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
)

// slotLease is one concurrency slot this process holds, renewed in the
// background until it is released. lost is closed when a renewal finds
// the lease gone (another process reclaimed it after a stall): it is
// lostCtx's Done, which a response watches without a goroutine of its
// own (context.AfterFunc).
type slotLease struct {
	sessionID, holder string
	lost              <-chan struct{}
	lostCtx           context.Context
	stop              context.CancelFunc
	idleTimer         *time.Timer // while idle (warm.keepIdle): its release
}

// lease takes a slot in the database and keeps renewing it every lease/3
// until it is released; a renewal that finds the lease gone closes lost.
func (w *Sessions) takeSlot(ctx context.Context, sessionID string) (*slotLease, error) {
	holder := uuid.Must(uuid.NewV7()).String()
	// As for a budget draw (warm.fill): a lease whose UPDATE committed
	// after its client hung up would hold a slot nobody renews or
	// releases, and the session would answer 429 until it lapses. The
	// request that took it releases it when it ends.
	if err := w.Slots.SlotAcquire(context.WithoutCancel(ctx), sessionID, holder, w.Lease); err != nil {
		return nil, err
	}
	rctx, stop := context.WithCancel(context.Background())
	lostCtx, markLost := context.WithCancel(context.Background())
	l := &slotLease{sessionID: sessionID, holder: holder, lost: lostCtx.Done(), lostCtx: lostCtx, stop: stop}
	go func() {
		t := time.NewTicker(w.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-rctx.Done():
				return
			case <-t.C:
				err := w.Slots.SlotRenew(rctx, sessionID, holder, w.Lease)
				if errors.Is(err, ledger.ErrNotFound) {
					markLost()
					return
				}
				if err != nil && rctx.Err() == nil {
					w.Log.WarnContext(rctx, "lease renewal failed; retrying", "session_id", sessionID, "err", err)
				}
			}
		}
	}()
	return l, nil
}
