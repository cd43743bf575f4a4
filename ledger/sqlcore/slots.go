package sqlcore

import (
	"context"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

// AcquireSlot leases one free or lapsed slot row of the session to holder
// with one UPDATE. A slot whose holder crashed is reusable as soon as its
// lease lapses. Errors: ErrNoSlot.
func (s *DB) AcquireSlot(ctx context.Context, sessionID, holder string, lease time.Duration) error {
	now := s.now()
	res, err := s.exec(ctx, s.d.AcquireSQL, holder, s.t(now.Add(lease)), sessionID, s.t(now))
	if err != nil {
		return err
	}
	if n, err := affected(res); err != nil {
		return s.classify(err)
	} else if n == 0 {
		return ledger.ErrNoSlot
	}
	return nil
}

// RenewSlot extends holder's lease. Errors: ErrNotFound when the lease
// lapsed and was taken by someone else (or swept).
func (s *DB) RenewSlot(ctx context.Context, sessionID, holder string, lease time.Duration) error {
	res, err := s.exec(ctx, `UPDATE session_slots SET lease_until = ? WHERE session_id = ? AND holder = ?`,
		s.t(s.now().Add(lease)), sessionID, holder)
	if err != nil {
		return err
	}
	if n, err := affected(res); err != nil {
		return s.classify(err)
	} else if n == 0 {
		return ledger.ErrNotFound
	}
	return nil
}

// ReleaseSlot frees holder's slot at once; a lost lease is a no-op.
func (s *DB) ReleaseSlot(ctx context.Context, sessionID, holder string) error {
	_, err := s.exec(ctx, `UPDATE session_slots SET holder = NULL, lease_until = ? WHERE session_id = ? AND holder = ?`,
		s.t(time.Unix(0, 0)), sessionID, holder)
	return err
}
