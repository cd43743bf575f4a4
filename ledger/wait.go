package ledger

import (
	"context"
	"sync"
	"time"
)

// A Wait bounds the total time one request spends waiting for the ledger,
// whatever number of calls it makes: the first call sets the bound (the
// ledger's own per-call timeout, GATEWAY_DB_TIMEOUT), and each call may
// wait only what the calls before it left. Without a Wait in its context
// each call has the whole timeout, as background work (sweeper, outbox)
// does.
type Wait struct {
	mu    sync.Mutex
	set   bool
	left  time.Duration
	clock func() time.Time
	batch int
}

type waitKey struct{}

// WithWait returns ctx carrying a fresh Wait for one request.
func WithWait(ctx context.Context) context.Context {
	return context.WithValue(ctx, waitKey{}, &Wait{clock: time.Now})
}

// WaitOf returns the Wait of ctx, or nil.
func WaitOf(ctx context.Context) *Wait {
	w, _ := ctx.Value(waitKey{}).(*Wait)
	return w
}

// Begin starts one call that may wait up to timeout on its own: it
// returns how long this call may wait (the rest of the request's total,
// the first call setting the total to timeout) and the function that ends
// the call and charges what it waited. A nil Wait gives timeout.
func (w *Wait) Begin(timeout time.Duration) (time.Duration, func()) {
	if w == nil {
		return timeout, func() {}
	}
	w.mu.Lock()
	if !w.set {
		w.set, w.left = true, timeout
	}
	d := min(w.left, timeout)
	w.mu.Unlock()
	start := w.clock()
	var once sync.Once
	return d, func() {
		once.Do(func() {
			spent := w.clock().Sub(start)
			w.mu.Lock()
			w.left -= spent
			w.mu.Unlock()
		})
	}
}

// WithoutWait returns ctx without its request's Wait: calls made with it
// have the ledger's whole timeout, as background work does. For work a
// request must finish for its own sake after its wait ran out (giving
// back a claim whose commit outcome is unknown).
func WithoutWait(ctx context.Context) context.Context {
	return context.WithValue(ctx, waitKey{}, (*Wait)(nil))
}

// ClaimBatch is how many claims shared the transaction that decided the
// request's last claim (1: a transaction of its own), 0 when it made none:
// for the access log.
func (w *Wait) ClaimBatch() int {
	if w == nil {
		return 0
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.batch
}

// NoteClaimBatch records n as ClaimBatch; the ledger calls it when a
// claim of the request is decided.
func (w *Wait) NoteClaimBatch(n int) {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.batch = n
	w.mu.Unlock()
}
