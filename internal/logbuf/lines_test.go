package logbuf

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mathrand "math/rand/v2"
	"strings"
	"testing"
	"time"
)

// lineHandlers returns a NewLineHandler and slog's own handler with the
// same options, each writing to its buffer (through a Writer with a delay
// nothing waits for: Flush before reading).
func lineHandlers(json bool) (fast *Handler, fastOut *Writer, fastBuf *bytes.Buffer, ref slog.Handler, refBuf *bytes.Buffer) {
	fastBuf, refBuf = new(bytes.Buffer), new(bytes.Buffer)
	fastOut = New(fastBuf, time.Hour)
	fast = NewLineHandler(fastOut, json, slog.LevelDebug, slog.LevelError+100)
	opts := &slog.HandlerOptions{Level: slog.LevelDebug, ReplaceAttr: ReplaceAttr}
	ref = slog.NewTextHandler(refBuf, opts)
	if json {
		ref = slog.NewJSONHandler(refBuf, opts)
	}
	return
}

// strs are strings on both sides of every rule the encoder applies:
// empty, plain, each character that quotes or escapes, the edges of
// printable ASCII, control characters, UTF-8 (valid, invalid, and the
// line separators JSON escapes).
var strs = []string{"", "GET", "a b", "a=b", `say "hi"`, `C:\dir`, `\"`, "tab\there", "nl\n", "\x1f", "\x7f", "~", "!#$%&'()*+,-./:;<>?@[]^_`{|}",
	"héllo", "\xff\xfe", "\u2028", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36", "curl/8.5.0", "0.1", "01a25219-6f2e-71ed-9b26-d7c3559e8620", "=", " ", `"`, `\`}

// randomAttr is any attribute the gateway logs, and some it does not;
// with simple, only the kinds the encoder writes itself (with strings
// and groups that may still send the record to slog).
func randomAttr(r *mathrand.Rand, depth int, simple bool) slog.Attr {
	key := "k" + fmt.Sprint(r.IntN(5))
	if !simple && r.IntN(3) == 0 {
		key = []string{"method", "status", "a b", "", "k=v", "ünï", "route", `q"`}[r.IntN(8)]
	}
	kinds := 14
	if simple {
		kinds = 9
	}
	switch r.IntN(kinds) {
	case 0, 1, 2:
		return slog.String(key, strs[r.IntN(len(strs))])
	case 3:
		return slog.Int64(key, r.Int64()-r.Int64())
	case 4:
		return slog.Int(key, r.IntN(600))
	case 5:
		return slog.Uint64(key, r.Uint64())
	case 6:
		return slog.Bool(key, r.IntN(2) == 0)
	case 7:
		return slog.Duration(key, time.Duration(r.Int64N(int64(100*time.Hour))))
	case 8:
		if simple && depth <= 2 {
			var g []any
			for range r.IntN(4) {
				g = append(g, randomAttr(r, depth+1, simple))
			}
			return slog.Group("", g...)
		}
		return slog.Attr{}
	case 9:
		return slog.Float64(key, r.Float64()*1e6)
	case 10:
		return slog.Any(key, errors.New(strs[r.IntN(len(strs))]))
	case 11:
		return slog.Time(key, time.Unix(r.Int64N(4e9), r.Int64N(1e9)))
	default:
		if depth > 2 {
			return slog.String(key, "leaf")
		}
		var g []any
		for range r.IntN(4) {
			g = append(g, randomAttr(r, depth+1, false))
		}
		if r.IntN(2) == 0 {
			key = ""
		}
		return slog.Group(key, g...)
	}
}

