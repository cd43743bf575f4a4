package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// The stream delivery records of one process are written together
// (DB.RecordWindow): a record waits up to the window for others, and
// they go in one transaction, so that a stream download costs one
// commit, its claim's, plus a share of one more, instead of two. A
// single client downloading back to back otherwise pays for the second:
// its next claim's COMMIT queues behind the record's on the log.
// With webhooks off a window's records are one statement where the
// engine joins an UPDATE to a derived table (MySQL, MariaDB, TiDB:
// writeRecordsJoined), and elsewhere one transaction of one UPDATE each,
// so that one process's records keep up with its downloads: one round
// trip per record capped them at about 3,000 a second on a hot link that
// served 5,600, and the records waiting grew without bound (92,579 after
// 20 s, the process at 937 MB). A record alone in its window is written
// as without one (recordAlone): webhooks off, its one UPDATE,
// autocommitted. A write that fails is split: each record is then
// written alone, so that one record cannot fail another (an attempt's
// record lands once, so writing again what landed changes nothing). No
// record reads or
// locks the link's row (recordStreamSQL), so a transaction of records
// never holds up the claims of the links whose downloads it records
// (webhooks off: with them on, each event takes its link's row for the
// link's event sequence, as a claim's own events do).

// DefaultRecordWindow is DB.RecordWindow as the gateway sets it.
const DefaultRecordWindow = 50 * time.Millisecond

// maxRecordBatch caps the records of one transaction.
const maxRecordBatch = 256

// recordGroup holds the records waiting for the window to close.
type recordGroup struct {
	mu      sync.Mutex
	pending []*pendingRecord
	armed   bool // a flush is due
}

type pendingRecord struct {
	r    streamRecord
	done chan error
}

// add queues r and waits for its outcome (or ctx).
func (g *recordGroup) add(ctx context.Context, s *DB, r streamRecord) error {
	p := &pendingRecord{r: r, done: make(chan error, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, p)
	if !g.armed {
		g.armed = true
		time.AfterFunc(s.RecordWindow, func() { g.flush(s) })
	}
	g.mu.Unlock()
	select {
	case err := <-p.done:
		return err
	case <-ctx.Done():
		return ctx.Err() // it is written all the same
	}
}

// flush writes what waits, maxRecordBatch at a time.
func (g *recordGroup) flush(s *DB) {
	for {
		g.mu.Lock()
		batch := g.pending[:min(len(g.pending), maxRecordBatch)]
		g.pending = g.pending[len(batch):]
		if len(batch) == 0 {
			g.armed = false
			g.mu.Unlock()
			return
		}
		g.mu.Unlock()
		s.writeRecords(batch)
	}
}

// writeRecords writes batch in one transaction, each record's own outcome
// (an unknown grant, a session's) kept apart from the transaction's; a
// lone record, and each record of a transaction that failed, goes alone.
func (s *DB) writeRecords(batch []*pendingRecord) {
	ctx := context.Background()
	outcomes := make([]error, len(batch))
	err := errors.New("not tried")
	switch {
	case len(batch) > 1 && !s.Webhooks:
		err = s.writeRecordsAtOnce(ctx, batch, outcomes)
	case len(batch) > 1:
		err = s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			for i, p := range batch {
				err := s.recordInTx(ctx, tx, p.r)
				if err != nil && !errors.Is(err, ledger.ErrNotFound) && !errors.Is(err, ledger.ErrInvalid) {
					return err
				}
				outcomes[i] = err
			}
			return nil
		})
	}
	for i, p := range batch {
		if err != nil {
			outcomes[i] = s.recordAlone(ctx, p.r)
		}
		p.done <- outcomes[i]
	}
}

// writeRecordsAtOnce writes the records of batch (webhooks off: each is
// its one UPDATE) and sets the outcome of each: nil when it changed its
// row, else what explains that it did not (an unknown grant, a
// session's, an attempt not begun; one recorded before is nil). Where
// the engine has it (Dialect.JoinedUpdate) the records are one UPDATE
// joined to their values, autocommitted: one round trip, and a quarter
// of MariaDB's CPU of one UPDATE per record (63 against 256 µs a record,
// 10,000 records of a hot link). Elsewhere their UPDATEs go in one
// transaction, as one query where the dialect batches (claimTx). It
// returns the error of the write, after which each is written alone.
func (s *DB) writeRecordsAtOnce(ctx context.Context, batch []*pendingRecord, outcomes []error) error {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	if s.D.JoinedUpdate {
		return s.writeRecordsJoined(ctx, batch, outcomes)
	}
	var counts []int64
	err := s.claimTx(ctx, sql.LevelDefault, nil, func(int, *sql.Rows) error { return nil }, func() (engine.Writes, error) {
		w := engine.Writes{Stmts: make([]engine.Stmt, len(batch)), Commit: true, Seen: func(c []int64) { counts = c }}
		for i, p := range batch {
			w.Stmts[i] = engine.Stmt{SQL: recordStreamSQL, Args: p.r.args, Rows: engine.AnyRows}
		}
		return w, nil
	})
	if err != nil {
		return err
	}
	var unchanged []int
	for i := range batch {
		if counts[i] == 0 {
			unchanged = append(unchanged, i)
		}
	}
	return s.explainRecords(ctx, batch, unchanged, outcomes)
}

