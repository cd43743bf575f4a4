package sqlcore

import (
	"context"
	"fmt"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
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
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	var got int64
	err := s.Retry(ctx, func() (err error) {
		got, err = s.D.DrawBytes(ctx, s.Pool, want, sessionID, s.DBNow())
		return err
	})
	if err != nil {
		return 0, s.Classify(err)
	}
	if got > 0 {
		return got, nil
	}
	// Explain the refusal by the clock that made it.
	var now engine.TimeCol
	x, err := scanSession(engine.WithNow(s.Pool.QueryRowContext(ctx,
		s.Q(`SELECT `+sessionColumns+`, {now}`+sessionFrom+` WHERE s.id = ?`), s.DBNow(), sessionID), &now))
	if err != nil {
		return 0, s.Classify(err)
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
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	_, err := s.Exec(ctx, s.Q(returnSQL), n, n, s.DBNow(), sessionID)
	return err
}
