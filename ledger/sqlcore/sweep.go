package sqlcore

import (
	"context"
	"database/sql"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// How work is handed out to several processes (the sweeper, retention,
// the webhook deliverers), the same on every engine: a plain read picks
// candidates, and a conditional UPDATE of those rows that repeats the
// read's condition takes them. The UPDATE is what decides: it reads the
// latest committed row under its lock on InnoDB and on TiDB (a current
// read), and under the write lock on SQLite, so a row that another taker
// changed first no longer matches and is not taken twice. What the
// UPDATE changed is learnt from its own result: the count it reports
// (ending sessions, expiring events), or, where the caller needs the
// rows, a lease id it wrote, read back in the same transaction (own
// writes are visible on every engine). SKIP LOCKED, where the engine
// honours it (Dialect.SkipLocked), only makes candidate reads of
// concurrent takers mostly disjoint; nothing rests on it.

// SessionSweep ends a bounded batch of sessions that expired, were revoked
// or spent their budget (spentSQL), deletes their slot rows, and marks
// the grant of each one it ended that is not complete as interrupted,
// with its grant.interrupted (interrupt), in the same transaction; then
// it clears a bounded batch of lapsed leases, then deletes a bounded
// batch of dead console sessions (console.go). However many sweepers run
// at once, in any number of processes, each session is ended once and
// counted once: the UPDATE that ends it is conditional on ended_at IS
// NULL, and the grant's mark on interrupted_at IS NULL.
func (s *DB) SessionSweep(ctx context.Context, limit int) (ledger.SweepResult, error) {
	if limit < 1 {
		limit = 100
	}
	var out ledger.SweepResult
	// Expired and lapsed by the database's clock, as every decision.
	now := s.DBNow()
	at := s.Stamp()
	grace := -ledger.SpentGrace.Microseconds()
	err := s.InTxWith(ctx, s.D.SweepTx, func(ctx context.Context, tx *sql.Tx) error {
		out.SessionsEnded = 0
		found, err := engine.ReadIDs(ctx, tx, limit,
			engine.Read(s.Q(s.D.ExpiredSessionsSQL)+s.D.SkipLockedSQL(), now, limit),
			// A plain read: SKIP LOCKED's FOR UPDATE would lock the slot
			// rows its NOT EXISTS reads, which requests acquire.
			engine.Read(s.Q(`SELECT id FROM sessions
WHERE ended_at IS NULL AND revoked_at IS NULL AND expires_at > {now} AND `+spentSQL+`
ORDER BY expires_at LIMIT ?`), now, now, grace, now, limit))
		if err != nil || len(found) == 0 {
			return err
		}
		ids := engine.Anys(found)
		in := engine.Placeholders(len(ids))
		args := append([]any{now}, ids...)
		res, err := tx.ExecContext(ctx, s.Q(`UPDATE sessions SET ended_at = {now}
WHERE id IN `+in+` AND ended_at IS NULL AND (expires_at <= {now} OR revoked_at IS NOT NULL OR `+spentSQL+`)`),
			append(args, now, now, grace, now)...)
		if err != nil {
			return err
		}
		n, err := engine.Affected(res)
		if err != nil || n == 0 {
			return err
		}
		out.SessionsEnded = int(n)
		err = s.interrupt(ctx, tx, at, `s.id IN `+in+` AND s.ended_at IS NOT NULL`, ids, sweepReason)
		if err != nil {
			return err
		}
		// The slots of every candidate go: a session another sweeper
		// ended first has lost them already, or loses them here once its
		// sweeper commits, either way for good.
		_, err = tx.ExecContext(ctx, `DELETE FROM session_slots WHERE session_id IN `+in, ids...)
		return err
	})
	if err != nil {
		return out, err
	}
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	res, err := s.Exec(ctx, s.Q(s.D.ClearLapsedSQL), now, limit)
	if err != nil {
		return out, err
	}
	n, _ := engine.Affected(res)
	out.LeasesCleared = int(n)
	err = s.InTxWith(ctx, s.D.SweepTx, func(ctx context.Context, tx *sql.Tx) error {
		n, err := s.PurgeConsoleSessions(ctx, tx, limit)
		out.ConsoleSessionsPurged = n
		return err
	})
	return out, err
}

// spentSQL is when a live session has spent its budget for good: wholly
// drawn, no slot leased (no request of it running, which could give back
// what it did not send), and no process's report for ledger.SpentGrace (a
// process gives back the budget it kept after a request with its report,
// about a second later). Arguments: now, now, -grace in microseconds, now.
const spentSQL = `bytes_drawn >= byte_budget
  AND (reported_at IS NULL OR reported_at <= {now+})
  AND NOT EXISTS (SELECT 1 FROM session_slots t
    WHERE t.session_id = sessions.id AND t.holder IS NOT NULL AND t.lease_until > {now})`
