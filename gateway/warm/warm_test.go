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
	acquire func(id, holder string) error
	release func(id, holder string) error
}

func (f *fakeWarmLedger) SessionGetByTokenHash(context.Context, []byte) (*ledger.Session, error) {
	return nil, ledger.ErrNotFound
}
func (f *fakeWarmLedger) BudgetDraw(_ context.Context, id string, want int64) (int64, error) {
	return f.draw(id, want)
}
func (f *fakeWarmLedger) BudgetReturn(_ context.Context, id string, n int64) error {
	return f.ret(id, n)
}
func (f *fakeWarmLedger) SlotAcquire(_ context.Context, id, holder string, _ time.Duration) error {
	return f.acquire(id, holder)
}
func (f *fakeWarmLedger) SlotRenew(context.Context, string, string, time.Duration) error { return nil }
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
	return New(Config{Rows: l, Budget: l, Slots: l,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), RowTTL: time.Second, Idle: time.Hour, Lease: time.Minute, Keep: keep,
		SlotIdle: DefaultSlotIdle, SlotWait: DefaultSlotWait, Chunk: sessions.DefaultChunk})
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
	w.end(warmRow.ID, lease, have, complete)
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
	w.end(warmRow.ID, lease, have, false)
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
