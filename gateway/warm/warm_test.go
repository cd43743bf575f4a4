package warm

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/sessions"
)

// Function-field fakes of the ledger parts warm sessions use.
type fakeWarmLedger struct {
	draw    func(id string, want int64) (int64, error)
	ret     func(id string, n int64) error
	report  func(d ledger.SessionDelivery)
	acquire func(id, holder string) error
	release func(id, holder string) error
	renew   func(id, holder string) error // nil: renewed
}

func (f *fakeWarmLedger) SessionGetByTokenHash(context.Context, []byte) (*ledger.Session, error) {
	return nil, ledger.ErrNotFound
}
func (f *fakeWarmLedger) BudgetDraw(_ context.Context, id string, want int64) (int64, error) {
	return f.draw(id, want)
}
func (f *fakeWarmLedger) BudgetReturn(context.Context, string, int64) error {
	panic("warm sessions return budget with their delivery reports")
}
func (f *fakeWarmLedger) SessionDeliveryRecord(_ context.Context, d ledger.SessionDelivery) error {
	if f.report != nil {
		f.report(d)
	}
	return f.ret(d.SessionID, d.Return)
}
func (f *fakeWarmLedger) SlotAcquire(_ context.Context, id, holder string, _ time.Duration) error {
	return f.acquire(id, holder)
}
func (f *fakeWarmLedger) SlotRenew(_ context.Context, id, holder string, _ time.Duration) error {
	if f.renew != nil {
		return f.renew(id, holder)
	}
	return nil
}
func (f *fakeWarmLedger) SlotRelease(_ context.Context, id, holder string) error {
	return f.release(id, holder)
}

// budgetBook is a session's budget as a fake ledger keeps it.
type budgetBook struct {
	draws, drawn, returned, slots, released atomic.Int64
}

func (b *budgetBook) ledger(gate <-chan struct{}) *fakeWarmLedger {
	return &fakeWarmLedger{
		draw: func(_ string, want int64) (int64, error) {
			if gate != nil {
				<-gate
			}
			b.draws.Add(1)
			b.drawn.Add(want)
			return want, nil
		},
		ret:     func(_ string, n int64) error { b.returned.Add(n); return nil },
		acquire: func(string, string) error { b.slots.Add(1); return nil },
		release: func(string, string) error { b.released.Add(1); return nil },
	}
}

func newTestWarm(l *fakeWarmLedger, keep int64) *Sessions {
	w := New(Config{Rows: l, Budget: l, Slots: l, Reports: l,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), RowTTL: time.Second, Idle: time.Hour, Lease: time.Minute, Keep: keep,
		// A finished request's slot stays idle until the test lets go:
		// its release never races the test's count.
		SlotIdle: time.Hour, SlotWait: 2 * time.Hour, Chunk: sessions.DefaultChunk, ReportEvery: time.Second})
	// An ended request's release lands before end returns, as it does
	// in production whenever the database answers within releaseWait:
	// the tests count it right after.
	w.releaseWait = time.Hour
	return w
}

var warmRow = &ledger.Session{ID: "s1", LinkID: "l1", TokenHash: []byte("h1"), ByteBudget: 1 << 40, MaxConcurrency: 64}

// One request runs through begin, its draws and end, as the session meter does.
func warmRequest(t *testing.T, w *Sessions, need, ahead int64, complete bool) {
	t.Helper()
	ctx := context.Background()
	lease, have, err := w.begin(ctx, warmRow, need)
	if err != nil {
		t.Error(err)
		return
	}
	sent := int64(0)
	for sent < need {
		if have == 0 {
			got, err := w.fill(ctx, warmRow.ID, need-sent, max(need-sent, ahead))
			if err != nil {
				t.Error(err)
				break
			}
			have = got
		}
		k := min(have, need-sent)
		sent += k
		have -= k
	}
	w.end(warmRow.ID, lease, have, complete, carried{})
}

