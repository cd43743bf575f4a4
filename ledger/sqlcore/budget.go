package sqlcore

import (
	"context"
	"fmt"

	"github.com/dlgate/dlgate/ledger"
)

// BudgetDraw reserves up to want bytes of the session's byte budget with
// one conditional UPDATE (one round trip) and returns what it granted.
// The budget can never be oversold: the row's CHECK and the WHERE clause
// keep bytes_drawn ≤ byte_budget whatever the number of drawers.
// Expiry is judged by the database's clock. Errors: ErrBudgetExhausted,
// ErrRefused (revoked, expired or ended).
func (s *DB) BudgetDraw(ctx context.Context, sessionID string, want int64) (int64, error) {
	if want < 1 {
		return 0, fmt.Errorf("%w: draw at least one byte", ledger.ErrInvalid)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var got int64
	err := s.retry(ctx, func() (err error) {
		got, err = s.d.DrawBytes(ctx, s.db, want, sessionID, s.dbNow())
		return err
	})
	if err != nil {
		return 0, s.classify(err)
	}
	if got > 0 {
		return got, nil
	}
	// Explain the refusal by the clock that made it.
	var now timeCol
	x, err := scanSession(withNow(s.db.QueryRowContext(ctx,
		s.q(`SELECT `+sessionColumns+`, {now}`+sessionFrom+` WHERE s.id = ?`), s.dbNow(), sessionID), &now))
	if err != nil {
		return 0, s.classify(err)
	}
	if r := x.Refusal(now.T); r != "" {
		return 0, ledger.Refused(r)
	}
	return 0, ledger.ErrBudgetExhausted
}

// BudgetReturn gives back n reserved bytes that were not sent, and notes
// the report (reported_at, which the sweeper's rule for spent sessions
// waits on).
func (s *DB) BudgetReturn(ctx context.Context, sessionID string, n int64) error {
	if n <= 0 {
		return nil
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	_, err := s.exec(ctx, s.q(returnSQL), n, n, s.dbNow(), sessionID)
	return err
}
