// Package warm is what a process keeps of a transfer session between two
// of its requests, so that a download manager making back-to-back range
// requests costs almost no database statements (docs/design.md, "Warm
// sessions"). For Idle after its last request ends, a process keeps
//
//   - the session row, for at most RowTTL after it was read: a
//     revocation made on another process takes effect here within that
//     time (one made through this process's admin API at once);
//   - the byte budget it drew but did not send, at most Keep, so a
//     crash loses no more than the one chunk it always could.
//
// Then it returns the budget. What the session's clients acknowledged
// (delivery evidence, SPEC §1) is gathered here beside the budget and
// reported with its returns (Reporter), at most about once every
// ReportEvery while requests run and when the session goes idle: never
// per range, and a crash loses at most that much evidence.
//
// A finished request's concurrency slot stays
// for SlotIdle only (still leased in the database, so the cap stays exact
// across processes): a slot kept idle here is one no other process can
// take, so a request that finds the session's slots all held waits up to
// SlotWait, longer than any process keeps one idle, before its 429. A
// client that never has more requests in flight than the cap is never
// refused, whichever process its next request reaches.
//
// The session meter (meter.go) is how the byte pipeline (gateway/deliver)
// spends a session's budget and slot while a response streams.
package warm

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/sessions"
)

// Reporter takes what a process gathered of a session since its last
// report: the budget it drew and gives back, and the ranges its clients
// acknowledged (ledger.Deliveries' SessionDeliveryRecord, which gives the
// budget back as BudgetReturn does and merges the ranges).
type Reporter interface {
	SessionDeliveryRecord(ctx context.Context, d ledger.SessionDelivery) error
}

// Config is what warm sessions need: the parts of the ledger they call
// and their knobs, all required: their defaults are config's
// (config.Sessions), applied once by config.ApplyDefaults. They know
// nothing else of the gateway.
type Config struct {
	Rows    ledger.Sessions
	Budget  ledger.Budget
	Slots   ledger.Slots
	Reports Reporter
	Log     *slog.Logger
	// Now is the server's clock, for a row read without the database's
	// (ReadAt zero).
	Now func() time.Time
	// Drew counts a budget draw (a metric); nil counts nothing.
	Drew func()
	// RowTTL is how stale a process's copy of the session row may be (the
	// delay of a revocation made on another process); Idle how long a
	// process keeps an idle session's budget; Keep how much drawn budget
	// it keeps; Lease a slot's lease; SlotIdle how long a finished
	// request's slot is kept for the session's next request; SlotWait how
	// long a request that finds every slot held waits for one (at least
	// twice SlotIdle).
	RowTTL, Idle, Lease, SlotIdle, SlotWait time.Duration
	Keep                                    int64
	// Chunk is the byte-budget draw size (sessions.DefaultChunk).
	Chunk int64
	// ReportEvery is how long at least passes between two reports of a
	// session's acknowledged ranges by this process while its requests
	// run; budget returns go when they are due.
	ReportEvery time.Duration
}

// Sessions is what this process keeps of the transfer sessions it serves.
type Sessions struct {
	Config
	// releaseWait is how long a request's end waits for its release
	// (releaseSoon); releasing counts the releases still running.
	releaseWait time.Duration
	releasing   sync.WaitGroup
	mu          sync.Mutex
	// byID holds every warm session; byHash finds one from a URL's token.
	byID   map[string]*entry
	byHash map[string]*entry
}

type entry struct {
	id, linkID, hash string
	row              *ledger.Session
	rowAt            time.Time     // monotonic: when row was read
	idle             []*slotLease  // slots of finished requests, for SlotIdle each
	freed            chan struct{} // closed when a slot goes idle (awaitSlot)
	budget           int64         // drawn, unsent, free for the next request
	drawn            chan struct{} // while a request of this process draws for it: closed when done
	busy             int           // requests of this process using it now
	waiting          int           // of them, waiting in takeBudget
	budgetWaits      int           // times one of them went to sleep there (tests)
	wake             chan struct{}
	timer            *time.Timer
	// acked are the ranges this process's requests of the session
	// acknowledged since its last report of them; unmeasured says some
	// are only what was written. reportedAt (monotonic) is when they were
	// last reported; flush reports them once ReportEvery has passed.
	acked      sessions.Coverage
	unmeasured bool
	reportedAt time.Time
	flush      *time.Timer
}