func TestConcurrentSmallRangesOfASessionShareOneDraw(t *testing.T) {
	var book budgetBook
	gate := make(chan struct{})
	w := newTestWarm(book.ledger(gate), 8<<20)
	const n, size, ahead = 16, 64 << 10, 4 << 20
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { warmRequest(t, w, size, ahead, true) })
	}
	time.Sleep(10 * time.Millisecond) // let them queue on the one draw; correctness does not depend on it
	close(gate)
	wg.Wait()
	if d := book.draws.Load(); d != 1 {
		t.Errorf("%d concurrent %d-byte ranges made %d draws, want 1: the others wait for it and take from what it brought", n, size, d)
	}
	w.forget(func(*entry) bool { return true })
	// Everything drawn and not sent goes back; every slot taken is released.
	if sent := int64(n * size); book.drawn.Load()-book.returned.Load() != sent {
		t.Errorf("drawn %d, returned %d: the session paid %d for %d bytes sent", book.drawn.Load(), book.returned.Load(), book.drawn.Load()-book.returned.Load(), sent)
	}
	if book.slots.Load() != book.released.Load() {
		t.Errorf("%d slots taken, %d released", book.slots.Load(), book.released.Load())
	}
}

func TestACutResponseGivesBackAllItsProcessKept(t *testing.T) {
	var book budgetBook
	w := newTestWarm(book.ledger(nil), 8<<20)
	// A complete small range leaves the rest of its draw warm...
	warmRequest(t, w, 64<<10, 4<<20, true)
	if book.returned.Load() != 0 {
		t.Fatalf("a complete response gave back %d at once, want its rest kept warm", book.returned.Load())
	}
	// ...and a cut one gives back everything the process kept: the
	// client may retry through another process.
	ctx := context.Background()
	lease, have, err := w.begin(ctx, warmRow, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	w.end(warmRow.ID, lease, have, false, carried{})
	if got, want := book.returned.Load(), book.drawn.Load()-64<<10; got != want {
		t.Errorf("after a cut response %d returned, want %d (all drawn but the 64 KiB sent)", got, want)
	}
	if book.released.Load() != book.slots.Load() {
		t.Errorf("after a cut response %d of %d slots released", book.released.Load(), book.slots.Load())
	}
}

func TestAProcessKeepsAtMostItsShareWarm(t *testing.T) {
	var book budgetBook
	const keep = 1 << 20
	w := newTestWarm(book.ledger(nil), keep)
	warmRequest(t, w, 64<<10, 4<<20, true)
	kept := book.drawn.Load() - 64<<10 - book.returned.Load()
	if kept != keep {
		t.Errorf("a process kept %d warm after a complete response, want at most %d (the rest returned at once)", kept, keep)
	}
}

// reports is what a fake ledger was told of a session's deliveries.
type reports struct {
	mu  sync.Mutex
	all []ledger.SessionDelivery
}

func (r *reports) add(d ledger.SessionDelivery) {
	r.mu.Lock()
	r.all = append(r.all, d)
	r.mu.Unlock()
}

// withRanges are the reports that carried acknowledged ranges.
func (r *reports) withRanges() []ledger.SessionDelivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ledger.SessionDelivery
	for _, d := range r.all {
		if !d.Acked.IsEmpty() {
			out = append(out, d)
		}
	}
	return out
}

// ackedRequest runs one complete request of the session through begin
// and end whose client acknowledged rg.
func ackedRequest(t *testing.T, w *Sessions, rg sessions.Range, measured bool) {
	t.Helper()
	lease, have, err := w.begin(context.Background(), warmRow, 0)
	if err != nil {
		t.Fatal(err)
	}
	var c sessions.Coverage
	c.Add(rg)
	w.end(warmRow.ID, lease, have, true, carried{covered: c, measured: measured})
}

