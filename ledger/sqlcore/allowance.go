package sqlcore

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/audit"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// AllowanceAdd raises allowance and remaining by n and records why, with
// the audit entry when ctx carries an actor, in one transaction. A revoked
// link stays revoked: topping it up is refused by
// the UPDATE's own condition, so a revocation that commits first always
// wins. This process's refusal cache forgets the link at once (other
// processes' within their RefusalCache). Errors: ErrNotFound, ErrRevoked,
// ErrInvalid.
func (s *DB) AllowanceAdd(ctx context.Context, id string, n int, reason string) error {
	if n < 1 || n > 1_000_000 {
		return fmt.Errorf("%w: add must be between 1 and 1000000", ledger.ErrInvalid)
	}
	a, err := audit.ActorOf(ctx)
	if err != nil {
		return err
	}
	defer s.forgetRefusal(id)
	stamp := s.Stamp()
	now := s.TimeArg(stamp)
	return s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE links SET allowance = allowance + ?, remaining = remaining + ?
WHERE id = ? AND revoked_at IS NULL`, n, n, id)
		if err != nil {
			return err
		}
		if k, err := engine.Affected(res); err != nil {
			return err
		} else if k == 0 {
			return s.whyNotUpdated(ctx, tx, id)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO allowance_changes (id, link_id, added, reason, created_at) VALUES (?, ?, ?, ?, ?)`,
			engine.NewID(), id, n, reason, now)
		if err != nil {
			return err
		}
		return audit.Write(ctx, tx, a, s.TimeArg(stamp), ledger.ActionLinkAllowanceAdded, ledger.AuditTarget{Type: ledger.TargetLink, ID: id},
			audit.AllowanceAdded{Add: n, Reason: reason})
	})
}

// whyNotUpdated tells an unknown link from a revoked one after a
// conditional UPDATE matched no row. It reads with a lock (a current
// read): the UPDATE may have waited for the revocation's lock and judged
// the row it committed, which a plain read of the transaction's snapshot
// need not show (TiDB's snapshot is taken at BEGIN, before that wait).
func (s *DB) whyNotUpdated(ctx context.Context, tx *sql.Tx, id string) error {
	var revoked engine.TimeCol
	err := tx.QueryRowContext(ctx, `SELECT revoked_at FROM links WHERE id = ?`+s.D.LockRows, id).Scan(&revoked)
	switch {
	case engine.IsNoRows(err):
		return ledger.ErrNotFound
	case err != nil:
		return err
	case revoked.Valid:
		return ledger.ErrRevoked
	}
	// Matched nothing yet exists unrevoked: both statements read the
	// latest committed row under its lock, so nothing can do that. Say
	// so rather than guess.
	return fmt.Errorf("sqlcore: link %s neither updated nor revoked", id)
}

// AllowanceList lists the link's audited top-ups, newest first.
// Errors: ErrNotFound.
func (s *DB) AllowanceList(ctx context.Context, linkID string) ([]ledger.AllowanceChange, error) {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	var one int
	if err := s.Pool.QueryRowContext(ctx, `SELECT 1 FROM links WHERE id = ?`, linkID).Scan(&one); err != nil {
		if engine.IsNoRows(err) {
			return nil, ledger.ErrNotFound
		}
		return nil, s.Classify(err)
	}
	rows, err := s.Pool.QueryContext(ctx, `SELECT added, reason, created_at FROM allowance_changes
WHERE link_id = ? ORDER BY created_at DESC, id DESC`, linkID)
	if err != nil {
		return nil, s.Classify(err)
	}
	defer rows.Close()
	changes := []ledger.AllowanceChange{}
	for rows.Next() {
		var (
			c  ledger.AllowanceChange
			at engine.TimeCol
		)
		if err := rows.Scan(&c.Add, &c.Reason, &at); err != nil {
			return nil, s.Classify(err)
		}
		c.CreatedAt = at.T
		changes = append(changes, c)
	}
	if err := rows.Err(); err != nil {
		return nil, s.Classify(err)
	}
	return changes, nil
}