// New returns the warm sessions of one process.
func New(c Config) *Sessions {
	if c.Drew == nil {
		c.Drew = func() {}
	}
	c.SlotWait = max(c.SlotWait, 2*c.SlotIdle)
	return &Sessions{Config: c, releaseWait: releaseWait, byID: map[string]*entry{}, byHash: map[string]*entry{}}
}

// Session returns the session row for a token hash: the warm copy while
// it is fresh, otherwise a read from the ledger (which refreshes it).
// Errors: SessionGetByTokenHash's.
func (w *Sessions) Session(ctx context.Context, hash []byte) (*ledger.Session, error) {
	w.mu.Lock()
	if e := w.byHash[string(hash)]; e != nil && time.Since(e.rowAt) < w.RowTTL {
		x := *e.row
		if !x.ReadAt.IsZero() {
			// The database's clock now, as far as this copy can tell.
			x.ReadAt = x.ReadAt.Add(time.Since(e.rowAt))
		}
		w.mu.Unlock()
		return &x, nil
	}
	w.mu.Unlock()
	x, err := w.Rows.SessionGetByTokenHash(ctx, hash)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	e := w.byID[x.ID]
	if e != nil {
		e.row, e.rowAt = x, time.Now()
	}
	w.mu.Unlock()
	at := x.ReadAt
	if at.IsZero() {
		at = ledger.Micro(w.Now())
	}
	if e != nil && x.Refusal(at) != "" {
		// It died elsewhere: let go of what this process held for it.
		w.forget(func(e *entry) bool { return e.id == x.ID })
	}
	return x, nil
}

// begin starts a request of x: it takes an idle slot this process holds
// or leases a new one, and the budget kept from earlier requests.
func (w *Sessions) begin(ctx context.Context, x *ledger.Session, need int64) (*slotLease, int64, error) {
	w.mu.Lock()
	e := w.byID[x.ID]
	if e == nil {
		e = &entry{id: x.ID, linkID: x.LinkID, hash: string(x.TokenHash), row: x, rowAt: time.Now()}
		w.byID[x.ID] = e
		w.byHash[e.hash] = e
	}
	e.busy++
	if e.timer != nil {
		e.timer.Stop()
		e.timer = nil
	}
	// Only what this request can send: the rest stays for the session's
	// other requests here, which would otherwise each draw a chunk of
	// their own and give most of it back.
	budget := min(e.budget, need)
	e.budget -= budget
	l := e.takeIdle()
	w.mu.Unlock()
	if l != nil {
		return l, budget, nil
	}
	l, err := w.takeSlot(ctx, x.ID)
	if errors.Is(err, ledger.ErrNoSlot) {
		l, err = w.awaitSlot(ctx, x.ID)
	}
	if err != nil {
		w.end(x.ID, nil, budget, true, carried{})
		return nil, 0, err
	}
	return l, budget, nil
}

// takeIdle hands out a slot a finished request of this process left idle,
// if there is one still leased; the caller holds w.mu.
func (e *entry) takeIdle() *slotLease {
	for len(e.idle) > 0 {
		l := e.idle[len(e.idle)-1]
		e.idle = e.idle[:len(e.idle)-1]
		l.idleTimer.Stop()
		select {
		case <-l.lost:
			l.stop() // reclaimed by another process: try the next one
		default:
			return l
		}
	}
	return nil
}

// keepIdle keeps a finished request's slot for the session's next request
// here, for SlotIdle; the caller holds w.mu.
func (w *Sessions) keepIdle(e *entry, l *slotLease) {
	e.idle = append(e.idle, l)
	l.idleTimer = time.AfterFunc(w.SlotIdle, func() {
		w.mu.Lock()
		i := slices.Index(e.idle, l)
		if i >= 0 {
			e.idle = slices.Delete(e.idle, i, i+1)
		}
		w.mu.Unlock()
		if i >= 0 {
			w.release([]*slotLease{l}, ledger.SessionDelivery{SessionID: e.id})
		}
	})
	if e.freed != nil {
		close(e.freed)
		e.freed = nil
	}
}

