package warm

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

// slotBook is a session's slot rows as the database keeps them: at most
// limit holders at once, shared by every process (Sessions) of a test.
type slotBook struct {
	mu       sync.Mutex
	limit    int
	holders  map[string]bool
	acquires int
}

func (b *slotBook) ledger() *fakeWarmLedger {
	var budget budgetBook
	f := budget.ledger(nil)
	f.acquire = func(_, holder string) error {
		b.mu.Lock()
		defer b.mu.Unlock()
		b.acquires++
		if len(b.holders) >= b.limit {
			return ledger.ErrNoSlot
		}
		b.holders[holder] = true
		return nil
	}
	f.release = func(_, holder string) error {
		b.mu.Lock()
		defer b.mu.Unlock()
		delete(b.holders, holder)
		return nil
	}
	return f
}

func (b *slotBook) held() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.holders)
}

// processes returns n warm-session sets (n gateway processes) over one
// database of slots.
func (b *slotBook) processes(n int, idle, wait time.Duration) []*Sessions {
	ws := make([]*Sessions, n)
	for i := range ws {
		w := newTestWarm(b.ledger(), 0)
		w.SlotIdle, w.SlotWait = idle, wait
		ws[i] = w
	}
	return ws
}

func cappedRow(limit int) *ledger.Session {
	x := *warmRow
	x.MaxConcurrency = limit
	return &x
}

// A client that never has more requests in flight than the cap is never
// refused, though each of its next requests reaches another process than
// its last: the slot a finished request left idle on one process goes
// back to the database before the next process stops waiting for it.
func TestASlotLeftIdleOnOneProcessServesTheNextRequestOnAnother(t *testing.T) {
	const limit = 4
	book := &slotBook{limit: limit, holders: map[string]bool{}}
	procs := book.processes(3, 20*time.Millisecond, 10*time.Second)
	x := cappedRow(limit)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, limit)
	for c := range limit {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 12 {
				w := procs[(c+i)%len(procs)]
				l, _, err := w.begin(ctx, x, 1)
				if err != nil {
					errs <- err
					return
				}
				w.end(x.ID, l, 0, true, carried{})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("a client at the cap was refused: %v", err)
	}
	for _, w := range procs {
		w.forget(func(*entry) bool { return true })
	}
	if n := book.held(); n != 0 {
		t.Errorf("%d slots still held after every process let go", n)
	}
}

// The cap holds: with every slot streaming, a request waits SlotWait and
// is refused, and a waiting request takes the slot a request of its own
// process leaves at once, without another round to the database.
func TestAFullCapRefusesAfterTheWaitAndAFreedSlotIsTakenAtOnce(t *testing.T) {
	const limit = 2
	book := &slotBook{limit: limit, holders: map[string]bool{}}
	w := book.processes(1, time.Hour, 50*time.Millisecond)[0]
	x := cappedRow(limit)
	ctx := context.Background()
	var held []*slotLease
	for range limit {
		l, _, err := w.begin(ctx, x, 1)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	if _, _, err := w.begin(ctx, x, 1); !errors.Is(err, ledger.ErrNoSlot) {
		t.Fatalf("a third request on a full cap of 2: %v, want ErrNoSlot", err)
	}
	if n := book.held(); n != limit {
		t.Fatalf("%d slots held, want %d", n, limit)
	}

	w.SlotWait = time.Hour // from here only a freed slot ends the wait
	got := make(chan error, 1)
	go func() {
		l, _, err := w.begin(ctx, x, 1)
		if err == nil {
			w.end(x.ID, l, 0, true, carried{})
		}
		got <- err
	}()
	waitFor(t, func() bool {
		book.mu.Lock()
		defer book.mu.Unlock()
		return book.acquires >= limit+2 // the refused one, then this one
	})
	book.mu.Lock()
	before := book.acquires
	book.mu.Unlock()
	w.end(x.ID, held[0], 0, true, carried{}) // kept idle for the next request here
	if err := <-got; err != nil {
		t.Fatalf("the waiting request: %v", err)
	}
	book.mu.Lock()
	after := book.acquires
	book.mu.Unlock()
	// It may have polled the database once more while the slot was
	// being freed, never taken a new slot: the cap stays at 2 holders.
	if after > before+1 || book.held() != limit {
		t.Errorf("acquires %d → %d, %d held: the waiter should take the idle slot of its process", before, after, book.held())
	}
	w.end(x.ID, held[1], 0, true, carried{})
	w.forget(func(*entry) bool { return true })
}

// Two requests waiting for a session's budget sleep until something
// changes: they never wake each other in turn.
func TestBudgetWaitersDoNotWakeEachOther(t *testing.T) {
	var book budgetBook
	w := newTestWarm(book.ledger(nil), 0)
	ctx, cancel := context.WithCancel(context.Background())
	x := warmRow
	holder, _, err := w.begin(ctx, x, 1) // sends, holding budget it will return
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 2 {
		l, _, err := w.begin(ctx, x, 1)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.takeBudget(ctx, x.ID)
			w.end(x.ID, l, 0, false, carried{})
		}()
	}
	e := func() *entry { w.mu.Lock(); defer w.mu.Unlock(); return w.byID[x.ID] }()
	waitFor(t, func() bool { w.mu.Lock(); defer w.mu.Unlock(); return e.waiting == 2 })
	time.Sleep(50 * time.Millisecond)
	w.mu.Lock()
	waits := e.budgetWaits
	w.mu.Unlock()
	if waits > 3 {
		t.Errorf("two idle waiters went to sleep %d times, want at most 3 (one each, one more when the second came)", waits)
	}
	cancel()
	wg.Wait()
	w.end(x.ID, holder, 0, false, carried{})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(time.Millisecond)
	}
}
