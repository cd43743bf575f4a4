package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

// The stream delivery records of one process are written together
// (DB.RecordWindow): a record waits up to the window for others, and
// they go in one statement (webhooks off: recordAll, one UPDATE of every
// row) or one transaction (webhooks on: each record's events are decided
// from its row), so that a stream download costs one commit, its
// claim's, plus a share of one more, instead of two, and a hot link's
// thousands of downloads a second a few statements a second for their
// records. A single client downloading back to back otherwise pays for
// the second: its next claim's COMMIT queues behind the record's on the
// log. A record alone in its window is written as without one
// (recordAlone): webhooks off, its one UPDATE, autocommitted, not START,
// UPDATE and COMMIT. A statement or transaction that fails is split:
// each record is then written alone, so that one record cannot fail
// another. No record reads or
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

// writeRecords writes batch: with webhooks off in one UPDATE of every
// row (recordsSQL); with them on in one transaction, each record's own
// outcome (an unknown grant, a session's) kept apart from the
// transaction's. A lone record, and each record of a statement or
// transaction that failed, goes alone.
func (s *DB) writeRecords(batch []*pendingRecord) {
	ctx := context.Background()
	outcomes := make([]error, len(batch))
	err := errors.New("not tried")
	if len(batch) > 1 && !s.Webhooks {
		err = s.recordAll(ctx, batch)
	} else if len(batch) > 1 {
		err = s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
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

// recordAll writes the records of batch (one attempt of distinct grants
// each: a response is recorded once, by the process that served it) in
// one autocommitted UPDATE, recordStreamSQL for each row inside a CASE on
// its id, so that a window of records costs one statement whatever its
// size. Every record it matches changes its row (attempts_ended moves to
// its attempt), so the affected rows count the records it wrote; when
// that is fewer than the batch (a record of an unknown or refunded grant,
// of an attempt recorded before or not begun), it fails, and each record
// is then written alone, which explains its own outcome: one the UPDATE
// wrote finds its attempt recorded and changes nothing (nil).
func (s *DB) recordAll(ctx context.Context, batch []*pendingRecord) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	q, args := recordsSQL(batch, s.t)
	res, err := s.exec(ctx, q, args...)
	if err != nil {
		return err
	}
	n, err := affected(res)
	if err != nil {
		return err
	}
	if n != int64(len(batch)) {
		return fmt.Errorf("sqlcore: %d of %d delivery records matched", n, len(batch))
	}
	return nil
}

// recordsSQL is recordStreamSQL for every record of batch in one
// statement: each column a CASE on the grant's id whose branches are the
// single record's expressions, the condition likewise, and the rows by
// primary key. As in recordStreamSQL, no expression reads a column that
// the SET list assigned before it (MySQL assigns left to right).
func recordsSQL(batch []*pendingRecord, t func(time.Time) any) (string, []any) {
	type column struct {
		name, expr string
		args       func(r streamRecord) []any
	}
	at := func(r streamRecord) any { return t(r.at) }
	cols := []column{
		{"delivered_at", `CASE WHEN delivered_at IS NULL AND ? >= ? THEN ? ELSE delivered_at END`,
			func(r streamRecord) []any { return []any{r.d.BytesAcked, r.d.Size, at(r)} }},
		{"interrupted_at", `CASE WHEN ? < ? THEN ? ELSE interrupted_at END`,
			func(r streamRecord) []any { return []any{r.d.BytesAcked, r.d.Size, at(r)} }},
		{"delivery_status", `CASE WHEN delivery_status = 'complete' OR ? >= ? THEN 'complete' WHEN bytes_acked > 0 OR ? > 0 THEN 'partial' ELSE 'none' END`,
			func(r streamRecord) []any { return []any{r.d.BytesAcked, r.d.Size, r.d.BytesAcked} }},
		{"bytes_acked", `CASE WHEN bytes_acked >= ? THEN bytes_acked WHEN ? >= ? THEN ? ELSE ? END`,
			func(r streamRecord) []any { a, z := r.d.BytesAcked, r.d.Size; return []any{a, a, z, z, a} }},
		{"delivery_written", `CASE WHEN ? THEN delivery_written ELSE 1 END`,
			func(r streamRecord) []any { return []any{r.d.Measured} }},
		{"client_keys", `COALESCE(client_keys, ?)`,
			func(r streamRecord) []any { return []any{r.keys} }},
		{"attempt_until", `CASE WHEN attempts = ? THEN NULL ELSE attempt_until END`,
			func(r streamRecord) []any { return []any{r.d.Attempt} }},
		{"attempts_ended", `?`,
			func(r streamRecord) []any { return []any{r.d.Attempt} }},
	}
	var (
		b    strings.Builder
		args []any
	)
	b.WriteString("UPDATE grants SET ")
	for i, c := range cols {
		if i > 0 {
			b.WriteString(",\n  ")
		}
		b.WriteString(c.name + " = CASE id")
		for _, p := range batch {
			b.WriteString(" WHEN ? THEN " + c.expr)
			args = append(args, p.r.d.GrantID)
			args = append(args, c.args(p.r)...)
		}
		b.WriteString(" END")
	}
	b.WriteString("\nWHERE id IN (" + marks(len(batch)) + ")")
	for _, p := range batch {
		args = append(args, p.r.d.GrantID)
	}
	b.WriteString(" AND kind = 'stream' AND status = 'granted' AND CASE id")
	for _, p := range batch {
		b.WriteString(" WHEN ? THEN attempts >= ? AND attempts_ended < ?")
		args = append(args, p.r.d.GrantID, p.r.d.Attempt, p.r.d.Attempt)
	}
	b.WriteString(" END")
	return b.String(), args
}
