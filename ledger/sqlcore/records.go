package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

// The stream delivery records of one process are written together
// (DB.RecordWindow): a record waits up to the window for others, and
// they go in one transaction, so that a stream download costs one
// commit, its claim's, plus a share of one more, instead of two. A
// single client downloading back to back otherwise pays for the second:
// its next claim's COMMIT queues behind the record's on the log.
// With webhooks off the UPDATEs of a window go to the database as one
// query (Dialect.Batch, as a claim's writes: START, the UPDATEs, COMMIT
// in three round trips whatever their number), so that one process's
// records keep up with its downloads: one round trip per record capped
// them at about 3,000 a second on a hot link that served 5,600, and the
// records waiting grew without bound (92,579 after 20 s, the process at
// 937 MB). A record alone in its window is written as without one
// (recordAlone): webhooks off, its one UPDATE, autocommitted, not START,
// UPDATE and COMMIT. A transaction that fails is split: each record is
// then written alone, so that one record cannot fail another. No record reads or
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

// writeRecordsAtOnce writes the records of batch (webhooks off: each is
// its one UPDATE) in one transaction whose UPDATEs go as one query, and
// sets the outcome of each: nil when it changed its row, else what
// explains that it did not (unrecorded: an unknown grant, a session's,
// an attempt recorded before). It returns the transaction's error.
func (s *DB) writeRecordsAtOnce(ctx context.Context, batch []*pendingRecord, outcomes []error) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var counts []int64
	err := s.claimTx(ctx, sql.LevelDefault, nil, func(int, *sql.Rows) error { return nil }, func() (Writes, error) {
		w := Writes{Stmts: make([]Stmt, len(batch)), Commit: true, Seen: func(c []int64) { counts = c }}
		for i, p := range batch {
			w.Stmts[i] = Stmt{SQL: recordStreamSQL, Args: p.r.args, Rows: AnyRows}
		}
		return w, nil
	})
	if err != nil {
		return err
	}
	for i, p := range batch {
		if counts[i] == 0 {
			outcomes[i] = s.classify(s.unrecorded(ctx, s.db, p.r.d))
		}
	}
	return nil
}
