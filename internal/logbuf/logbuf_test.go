package logbuf

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// sink records each write it is given.
type sink struct {
	mu     sync.Mutex
	writes []string
}

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, string(p))
	return len(p), nil
}

func (s *sink) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.writes...)
}

func TestWriterBatchesLinesWithinTheDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out sink
		w := New(&out, 50*time.Millisecond)
		for _, l := range []string{"a\n", "b\n", "c\n"} {
			w.Write([]byte(l))
		}
		if got := out.all(); len(got) != 0 {
			t.Fatalf("written before the delay: %q", got)
		}
		time.Sleep(49 * time.Millisecond)
		synctest.Wait()
		if got := out.all(); len(got) != 0 {
			t.Fatalf("written before the delay: %q", got)
		}
		time.Sleep(2 * time.Millisecond)
		synctest.Wait()
		if got := out.all(); len(got) != 1 || got[0] != "a\nb\nc\n" {
			t.Fatalf("after the delay: %q, want one write of the three lines", got)
		}
		// The next line waits its own delay again.
		w.Write([]byte("d\n"))
		time.Sleep(51 * time.Millisecond)
		synctest.Wait()
		if got := out.all(); len(got) != 2 || got[1] != "d\n" {
			t.Fatalf("second batch: %q", got)
		}
	})
}

func TestWriterNeverHoldsMoreThanMaxBuffer(t *testing.T) {
	var out sink
	w := New(&out, time.Hour)
	line := strings.Repeat("x", 1023) + "\n"
	for range MaxBuffer / len(line) {
		w.Write([]byte(line))
	}
	if len(out.all()) != 0 {
		t.Fatal("a full buffer was written before it overflowed")
	}
	w.Write([]byte(line))
	got := out.all()
	if len(got) != 1 || len(got[0]) != MaxBuffer {
		t.Fatalf("overflow: %d writes, want one of %d bytes", len(got), MaxBuffer)
	}
	big := strings.Repeat("y", MaxBuffer+1)
	w.Write([]byte(big))
	got = out.all()
	if len(got) != 3 || got[1] != line || got[2] != big {
		t.Fatalf("a write over MaxBuffer: %d writes, want the held line then the big write", len(got))
	}
	w.Flush()
	if len(out.all()) != 3 {
		t.Fatal("Flush of an empty Writer wrote")
	}
}

func TestHandlerWritesWarningsAndErrorsAtOnceAndInOrder(t *testing.T) {
	var out bytes.Buffer
	w := New(&out, time.Hour)
	log := slog.New(NewHandler(slog.NewTextHandler(w, nil), w, slog.LevelWarn))
	log.Info("http", "n", 1)
	log.Info("http", "n", 2)
	if out.Len() != 0 {
		t.Fatalf("batched lines written at once: %q", out.String())
	}
	log.With("k", "v").Warn("http", "n", 3) // a warning is never held
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "n=1") || !strings.Contains(lines[1], "n=2") || !strings.Contains(lines[2], "n=3") || !strings.Contains(lines[2], "k=v") {
		t.Fatalf("after a warning: %q, want the two held lines, then it", lines)
	}
	log.Info("http", "n", 4)
	log.Error("store failed")
	lines = strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 5 || !strings.Contains(lines[3], "n=4") || !strings.Contains(lines[4], "store failed") {
		t.Fatalf("after an error: %q", lines)
	}
}