// TestLinesAreSlogsLines: whatever a record holds, a NewLineHandler
// writes the bytes slog's own handler with ReplaceAttr writes, in text
// and in JSON, with WithAttrs and WithGroup, at every level; and it
// writes the common ones itself (a check that the fast path is taken, so
// that this test compares two encoders and not slog with itself).
func TestLinesAreSlogsLines(t *testing.T) {
	for _, json := range []bool{false, true} {
		t.Run(map[bool]string{false: "text", true: "json"}[json], func(t *testing.T) {
			r := mathrand.New(mathrand.NewPCG(1, 2))
			encoded := 0
			for i := range 20000 {
				fast, fastOut, fastBuf, ref, refBuf := lineHandlers(json)
				simple := i%2 == 0
				var fh slog.Handler = fast
				if r.IntN(4) == 0 {
					var attrs []slog.Attr
					for range r.IntN(3) {
						attrs = append(attrs, randomAttr(r, 1, simple))
					}
					fh, ref = fh.WithAttrs(attrs), ref.WithAttrs(attrs)
				}
				if r.IntN(10) == 0 {
					g := []string{"", "grp", "a b"}[r.IntN(3)]
					fh, ref = fh.WithGroup(g), ref.WithGroup(g)
				}
				tm := time.Time{}
				if r.IntN(10) > 0 {
					tm = time.Unix(r.Int64N(4e9), r.Int64N(1e9)).In(time.FixedZone("", 3600*(r.IntN(25)-12)))
				}
				level := []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError, slog.LevelInfo + 2}[r.IntN(5)]
				rec := slog.NewRecord(tm, level, strs[r.IntN(len(strs))], 0)
				for range r.IntN(12) {
					rec.AddAttrs(randomAttr(r, 0, simple))
				}
				if lh, ok := fh.(*Handler); ok && lh.enc != nil {
					if _, ok := lh.enc.record(nil, rec.Clone(), lh.pre); ok {
						encoded++
					}
				}
				if err := fh.Handle(context.Background(), rec.Clone()); err != nil {
					t.Fatal(err)
				}
				if err := ref.Handle(context.Background(), rec.Clone()); err != nil {
					t.Fatal(err)
				}
				fastOut.Flush()
				if got, want := fastBuf.String(), refBuf.String(); got != want {
					t.Fatalf("record %d:\n got %q\nwant %q", i, got, want)
				}
			}
			if encoded < 4000 {
				t.Errorf("the encoder wrote %d of 20000 records itself; the comparison says little", encoded)
			}
			t.Logf("%d of 20000 records encoded without slog", encoded)
		})
	}
}

// The access line, as the gateway writes it, goes through the encoder
// and reads as slog's.
func TestAnAccessLineIsEncodedWithoutSlog(t *testing.T) {
	for _, json := range []bool{false, true} {
		fast, fastOut, fastBuf, ref, refBuf := lineHandlers(json)
		rec := slog.NewRecord(time.Date(2026, 12, 7, 20, 0, 40, 123456789, time.UTC), slog.LevelInfo, "http", 0)
		rec.AddAttrs(slog.String("method", "GET"), slog.Int("status", 404), slog.Int64("bytes", 123), slog.String("duration_ms", "0.1"),
			slog.String("client", "127.0.0.1"), slog.String("user_agent", "Mozilla/5.0 (X11; Linux x86_64)"), slog.Attr{},
			slog.Attr{Key: "", Value: slog.GroupValue(slog.String("delivery", "complete"), slog.Int64("bytes_acked", 1024), slog.Bool("measured", false))},
			slog.Duration("took", 1500*time.Millisecond), slog.String("request_id", "147aeec4353807b679ac790a"), slog.String("route", "link"))
		if _, ok := fast.enc.record(nil, rec, nil); !ok {
			t.Fatalf("json %v: the access line was not encoded", json)
		}
		fast.Handle(context.Background(), rec) //nolint:errcheck
		ref.Handle(context.Background(), rec)  //nolint:errcheck
		fastOut.Flush()
		if fastBuf.String() != refBuf.String() {
			t.Errorf("json %v:\n got %q\nwant %q", json, fastBuf.String(), refBuf.String())
		}
		if !strings.Contains(fastBuf.String(), "took") || !strings.Contains(fastBuf.String(), "1.5s") {
			t.Errorf("json %v: the duration is not written as people read it: %s", json, fastBuf.String())
		}
	}
}

// Records at level now and above are written at once, as NewHandler's.
func TestALineHandlerFlushesAtItsLevel(t *testing.T) {
	var out bytes.Buffer
	w := New(&out, time.Hour)
	log := slog.New(NewLineHandler(w, false, slog.LevelInfo, slog.LevelWarn))
	log.Info("waits")
	if out.Len() != 0 {
		t.Fatalf("an info line was written before the delay: %q", out.String())
	}
	log.Warn("now")
	if !strings.Contains(out.String(), "msg=waits") || !strings.Contains(out.String(), "msg=now") {
		t.Fatalf("after a warning: %q, want both lines", out.String())
	}
	log.Debug("below the level")
	w.Flush()
	if strings.Contains(out.String(), "below") {
		t.Errorf("a debug line was written at level info: %q", out.String())
	}
}