// awaitSlot waits, up to SlotWait, for a slot of a session whose slots the
// database found all held: one a request of this process leaves idle, or
// one another process releases (none keeps one idle longer than
// SlotIdle). Errors: ErrNoSlot, when the cap stayed full; the context's.
func (w *Sessions) awaitSlot(ctx context.Context, sessionID string) (*slotLease, error) {
	deadline := time.Now().Add(w.SlotWait)
	pause := max(w.SlotIdle/8, time.Millisecond)
	for {
		w.mu.Lock()
		e := w.byID[sessionID]
		var freed <-chan struct{}
		if e != nil {
			if l := e.takeIdle(); l != nil {
				w.mu.Unlock()
				return l, nil
			}
			if e.freed == nil {
				e.freed = make(chan struct{})
			}
			freed = e.freed
		}
		w.mu.Unlock()
		wait := min(pause, time.Until(deadline))
		if wait <= 0 {
			return nil, ledger.ErrNoSlot
		}
		t := time.NewTimer(wait)
		select {
		case <-freed:
			t.Stop()
			continue // a slot of this process: take it above
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, context.Cause(ctx)
		}
		l, err := w.takeSlot(ctx, sessionID)
		if !errors.Is(err, ledger.ErrNoSlot) {
			return l, err
		}
		pause = min(2*pause, w.SlotIdle)
	}
}

