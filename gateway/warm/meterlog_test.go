package warm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/dlgate/dlgate/gateway/deliver"
	"github.com/dlgate/dlgate/ledger"
)

// A range's "session bytes sent" line carries the session's attributes
// inline, then what was sent: the line the group of LogAttrs wrote, in
// the same order.
func TestASessionBytesSentLineNamesTheSessionAndWhatWasSent(t *testing.T) {
	var book budgetBook
	w := newTestWarm(book.ledger(nil), 0)
	var out bytes.Buffer
	w.Log = slog.New(slog.NewJSONHandler(&out, nil))
	m := w.Meter(warmRow, []any{"session_id", warmRow.ID, "link_id", warmRow.LinkID})
	ctx, err := m.Begin(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	if k, err := m.Take(ctx, 100); err != nil || k != 100 {
		t.Fatalf("Take = %d, %v", k, err)
	}
	m.End(context.Background(), deliver.Result{Status: 206, Granted: 100, Sent: 100, Acked: 100})

	var ref bytes.Buffer
	slog.New(slog.NewJSONHandler(&ref, nil)).LogAttrs(context.Background(), slog.LevelInfo, "session bytes sent",
		slog.Group("", "session_id", warmRow.ID, "link_id", warmRow.LinkID),
		slog.Int64("bytes", 100), slog.Int64("bytes_acked", 100), slog.Int("status", 206))
	// The same line but for its time.
	untimed := func(b []byte) string {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		if _, err := time.Parse(time.RFC3339Nano, m["time"].(string)); err != nil {
			t.Errorf("time %v: %v", m["time"], err)
		}
		i := bytes.Index(b, []byte(`"level"`))
		return string(b[i:])
	}
	if got, want := untimed(out.Bytes()), untimed(ref.Bytes()); got != want {
		t.Errorf("line\n got %s\nwant %s", got, want)
	}
}

// A response whose slot lease another process reclaimed (a renewal finds
// it gone) ends with errLeaseLost as its context's cause; one that ended
// before is left alone.
func TestAResponseEndsWhenItsSlotLeaseIsLost(t *testing.T) {
	var book budgetBook
	l := book.ledger(nil)
	l.renew = func(string, string) error { return ledger.ErrNotFound }
	w := newTestWarm(l, 0)
	w.Lease = 30 * time.Millisecond // renewed, and found gone, every 10 ms

	m := w.Meter(warmRow, nil)
	ctx, err := m.Begin(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a response whose lease was lost still went on after 10 s")
	}
	if cause := context.Cause(ctx); !errors.Is(cause, errLeaseLost) {
		t.Errorf("the response's context ended with %v, want errLeaseLost", cause)
	}
	m.End(context.Background(), deliver.Result{Status: 206, Err: context.Cause(ctx)})

	// Ended first: its context ends with the response, not the lease.
	m = w.Meter(warmRow, nil)
	ctx, err = m.Begin(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	m.End(context.Background(), deliver.Result{})
	if cause := context.Cause(ctx); errors.Is(cause, errLeaseLost) {
		t.Errorf("a response that ended before its lease was lost has cause %v", cause)
	}
}
