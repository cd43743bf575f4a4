package sqlcore

import (
	"context"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// SlotAcquire leases one free or lapsed slot row of the session to holder
// with one UPDATE. A slot whose holder crashed is reusable as soon as its
// lease lapses. Both "lapsed" and the new lease are reckoned by the
// database's clock, so a process whose clock runs ahead cannot take a
// slot another process still holds. Errors: ErrNoSlot.
func (s *DB) SlotAcquire(ctx context.Context, sessionID, holder string, lease time.Duration) error {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	now := s.DBNow()
	res, err := s.Exec(ctx, s.Q(s.D.AcquireSQL), holder, now, lease.Microseconds(), sessionID, now)
	if err != nil {
		return err
	}
	if n, err := engine.Affected(res); err != nil {
		return s.Classify(err)
	} else if n == 0 {
		return ledger.ErrNoSlot
	}
	return nil
}

// SlotRenew extends holder's lease to lease past the database's now.
// Errors: ErrNotFound when the lease lapsed and was taken by someone else
// (or swept).
func (s *DB) SlotRenew(ctx context.Context, sessionID, holder string, lease time.Duration) error {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	res, err := s.Exec(ctx, s.Q(`UPDATE session_slots SET lease_until = {now+} WHERE session_id = ? AND holder = ?`),
		s.DBNow(), lease.Microseconds(), sessionID, holder)
	if err != nil {
		return err
	}
	if n, err := engine.Affected(res); err != nil {
		return s.Classify(err)
	} else if n == 0 {
		return ledger.ErrNotFound
	}
	return nil
}

// SlotRelease frees holder's slot at once; a lost lease is a no-op.
func (s *DB) SlotRelease(ctx context.Context, sessionID, holder string) error {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	_, err := s.Exec(ctx, `UPDATE session_slots SET holder = NULL, lease_until = ? WHERE session_id = ? AND holder = ?`,
		s.TimeArg(time.Unix(0, 0)), sessionID, holder)
	return err
}