// fill hands a request of the session up to most bytes of its budget:
// what this process keeps for the session, or else the yield of a draw of
// want bytes, one draw at a time per session. A request that finds the
// kept budget empty while another request draws waits for that draw and
// takes from what it brought: the rest of a draw, beyond most, is kept
// for the session's other requests here, so that concurrent small ranges
// share one draw instead of each drawing a chunk of its own. Errors:
// DrawBytes's, or the context's.
func (w *Sessions) fill(ctx context.Context, sessionID string, most, want int64) (int64, error) {
	w.mu.Lock()
	e := w.byID[sessionID]
	for e != nil && e.budget == 0 && e.drawn != nil {
		drawn := e.drawn
		w.mu.Unlock()
		select {
		case <-drawn:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		w.mu.Lock()
	}
	if e != nil && e.budget > 0 {
		got := min(e.budget, most)
		e.budget -= got
		w.mu.Unlock()
		return got, nil
	}
	var drawn chan struct{}
	if e != nil {
		drawn = make(chan struct{})
		e.drawn = drawn
	}
	w.mu.Unlock()
	// Detached from the request's cancellation (not from its wait): a
	// draw cut off by a client that hung up may still have committed, and
	// bytes drawn without anyone knowing are lost to the budget. What a
	// finished draw brought goes back when the request ends.
	got, err := w.Budget.BudgetDraw(context.WithoutCancel(ctx), sessionID, want)
	if err == nil {
		w.Drew()
	}
	if e == nil {
		return got, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	e.drawn = nil
	close(drawn)
	mine := min(got, most)
	e.budget += got - mine
	if e.budget > 0 {
		e.changed() // for requests waiting in takeBudget
	}
	return mine, err
}

// takeBudget hands the budget kept warm for a session to a request that
// found the database's share spent. While another request of this process
// is still sending, what it has not sent comes back when it ends: wait for
// that rather than stop short of the budget.
func (w *Sessions) takeBudget(ctx context.Context, sessionID string) int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	var in *entry // the entry this request counts itself waiting on
	defer func() {
		if in != nil {
			in.waiting--
		}
	}()
	for {
		e := w.byID[sessionID]
		if e == nil {
			return 0
		}
		if e.budget > 0 {
			b := e.budget
			e.budget = 0
			return b
		}
		others := e.waiting
		if in == e {
			others--
		}
		if e.busy-others <= 1 {
			return 0 // no other request here holds any: the budget is spent
		}
		if in != e {
			if in != nil {
				in.waiting-- // its entry was forgotten and made anew
			}
			in = e
			e.waiting++
			e.changed() // one waiter more: the others look again
		}
		ch := e.next()
		e.budgetWaits++
		w.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		w.mu.Lock()
		if ctx.Err() != nil {
			return 0
		}
	}
}

// next returns a channel closed at e's next change; the caller holds
// w.mu. Waiting is no change: two waiters never wake each other in turn.
func (e *entry) next() <-chan struct{} {
	if e.wake == nil {
		e.wake = make(chan struct{})
	}
	return e.wake
}

// changed wakes the requests waiting for e's budget; the caller holds w.mu.
func (e *entry) changed() {
	if e.wake != nil {
		close(e.wake)
		e.wake = nil
	}
}

// carried is what the client of a finished response acknowledged: the
// object's ranges, and whether they are measured (deliver.Result).
type carried struct {
	covered  sessions.Coverage
	measured bool
}

// end finishes a request. After a complete response the slot (unless
// lost, or the session's only one) and the unsent budget up to WarmBudget
// stay for the session's next request; the rest goes back at once. After
// a failed or cut response everything goes back at once, as SPEC §3 has
// it: a client that retries may well come back through another process.
// What the response's client acknowledged joins what the session's
// requests here gathered, reported when due (report).
func (w *Sessions) end(sessionID string, l *slotLease, unsent int64, complete bool, acked carried) {
	var (
		slots []*slotLease
		d     = ledger.SessionDelivery{SessionID: sessionID}
	)
	w.mu.Lock()
	e := w.byID[sessionID]
	switch {
	case e == nil:
		// Forgotten meanwhile (revoked through this process): what it
		// carried is reported at once, with the return.
		slots, d.Return = []*slotLease{l}, unsent
		d.Acked, d.Measured = acked.covered, acked.measured
	default:
		keepSlot := complete && e.row.MaxConcurrency > 1
		if l != nil {
			select {
			case <-l.lost:
				l.stop()
			default:
				if keepSlot {
					w.keepIdle(e, l)
				} else {
					slots = append(slots, l)
				}
			}
		}
		var give int64
		if complete {
			e.budget, give = sessions.Keep(e.budget+unsent, w.Keep)
		} else {
			// Nothing is kept after a failed or cut response, not even
			// the rest of a draw it made for the session's others: the
			// client may well retry through another process.
			give, e.budget = unsent+e.budget, 0
		}
		e.gather(acked)
		d = w.report(e, give, false)
		e.busy--
		e.changed()
		if e.busy == 0 {
			e.timer = time.AfterFunc(w.Idle, func() { w.cool(e) })
		}
	}
	w.mu.Unlock()
	w.releaseSoon(slots, d)
}

// releaseWait bounds how long a request that ended waits for its release
// (releaseSoon) before its handler returns.
const releaseWait = 500 * time.Millisecond

// releaseSoon releases slots and sends d (release) for a request that
// ended, waiting for it at most releaseWait. On a database that answers,
// the release lands before the handler returns, so the client's next
// request finds the slot free and the budget back. On one that stalls,
// the handler returns and the release goes on in the background (Flush
// waits for it): net/http reads a kept-alive connection's next request
// only once the handler returned, so a release waiting out the ledger's
// timeout held that request for as long, on top of its own wait (a frozen
// database held a stream GET for two timeouts behind a session range on
// its connection).
func (w *Sessions) releaseSoon(slots []*slotLease, d ledger.SessionDelivery) {
	if !slices.ContainsFunc(slots, func(l *slotLease) bool { return l != nil }) && d.Return <= 0 && d.Acked.IsEmpty() {
		return // nothing to release or send
	}
	done := make(chan struct{})
	w.releasing.Go(func() {
		defer close(done)
		w.release(slots, d)
	})
	t := time.NewTimer(w.releaseWait)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}

// gather adds what a response's client acknowledged to what e's requests
// gathered since the last report; the caller holds w.mu.
func (e *entry) gather(acked carried) {
	if acked.covered.IsEmpty() {
		return
	}
	e.acked.Union(acked.covered)
	e.unmeasured = e.unmeasured || !acked.measured
}

// report is what to send the ledger now for e, with give bytes of budget
// to return: the ranges gathered too when now says so (the session goes
// idle, or is let go) or the last report of them is ReportEvery old, so
// that a busy session's evidence costs a report a second, never one per
// range. Ranges that must wait are sent by a timer once they may. The
// caller holds w.mu.
func (w *Sessions) report(e *entry, give int64, now bool) ledger.SessionDelivery {
	d := ledger.SessionDelivery{SessionID: e.id, Return: give}
	if e.acked.IsEmpty() {
		return d
	}
	wait := w.ReportEvery - time.Since(e.reportedAt)
	if !now && wait > 0 {
		if e.flush == nil {
			e.flush = time.AfterFunc(wait, func() { w.flushAcked(e) })
		}
		return d
	}
	d.Acked, d.Measured = e.acked, !e.unmeasured
	e.acked, e.unmeasured = sessions.Coverage{}, false
	e.reportedAt = time.Now()
	if e.flush != nil {
		e.flush.Stop()
		e.flush = nil
	}
	return d
}

// flushAcked reports the ranges e gathered that waited for ReportEvery.
func (w *Sessions) flushAcked(e *entry) {
	w.mu.Lock()
	if w.byID[e.id] != e {
		w.mu.Unlock()
		return // let go of: its ranges went with that report
	}
	e.flush = nil
	d := w.report(e, 0, true)
	w.mu.Unlock()
	w.release(nil, d)
}

// cool lets go of a session nobody used for WarmIdle.
func (w *Sessions) cool(e *entry) {
	w.mu.Lock()
	if e.busy > 0 || w.byID[e.id] != e {
		w.mu.Unlock()
		return
	}
	w.drop(e)
	slots, d := e.idle, w.report(e, e.budget, true)
	e.idle, e.budget = nil, 0
	w.mu.Unlock()
	w.release(slots, d)
}

// forget drops every warm session that match selects, releasing what it
// held: revocations through this process take effect here at once.
func (w *Sessions) forget(match func(*entry) bool) {
	type held struct {
		slots []*slotLease
		d     ledger.SessionDelivery
	}
	var all []held
	w.mu.Lock()
	for _, e := range w.byID {
		if !match(e) {
			continue
		}
		w.drop(e)
		e.changed() // a waiter finds it gone and stops waiting
		if e.timer != nil {
			e.timer.Stop()
		}
		all = append(all, held{e.idle, w.report(e, e.budget, true)})
		e.idle, e.budget = nil, 0
	}
	w.mu.Unlock()
	for _, h := range all {
		w.release(h.slots, h.d)
	}
}

// Flush releases every slot, returns every byte this process keeps for
// idle sessions and reports what their clients acknowledged, and waits
// for the releases of ended requests still running; serve calls it once
// the listeners drained.
func (w *Sessions) Flush() {
	w.forget(func(*entry) bool { return true })
	w.releasing.Wait()
}

// ForgetLink lets go of the sessions of a link revoked through this
// process: the revocation takes effect here at once.
func (w *Sessions) ForgetLink(linkID string) {
	w.forget(func(e *entry) bool { return e.linkID == linkID })
}

// ForgetSession lets go of a session revoked through this process.
func (w *Sessions) ForgetSession(id string) { w.forget(func(e *entry) bool { return e.id == id }) }

func (w *Sessions) drop(e *entry) {
	delete(w.byID, e.id)
	if w.byHash[e.hash] == e {
		delete(w.byHash, e.hash)
	}
}

// release sends the report d (the budget it returns, the ranges it
// carries) and frees slots, the report first: a request waiting for a
// slot (awaitSlot) takes it the moment it is released, and must find the
// budget the slot's request held already back. It runs detached from any
// request: a client that left must not leave a slot behind. A report
// with nothing in it is not sent.
func (w *Sessions) release(slots []*slotLease, d ledger.SessionDelivery) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if d.Return > 0 || !d.Acked.IsEmpty() {
		if err := w.Reports.SessionDeliveryRecord(ctx, d); err != nil {
			w.Log.WarnContext(ctx, "budget return and delivery report failed", "session_id", d.SessionID, "bytes", d.Return,
				"ranges", d.Acked.Len(), "err", err)
		}
	}
	for _, l := range slots {
		if l == nil {
			continue
		}
		l.stop()
		if err := w.Slots.SlotRelease(ctx, l.sessionID, l.holder); err != nil {
			w.Log.WarnContext(ctx, "slot release failed; the lease will lapse", "session_id", l.sessionID, "err", err)
		}
	}
}
