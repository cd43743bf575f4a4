package ledger

import (
	"context"
	"testing"
	"time"
)

func TestAWaitBoundsTheSumOfARequestsCalls(t *testing.T) {
	now := time.Unix(0, 0)
	w := WaitOf(WithWait(context.Background()))
	w.clock = func() time.Time { return now }
	for i, c := range []struct {
		timeout, waited, want time.Duration
	}{
		{5 * time.Second, 2 * time.Second, 5 * time.Second},         // the first call sets the total
		{5 * time.Second, 2500 * time.Millisecond, 3 * time.Second}, // what the first left
		{5 * time.Second, 0, 500 * time.Millisecond},                // what the first two left
		{100 * time.Millisecond, 0, 100 * time.Millisecond},         // never more than a call's own timeout
		{5 * time.Second, 600 * time.Millisecond, 500 * time.Millisecond},
		{5 * time.Second, 0, -100 * time.Millisecond}, // spent: nothing left
	} {
		d, end := w.Begin(c.timeout)
		if d != c.want {
			t.Fatalf("call %d: Begin(%v) = %v, want %v", i, c.timeout, d, c.want)
		}
		now = now.Add(c.waited)
		end()
		end() // ending twice charges once
	}
	var none *Wait
	if d, end := none.Begin(time.Second); d != time.Second {
		t.Fatalf("nil Wait: Begin = %v, want the call's timeout", d)
	} else {
		end()
	}
	if WaitOf(context.Background()) != nil {
		t.Fatal("a context without a Wait has one")
	}
}

func TestAWaitRecordsItsClaimsBatch(t *testing.T) {
	w := WaitOf(WithWait(context.Background()))
	if n := w.ClaimBatch(); n != 0 {
		t.Fatalf("ClaimBatch before any claim = %d, want 0", n)
	}
	w.NoteClaimBatch(1)
	w.NoteClaimBatch(17) // the request's last claim counts
	if n := w.ClaimBatch(); n != 17 {
		t.Fatalf("ClaimBatch = %d, want 17", n)
	}
	var none *Wait
	none.NoteClaimBatch(3)
	if n := none.ClaimBatch(); n != 0 {
		t.Fatalf("nil Wait: ClaimBatch = %d, want 0", n)
	}
}