func TestAcknowledgedRangesGoWithTheReportsAtMostOnceEveryReportEvery(t *testing.T) {
	var book budgetBook
	var seen reports
	l := book.ledger(nil)
	l.report = seen.add
	w := newTestWarm(l, 8<<20)
	w.ReportEvery = time.Hour
	// The first response's ranges go at once: nothing was reported yet.
	ackedRequest(t, w, sessions.Range{Start: 0, Length: 100}, true)
	if got := seen.withRanges(); len(got) != 1 || got[0].Acked.Bytes(1<<40) != 100 || !got[0].Measured {
		t.Fatalf("reports after the first response: %+v, want one with its 100 bytes, measured", got)
	}
	// A hundred more within the hour: gathered, not reported.
	for i := range 100 {
		ackedRequest(t, w, sessions.Range{Start: int64(1000 + 100*i), Length: 100}, i != 50)
	}
	if got := seen.withRanges(); len(got) != 1 {
		t.Fatalf("%d reports with ranges after 101 responses within ReportEvery, want 1: never one per range", len(got))
	}
	// Let go (as the idle second or a shutdown does): one report with all
	// of them, joined, marked unmeasured by the one response that was.
	w.Flush()
	got := seen.withRanges()
	if len(got) != 2 {
		t.Fatalf("%d reports with ranges after the flush, want 2", len(got))
	}
	last := got[1]
	if last.Acked.Len() != 1 || last.Acked.Bytes(1<<40) != 100*100 || last.Measured {
		t.Errorf("the flush's report: %d spans, %d bytes, measured %v; want the 100 ranges joined into one span of 10000 bytes, unmeasured",
			last.Acked.Len(), last.Acked.Bytes(1<<40), last.Measured)
	}
	// What was drawn and not sent went back with it.
	if book.drawn.Load() != book.returned.Load() {
		t.Errorf("drawn %d, returned %d after the flush", book.drawn.Load(), book.returned.Load())
	}
}

func TestRangesThatWaitedAreReportedOnceReportEveryPassed(t *testing.T) {
	var book budgetBook
	var seen reports
	l := book.ledger(nil)
	l.report = seen.add
	w := newTestWarm(l, 8<<20)
	w.ReportEvery = 50 * time.Millisecond
	ackedRequest(t, w, sessions.Range{Start: 0, Length: 10}, true)
	ackedRequest(t, w, sessions.Range{Start: 20, Length: 10}, true) // waits: the first was just reported
	if got := seen.withRanges(); len(got) != 1 {
		t.Fatalf("%d reports with ranges, want 1 before ReportEvery passed", len(got))
	}
	// No request ends any more and the session is not idle long enough
	// to cool (Idle is an hour): the timer sends what waited.
	waitFor(t, func() bool { return len(seen.withRanges()) == 2 })
	if got := seen.withRanges()[1]; got.Acked.Bytes(100) != 10 || got.Acked.Spans()[0].Start != 20 {
		t.Errorf("the timer's report carried %v, want the second range", got.Acked.Spans())
	}
	w.Flush()
	if got := seen.withRanges(); len(got) != 2 {
		t.Errorf("%d reports with ranges after the flush, want still 2: nothing was left to report", len(got))
	}
}

// A request's end does not wait out a stalled database for its release:
// the handler returns (so the next request on its kept-alive connection
// is read), and the release lands once the database answers, before Flush
// returns.
func TestARequestsEndDoesNotWaitOutAStalledRelease(t *testing.T) {
	var book budgetBook
	stalled := make(chan struct{})
	l := book.ledger(nil)
	ret := l.ret
	l.ret = func(id string, n int64) error { <-stalled; return ret(id, n) }
	w := newTestWarm(l, 8<<20)
	w.releaseWait = 10 * time.Millisecond
	ctx := context.Background()
	lease, _, err := w.begin(ctx, warmRow, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	have, err := w.fill(ctx, warmRow.ID, 1<<20, 4<<20) // drawn, none of it sent
	if err != nil || have == 0 {
		t.Fatalf("fill = %d, %v", have, err)
	}
	ended := make(chan struct{})
	go func() {
		w.end(warmRow.ID, lease, have, false, carried{}) // cut: everything goes back, the slot too
		close(ended)
	}()
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		close(stalled)
		t.Fatal("end waited for a release the database never answered")
	}
	if book.returned.Load() != 0 || book.released.Load() != 0 {
		t.Fatalf("returned %d and released %d slots while the database stalled", book.returned.Load(), book.released.Load())
	}
	close(stalled)
	w.Flush()
	if got, want := book.returned.Load(), book.drawn.Load(); got != want {
		t.Errorf("after the database answered and Flush, %d returned, want %d (all drawn, none sent)", got, want)
	}
	if book.released.Load() != book.slots.Load() {
		t.Errorf("after the database answered and Flush, %d of %d slots released", book.released.Load(), book.slots.Load())
	}
}
