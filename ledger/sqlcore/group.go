package sqlcore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// Group claims (SPEC §1): claims that arrive while this process's claim
// transaction is in flight wait, and go together in the next one, the way
// a database's group commit makes the commits that arrive during one log
// flush share the next. A claim that finds no transaction in flight goes
// at once, in a transaction of its own, on its caller's goroutine: no
// timer, no wait for company. The queue only gathers; the transaction
// decides (claimtx.go), under the rows' locks, by the database's clock.

// group is the queue of claims waiting for the transaction in flight.
type group struct {
	mu    sync.Mutex
	busy  bool     // a claim transaction of this process is in flight
	queue []*claim // waiting, in arrival order
}

// claimBatch is the cap of a batch: ClaimBatch within 1..MaxClaimBatch.
func (s *DB) claimBatch() int {
	return min(max(s.ClaimBatch, 1), MaxClaimBatch)
}

// submit has c decided and returns once it is, or once its deadline (the
// request's ledger.Wait) passed while it waited in the queue: then it is
// ErrUnavailable and not claimed. A claim is decided in a batch, or alone
// when it found no transaction in flight, when grouping is off
// (ClaimBatch 1), or when its batch failed (deadlock, lock-wait timeout,
// lost connection, a claim's own error): failures isolate to the claim
// that has them, and each claim's deadline stays its own.
func (s *DB) submit(ctx context.Context, c *claim) {
	ctx, cancel := s.Detached(ctx)
	defer cancel()
	defer func() {
		if w := ledger.WaitOf(ctx); w != nil && c.batch > 0 {
			w.NoteClaimBatch(c.batch)
		}
	}()
	if s.claimBatch() == 1 {
		s.decideAlone(ctx, c, 0)
		return
	}
	g := &s.group
	g.mu.Lock()
	if !g.busy {
		g.busy = true
		g.mu.Unlock()
		defer s.next()
		s.decideAlone(ctx, c, 0)
		return
	}
	c.queued = time.Now()
	c.deadline, _ = ctx.Deadline()
	c.done = make(chan struct{})
	g.queue = append(g.queue, c)
	g.mu.Unlock()
	_ = s.hook(ClaimQueued, c.req) // tests only: a queued claim cannot fail here
	select {
	case <-c.done:
	case <-ctx.Done():
		g.mu.Lock()
		for i, q := range g.queue {
			if q == c {
				g.queue = append(g.queue[:i], g.queue[i+1:]...)
				g.mu.Unlock()
				c.err = fmt.Errorf("%w: the claim waited in the queue past its deadline: %v", ledger.ErrUnavailable, ctx.Err())
				return
			}
		}
		g.mu.Unlock()
		// Taken into a transaction, whose deadline is the earliest of its
		// claims': it ends by this one's.
		<-c.done
	}
	if c.alone {
		s.decideAlone(ctx, c, c.waited)
	}
}

// next runs the batches that queued while a transaction was in flight,
// on a goroutine of its own, until the queue is empty.
func (s *DB) next() {
	if batch, more := s.take(); more {
		go s.runBatches(batch)
	}
}

// take takes the next batch off the queue, or, when the queue is empty,
// marks the group idle and reports false. A batch is the oldest claims up
// to ClaimBatch; a claim whose deadline passed is answered ErrUnavailable
// instead, and a mint whose idempotency key another claim of the batch
// has waits for the next one (one key, one session: the key's owner is
// then known).
func (s *DB) take() ([]*claim, bool) {
	g := &s.group
	g.mu.Lock()
	defer g.mu.Unlock()
	now := time.Now()
	var (
		batch []*claim
		rest  []*claim
		keys  = map[string]bool{}
		limit = s.claimBatch()
	)
	for _, c := range g.queue {
		switch k := c.key(); {
		case !c.deadline.IsZero() && !now.Before(c.deadline):
			c.err = fmt.Errorf("%w: the claim waited in the queue past its deadline", ledger.ErrUnavailable)
			close(c.done)
		case len(batch) == limit, k != "" && keys[k]:
			rest = append(rest, c)
		default:
			if k != "" {
				keys[k] = true
			}
			c.waited = now.Sub(c.queued)
			batch = append(batch, c)
		}
	}
	g.queue = append(g.queue[:0:0], rest...)
	if len(batch) == 0 && len(g.queue) == 0 {
		g.busy = false
		return nil, false
	}
	return batch, true
}

// runBatches decides batch, then the batches that queued meanwhile, one
// transaction at a time, until the queue is empty.
func (s *DB) runBatches(batch []*claim) {
	for more := true; more; batch, more = s.take() {
		if len(batch) > 0 {
			s.decideBatch(batch)
		}
	}
}

// decideBatch runs batch's transaction, with the earliest deadline of its
// claims (none waits past its own), and hands each claim its outcome: a
// claim the batch could not decide, or every claim when the transaction
// failed, goes back to its caller to be decided alone; when COMMIT failed,
// the granted claims are reconciled or stay ErrAmbiguous.
func (s *DB) decideBatch(batch []*claim) {
	deadline := batch[0].deadline
	for _, c := range batch {
		if !c.deadline.IsZero() && (deadline.IsZero() || c.deadline.Before(deadline)) {
			deadline = c.deadline
		}
	}
	if deadline.IsZero() {
		deadline = time.Now().Add(s.CallTimeout())
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	err := s.guarded(func() error { return s.decideClaims(ctx, batch) })
	switch {
	case errors.Is(err, ledger.ErrAmbiguous):
		s.reconcile(ctx, batch, err)
	case err != nil:
		for _, c := range batch {
			c.reset()
			c.alone = true
		}
	}
	if s.OnClaimBatch != nil {
		var waits []time.Duration
		for _, c := range batch {
			if !c.alone {
				waits = append(waits, c.waited)
			}
		}
		s.observe(len(batch), waits, err)
	}
	for _, c := range batch {
		close(c.done)
	}
}

// decideAlone decides c in a transaction of its own on its caller's
// goroutine, retrying deadlocks, lock-wait timeouts and busy files as any
// transaction (retry). waited is how long it queued before.
func (s *DB) decideAlone(ctx context.Context, c *claim, waited time.Duration) {
	c.reset()
	err := s.Retry(ctx, func() error {
		err := s.guarded(func() error { return s.decideClaims(ctx, []*claim{c}) })
		if errors.Is(err, ledger.ErrAmbiguous) {
			return &engine.CommitError{Err: err} // never run again
		}
		return err
	})
	if s.OnClaimBatch != nil {
		s.observe(1, []time.Duration{waited}, err)
	}
	var ce *engine.CommitError
	switch {
	case errors.As(err, &ce):
		c.err = ce.Err
		s.reconcile(ctx, []*claim{c}, ce.Err)
	case err != nil:
		c.reset()
		c.err = s.Classify(err)
	}
}

// guarded runs fn, turning a panic into its error: a claim that panics
// fails its transaction, never the queue or another claim.
func (s *DB) guarded(fn func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("sqlcore: claim transaction panicked: %v", r)
		}
	}()
	return fn()
}

// observe reports one claim transaction to OnClaimBatch: its size, the
// queue waits of the claims it decided, its error.
func (s *DB) observe(size int, queueWaits []time.Duration, err error) {
	if s.OnClaimBatch != nil {
		var ce *engine.CommitError
		if errors.As(err, &ce) {
			err = ce.Err
		}
		s.OnClaimBatch(ClaimBatchStats{Size: size, QueueWaits: queueWaits, Err: err})
	}
}
