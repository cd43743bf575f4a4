package sqlcore

import (
	"context"
	"database/sql"
	"strings"

	"github.com/dlgate/dlgate/ledger"
)

// Sweep marks a bounded batch of expired or revoked sessions ended (and
// deletes their slot rows), then clears a bounded batch of lapsed leases.
// Sweepers in several processes skip each other's locked rows on MySQL and
// serialize on SQLite's write lock; either way each row is handled once.
func (s *DB) Sweep(ctx context.Context, limit int) (ledger.SweepResult, error) {
	if limit < 1 {
		limit = 100
	}
	var out ledger.SweepResult
	// Expired and lapsed by the database's clock, as every decision.
	now := s.dbNow()
	err := s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, s.q(s.d.ExpiredSessionsSQL), now, limit)
		if err != nil {
			return err
		}
		var ids []any
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return err
			}
			ids = append(ids, id)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		out.SessionsEnded = len(ids)
		if len(ids) == 0 {
			return nil
		}
		in := "(" + strings.TrimSuffix(strings.Repeat("?, ", len(ids)), ", ") + ")"
		if _, err := tx.ExecContext(ctx, s.q(`UPDATE sessions SET ended_at = {now} WHERE id IN `+in), append([]any{now}, ids...)...); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `DELETE FROM session_slots WHERE session_id IN `+in, ids...)
		return err
	})
	if err != nil {
		return out, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	res, err := s.exec(ctx, s.q(s.d.ClearLapsedSQL), now, limit)
	if err != nil {
		return out, err
	}
	n, _ := affected(res)
	out.LeasesCleared = int(n)
	return out, nil
}
