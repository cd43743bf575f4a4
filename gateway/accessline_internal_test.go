package gateway

import (
	"bytes"
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/internal/logbuf"
)

// The access line written through the log handler's encoder is the line
// its record makes through the context handler and slog's own handler:
// every optional attribute on and off, text and JSON; and a line with a
// value slog must write (a User-Agent outside ASCII, a quote in a route)
// is left to the record.
func TestTheAccessLineIsItsRecordsLine(t *testing.T) {
	now := time.Date(2026, 12, 7, 20, 0, 40, 123456789, time.UTC)
	var lines []accessLine
	for mask := range 1 << 5 {
		info := &httpx.Info{ID: "147aeec4353807b679ac790a", Route: "link"}
		line := accessLine{method: "GET", status: 200, bytes: 1 << 20, ms: "12.5", client: "192.0.2.7",
			ua: "Mozilla/5.0 (X11; Linux x86_64) \"quoted\"", info: info}
		if mask&1 != 0 {
			info.Affinity = "reused"
		}
		if mask&2 != 0 {
			info.Actor = "bootstrap"
		}
		if mask&4 != 0 {
			line.claimBatch = 1
		}
		if mask&8 != 0 {
			info.Delivery, info.BytesAcked = "partial", 4096
		}
		if mask&16 != 0 {
			info.AckMeasured = true
		}
		lines = append(lines, line)
	}
	for _, json := range []bool{false, true} {
		for i, line := range lines {
			var fast, ref bytes.Buffer
			w := logbuf.New(&fast, time.Hour)
			h := logbuf.NewLineHandler(w, json, slog.LevelDebug, slog.LevelDebug-100)
			if !line.write(h, slog.LevelInfo, now) {
				t.Fatalf("json %v, line %d: not written by the encoder", json, i)
			}
			opts := &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: logbuf.ReplaceAttr}
			var inner slog.Handler = slog.NewTextHandler(&ref, opts)
			if json {
				inner = slog.NewJSONHandler(&ref, opts)
			}
			ctx := httpx.WithInfo(context.Background(), line.info)
			if err := httpx.LogHandler(inner).Handle(ctx, line.record(slog.LevelInfo, now)); err != nil {
				t.Fatal(err)
			}
			if fast.String() != ref.String() {
				t.Errorf("json %v, line %d:\n got %q\nwant %q", json, i, fast.String(), ref.String())
			}
		}
	}
	var out bytes.Buffer
	h := logbuf.NewLineHandler(logbuf.New(&out, time.Hour), false, slog.LevelDebug, slog.LevelDebug-100)
	line := lines[0]
	line.ua = "Mözilla"
	if line.write(h, slog.LevelInfo, now) || out.Len() != 0 {
		t.Errorf("a User-Agent outside ASCII was written by the encoder: %q", out.String())
	}
}
