// Package logbuf batches log lines. A gateway logs one access line per
// request; written one by one, each is a system call, which on the
// cheapest request (a 404) costs as much as answering it. A Writer keeps
// lines in memory for at most a short delay and writes them in one call;
// a Handler lets only the lines it is told to batch wait, and writes
// everything else (errors, warnings, events) at once, after whatever
// waited before it, so the order of lines is kept.
package logbuf

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"time"
)

// MaxBuffer is the most a Writer holds: a batch this large is written at
// once, and a single larger write goes straight through.
const MaxBuffer = 64 << 10

// Writer is an io.Writer that holds what it is given for at most its
// delay. Each Write must be whole lines (slog's handlers write one record
// per call), so that a batch never splits a line.
type Writer struct {
	mu    sync.Mutex
	out   io.Writer
	delay time.Duration
	buf   []byte
	timer *time.Timer
	armed bool
}

// New returns a Writer to out that writes what it holds within delay.
func New(out io.Writer, delay time.Duration) *Writer {
	return &Writer{out: out, delay: delay}
}

// Write holds p, writing the batch first when p would not fit.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf)+len(p) > MaxBuffer {
		if err := w.flushLocked(); err != nil {
			return 0, err
		}
		if len(p) > MaxBuffer {
			return w.out.Write(p)
		}
	}
	w.buf = append(w.buf, p...)
	if !w.armed {
		w.armed = true
		if w.timer == nil {
			w.timer = time.AfterFunc(w.delay, func() { w.Flush() }) //nolint:errcheck // nowhere to report it
		} else {
			w.timer.Reset(w.delay)
		}
	}
	return len(p), nil
}

// Flush writes what the Writer holds.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushLocked()
}

func (w *Writer) flushLocked() error {
	w.armed = false
	if len(w.buf) == 0 {
		return nil
	}
	_, err := w.out.Write(w.buf)
	if cap(w.buf) > 2*MaxBuffer {
		w.buf = nil
	} else {
		w.buf = w.buf[:0]
	}
	return err
}

// Handler is a slog.Handler writing to a Writer that flushes it after
// every record at or above a level.
type Handler struct {
	slog.Handler
	w   *Writer
	now slog.Level
	// enc writes common records without slog's handler (NewLineHandler);
	// pre is WithAttrs's attributes as it encoded them.
	enc *encoder
	pre []byte
}

// NewHandler returns h, writing to w, flushing after each record at level
// now or above.
func NewHandler(h slog.Handler, w *Writer, now slog.Level) *Handler {
	return &Handler{Handler: h, w: w, now: now}
}

func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	ok, err := h.writeLine(r)
	if !ok {
		err = h.Handler.Handle(ctx, r)
	}
	if r.Level >= h.now {
		if ferr := h.w.Flush(); err == nil {
			err = ferr
		}
	}
	return err
}

// writeLine writes r's line itself when its encoder can (NewLineHandler),
// and reports whether it did.
func (h *Handler) writeLine(r slog.Record) (bool, error) {
	if h.enc == nil {
		return false, nil
	}
	p := lineBufs.Get().(*[]byte)
	defer lineBufs.Put(p)
	b, ok := h.enc.record((*p)[:0], r, h.pre)
	if cap(b) <= 16<<10 {
		*p = b
	}
	if !ok {
		return false, nil
	}
	_, err := h.w.Write(b)
	return true, err
}

func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := &Handler{Handler: h.Handler.WithAttrs(attrs), w: h.w, now: h.now}
	if h.enc != nil {
		if pre, ok := h.enc.attrs(append([]byte(nil), h.pre...), attrs); ok {
			out.enc, out.pre = h.enc, pre
		}
	}
	return out
}

// WithGroup's records all go through slog's handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{Handler: h.Handler.WithGroup(name), w: h.w, now: h.now}
}