func BenchmarkAccessLine(b *testing.B) {
	for _, c := range []struct {
		name string
		h    func(io.Writer) slog.Handler
	}{
		{"slog-text", func(w io.Writer) slog.Handler {
			return slog.NewTextHandler(w, &slog.HandlerOptions{ReplaceAttr: ReplaceAttr})
		}},
		{"lines-text", func(w io.Writer) slog.Handler {
			return NewLineHandler(New(w, time.Hour), false, slog.LevelInfo, slog.LevelWarn)
		}},
		{"slog-json", func(w io.Writer) slog.Handler {
			return slog.NewJSONHandler(w, &slog.HandlerOptions{ReplaceAttr: ReplaceAttr})
		}},
		{"lines-json", func(w io.Writer) slog.Handler {
			return NewLineHandler(New(w, time.Hour), true, slog.LevelInfo, slog.LevelWarn)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			log := slog.New(c.h(io.Discard))
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				log.LogAttrs(ctx, slog.LevelInfo, "http", slog.String("method", "GET"), slog.Int("status", 404),
					slog.Int64("bytes", 123), slog.String("duration_ms", "0.1"), slog.String("client", "127.0.0.1"),
					slog.String("user_agent", "curl/8.5.0"), slog.Attr{}, slog.Attr{},
					slog.String("request_id", "147aeec4353807b679ac790a"), slog.String("route", "link"))
			}
		})
	}
}

// BenchmarkAccessLineRecord is the access line as the gateway writes it:
// a record without a caller's PC, handed to the handler (no
// runtime.Callers, as slog.Logger takes).
func BenchmarkAccessLineRecord(b *testing.B) {
	h := NewLineHandler(New(io.Discard, time.Hour), false, slog.LevelInfo, slog.LevelWarn)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r := slog.NewRecord(time.Now(), slog.LevelInfo, "http", 0)
		r.AddAttrs(slog.String("method", "GET"), slog.Int("status", 404),
			slog.Int64("bytes", 123), slog.String("duration_ms", "0.1"), slog.String("client", "127.0.0.1"),
			slog.String("user_agent", "curl/8.5.0"), slog.Attr{}, slog.Attr{},
			slog.String("request_id", "147aeec4353807b679ac790a"), slog.String("route", "link"))
		h.Handle(ctx, r) //nolint:errcheck
	}
}

// A Line writes what the same record handed to slog's handler writes, or,
// when slog must write it, nothing and says so.
func TestALineIsItsRecordsLine(t *testing.T) {
	for _, json := range []bool{false, true} {
		r := mathrand.New(mathrand.NewPCG(3, 4))
		written := 0
		for i := range 5000 {
			fast, fastOut, fastBuf, ref, refBuf := lineHandlers(json)
			tm := time.Unix(r.Int64N(4e9), r.Int64N(1e9))
			level := []slog.Level{slog.LevelInfo, slog.LevelDebug, slog.LevelError}[r.IntN(3)]
			msg := strs[r.IntN(len(strs))]
			rec := slog.NewRecord(tm, level, msg, 0)
			var l Line
			if !fast.Begin(&l, tm, level, msg) {
				t.Fatal("a NewLineHandler does not begin lines")
			}
			for range r.IntN(12) {
				key := "k" + fmt.Sprint(r.IntN(5))
				switch r.IntN(3) {
				case 0:
					v := strs[r.IntN(len(strs))]
					l.String(key, v)
					rec.AddAttrs(slog.String(key, v))
				case 1:
					v := r.Int64() - r.Int64()
					l.Int(key, v)
					rec.AddAttrs(slog.Int64(key, v))
				default:
					v := r.IntN(2) == 0
					l.Bool(key, v)
					rec.AddAttrs(slog.Bool(key, v))
				}
			}
			ok, err := l.Write(level)
			if err != nil {
				t.Fatal(err)
			}
			if err := ref.Handle(context.Background(), rec); err != nil {
				t.Fatal(err)
			}
			fastOut.Flush()
			switch {
			case !ok && fastBuf.Len() != 0:
				t.Fatalf("json %v, line %d: Write reported false but wrote %q", json, i, fastBuf.String())
			case ok && fastBuf.String() != refBuf.String():
				t.Fatalf("json %v, line %d:\n got %q\nwant %q", json, i, fastBuf.String(), refBuf.String())
			case ok:
				written++
			}
		}
		if written < 1000 {
			t.Errorf("json %v: %d of 5000 lines written without slog; the comparison says little", json, written)
		}
	}
	// A handler given attributes or a group does not begin lines.
	fast, _, _, _, _ := lineHandlers(false)
	var l Line
	if fast.WithAttrs([]slog.Attr{slog.String("a", "b")}).(*Handler).Begin(&l, time.Now(), slog.LevelInfo, "m") {
		t.Error("a handler with attributes began a line without them")
	}
}
