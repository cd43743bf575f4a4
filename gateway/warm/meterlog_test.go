package warm

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/dlgate/dlgate/gateway/deliver"
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