// writeRecordsJoined is writeRecordsAtOnce as one UPDATE joined to the
// records' values (recordStreamsSQL). A grant is updated once by a
// joined UPDATE however many of its rows match, so a second record of
// one grant in the window (a retry's attempt after the first's) waits
// for the next statement.
func (s *DB) writeRecordsJoined(ctx context.Context, batch []*pendingRecord, outcomes []error) error {
	idx := make([]int, 0, len(batch))
	var later []int
	seen := make(map[string]bool, len(batch))
	for i, p := range batch {
		if seen[p.r.d.GrantID] {
			later = append(later, i)
			continue
		}
		seen[p.r.d.GrantID] = true
		idx = append(idx, i)
	}
	args := make([]any, 0, 7*len(idx))
	for _, i := range idx {
		r := batch[i].r
		args = append(args, r.d.GrantID, r.d.BytesAcked, r.d.Size, s.TimeArg(r.at), r.d.Measured, r.keys, r.d.Attempt)
	}
	res, err := s.Exec(ctx, recordStreamsSQL(len(idx)), args...)
	if err != nil {
		return err
	}
	n, err := engine.Affected(res)
	if err != nil {
		return err
	}
	if n < int64(len(idx)) {
		if err := s.explainRecords(ctx, batch, idx, outcomes); err != nil {
			return err
		}
	}
	if len(later) > 0 {
		sub := make([]*pendingRecord, len(later))
		for j, i := range later {
			sub[j] = batch[i]
		}
		subOutcomes := make([]error, len(sub))
		if err := s.writeRecordsJoined(ctx, sub, subOutcomes); err != nil {
			return err
		}
		for j, i := range later {
			outcomes[i] = subOutcomes[j]
		}
	}
	return nil
}

// recordStreamsSQL is recordStreamSQL for n records at once: the same
// assignments and condition, each record's values a row of the derived
// table v (arguments per record: grant id, acked, size, at, measured,
// client keys, attempt). No assignment reads a column another assigns
// (see recordStreamSQL), so the order in which a multiple-table UPDATE
// makes them does not matter.
func recordStreamsSQL(n int) string {
	var b strings.Builder
	b.WriteString("UPDATE grants g JOIN (SELECT ? AS id, ? AS acked, ? AS size, ? AS at, ? AS measured, ? AS client_keys, ? AS k")
	for range n - 1 {
		b.WriteString("\nUNION ALL SELECT ?, ?, ?, ?, ?, ?, ?")
	}
	b.WriteString(`) v ON g.id = v.id SET
  g.delivered_at = CASE WHEN g.delivered_at IS NULL AND v.acked >= v.size THEN v.at ELSE g.delivered_at END,
  g.interrupted_at = CASE WHEN v.acked < v.size THEN v.at ELSE g.interrupted_at END,
  g.delivery_status = CASE WHEN g.delivery_status = 'complete' OR v.acked >= v.size THEN 'complete'
    WHEN g.bytes_acked > 0 OR v.acked > 0 THEN 'partial' ELSE 'none' END,
  g.bytes_acked = CASE WHEN g.bytes_acked >= v.acked THEN g.bytes_acked WHEN v.acked >= v.size THEN v.acked ELSE v.acked END,
  g.delivery_written = CASE WHEN v.measured THEN g.delivery_written ELSE 1 END,
  g.client_keys = COALESCE(g.client_keys, v.client_keys),
  g.attempt_until = CASE WHEN g.attempts = v.k THEN NULL ELSE g.attempt_until END,
  g.attempts_ended = v.k
WHERE g.kind = 'stream' AND g.status = 'granted' AND g.attempts >= v.k AND g.attempts_ended < v.k`)
	return b.String()
}

// explainRecords sets the outcome of each record of batch at idx that
// may not have changed its row, from one read of their grants: an
// unknown grant is ErrNotFound, a session's or an attempt not begun
// ErrInvalid, anything else (recorded before, refunded) nil, as
// unrecorded says of one.
func (s *DB) explainRecords(ctx context.Context, batch []*pendingRecord, idx []int, outcomes []error) error {
	if len(idx) == 0 {
		return nil
	}
	ids := make([]string, len(idx))
	for j, i := range idx {
		ids[j] = batch[i].r.d.GrantID
	}
	rows, err := s.Pool.QueryContext(ctx, `SELECT id, kind, attempts FROM grants WHERE id IN `+engine.Placeholders(len(ids)), engine.Anys(ids)...)
	if err != nil {
		return err
	}
	defer rows.Close()
	grants := make(map[string]recordedGrant, len(ids))
	for rows.Next() {
		var id string
		var g recordedGrant
		if err := rows.Scan(&id, &g.kind, &g.attempts); err != nil {
			return err
		}
		grants[id] = g
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, i := range idx {
		d := batch[i].r.d
		if g, ok := grants[d.GrantID]; ok {
			outcomes[i] = g.unrecorded(d)
		} else {
			outcomes[i] = ledger.ErrNotFound
		}
	}
	return nil
}
