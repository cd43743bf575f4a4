package logbuf

import (
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// ReplaceAttr is the gateway's one rewrite of its log attributes: a
// duration is written as people read it ("30s"), where slog's JSON would
// write nanoseconds.
func ReplaceAttr(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// NewLineHandler returns a Handler writing text lines (JSON lines with
// json) of the records at level and above to w, flushing w after each
// record at level now or above: the lines slog.NewTextHandler (or
// NewJSONHandler) with ReplaceAttr writes, byte for byte. The common
// records (plain ASCII strings, integers, booleans, durations, inline
// groups: every access line) it encodes itself, in about a fifth of
// slog's time, which was a tenth of the CPU of a gateway answering
// unknown tokens; the rest go through slog's handler.
func NewLineHandler(w *Writer, json bool, level slog.Leveler, now slog.Level) *Handler {
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: ReplaceAttr}
	var inner slog.Handler = slog.NewTextHandler(w, opts)
	if json {
		inner = slog.NewJSONHandler(w, opts)
	}
	h := NewHandler(inner, w, now)
	h.enc = &encoder{json: json}
	return h
}

// encoder writes the records slog's text or JSON handler would write
// identically, and reports false, having written nothing, for any other:
// a string with a byte outside printable ASCII (a control character, or
// UTF-8 that slog checks rune by rune), a float, a time or any other
// value, a named group, an attribute without a key.
type encoder struct{ json bool }

var lineBufs = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// record appends r's line, pre being the attributes of WithAttrs as
// attrs encoded them.
func (e *encoder) record(b []byte, r slog.Record, pre []byte) ([]byte, bool) {
	b, ok := e.head(b, r.Time, r.Level, r.Message)
	if !ok {
		return b, false
	}
	b = append(b, pre...)
	r.Attrs(func(a slog.Attr) bool {
		b, ok = e.attr(b, a)
		return ok
	})
	if !ok {
		return b, false
	}
	return e.end(b), true
}

// head appends what comes before a record's attributes: its time, level
// and message.
func (e *encoder) head(b []byte, t time.Time, level slog.Level, msg string) ([]byte, bool) {
	if e.json {
		b = append(b, '{')
	}
	if !t.IsZero() {
		t = t.Round(0)
		if e.json {
			if y := t.Year(); y < 0 || y >= 10000 {
				return b, false // slog writes an error in its place
			}
			b = append(b, `"time":"`...)
			b = t.AppendFormat(b, time.RFC3339Nano)
			b = append(b, `",`...)
		} else {
			b = append(b, "time="...)
			b = appendRFC3339Millis(b, t)
			b = append(b, ' ')
		}
	}
	var ok bool
	if b, ok = e.key(b, slog.LevelKey); !ok {
		return b, false
	}
	if b, ok = e.string(b, level.String()); !ok {
		return b, false
	}
	b = e.sep(b)
	if b, ok = e.key(b, slog.MessageKey); !ok {
		return b, false
	}
	return e.string(b, msg)
}

// end closes a line.
func (e *encoder) end(b []byte) []byte {
	if e.json {
		b = append(b, '}')
	}
	return append(b, '\n')
}

// attrs appends attrs, each after a separator, as WithAttrs keeps them.
func (e *encoder) attrs(b []byte, attrs []slog.Attr) ([]byte, bool) {
	ok := true
	for _, a := range attrs {
		if b, ok = e.attr(b, a); !ok {
			break
		}
	}
	return b, ok
}

// attr appends a after a separator, or nothing when slog elides it.
func (e *encoder) attr(b []byte, a slog.Attr) ([]byte, bool) {
	v := a.Value
	if v.Kind() == slog.KindGroup {
		g := v.Group()
		if len(g) == 0 {
			return b, true // slog writes no empty group
		}
		if a.Key != "" {
			return b, false
		}
		return e.attrs(b, g)
	}
	if a.Key == "" {
		if a.Equal(slog.Attr{}) {
			return b, true // slog elides the empty attribute
		}
		return b, false
	}
	b = e.sep(b)
	b, ok := e.key(b, a.Key)
	if !ok {
		return b, false
	}
	switch v.Kind() {
	case slog.KindString:
		return e.string(b, v.String())
	case slog.KindDuration: // ReplaceAttr
		return e.string(b, v.Duration().String())
	case slog.KindInt64:
		return strconv.AppendInt(b, v.Int64(), 10), true
	case slog.KindUint64:
		return strconv.AppendUint(b, v.Uint64(), 10), true
	case slog.KindBool:
		return strconv.AppendBool(b, v.Bool()), true
	}
	return b, false
}

func (e *encoder) sep(b []byte) []byte {
	if e.json {
		return append(b, ',')
	}
	return append(b, ' ')
}

// key appends k and the character after a key.
func (e *encoder) key(b []byte, k string) ([]byte, bool) {
	b, ok := e.string(b, k)
	if e.json {
		return append(b, ':'), ok
	}
	return append(b, '='), ok
}

// string appends s as slog would: quoted, '"' and '\\' escaped, in JSON;
// in text as is, unless it is empty or has a space, '=' or '"', and then
// as strconv.AppendQuote writes it.
func (e *encoder) string(b []byte, s string) ([]byte, bool) {
	var seen uint8
	for i := 0; i < len(s); i++ {
		seen |= charClass[s[i]]
	}
	if seen&charOther != 0 {
		return b, false
	}
	quote, escape := len(s) == 0 || seen&charQuote != 0, seen&charEscape != 0
	switch {
	case e.json && escape:
		b = append(b, '"')
		for i := 0; i < len(s); i++ {
			if c := s[i]; c == '"' || c == '\\' {
				b = append(b, '\\', c)
			} else {
				b = append(b, c)
			}
		}
		return append(b, '"'), true
	case e.json:
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"'), true
	case quote:
		return strconv.AppendQuote(b, s), true
	}
	return append(b, s...), true
}

// What a string's characters ask of the encoder.
const (
	charQuote  = 1 << iota // in text: a space, '=' or '"'
	charEscape             // in JSON: '"' or '\\'
	charOther              // a control character or a byte of UTF-8: slog's
)

var charClass = func() (t [256]uint8) {
	for c := range t {
		switch {
		case c < ' ' || c > 0x7f:
			t[c] = charOther
		case c == '"':
			t[c] = charQuote | charEscape
		case c == '\\':
			t[c] = charEscape
		case c == ' ' || c == '=':
			t[c] = charQuote
		}
	}
	return t
}()

// appendRFC3339Millis is slog's text time: RFC 3339 with exactly three
// digits of milliseconds.
func appendRFC3339Millis(b []byte, t time.Time) []byte {
	const prefixLen = len("2006-01-02T15:04:05.000")
	n := len(b)
	t = t.Truncate(time.Millisecond).Add(time.Millisecond / 10)
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b[:n+prefixLen], b[n+prefixLen+1:]...) // drop the 4th digit
}

// Line is a record written by a NewLineHandler's encoder straight from
// its attributes, without a slog.Record: the access line, written for
// every request. Begin it with Handler.Begin, add attributes, Write it.
// When an attribute is one slog's handler must write (Write then reports
// false, having written nothing), the caller logs the record through
// slog instead.
type Line struct {
	h  *Handler
	p  *[]byte
	b  []byte
	ok bool
}

// Begin starts l as the line of a record of time t, level and msg, and
// reports whether h writes lines itself (NewLineHandler, without
// WithAttrs or WithGroup); when it does not, l is not to be used.
func (h *Handler) Begin(l *Line, t time.Time, level slog.Level, msg string) bool {
	if h.enc == nil || len(h.pre) != 0 {
		return false
	}
	p := lineBufs.Get().(*[]byte)
	b, ok := h.enc.head((*p)[:0], t, level, msg)
	*l = Line{h: h, p: p, b: b, ok: ok}
	return true
}

// String adds a string attribute.
func (l *Line) String(key, val string) {
	if l.ok {
		l.b, l.ok = l.h.enc.attr(l.b, slog.String(key, val))
	}
}

// Int adds an integer attribute.
func (l *Line) Int(key string, val int64) {
	if l.ok {
		l.b, l.ok = l.h.enc.attr(l.b, slog.Int64(key, val))
	}
}

// Bool adds a boolean attribute.
func (l *Line) Bool(key string, val bool) {
	if l.ok {
		l.b, l.ok = l.h.enc.attr(l.b, slog.Bool(key, val))
	}
}

// Write ends the line and writes it, flushing as Handle would, and
// reports whether it did; false means nothing was written and the record
// is to be logged through slog. l is not to be used after.
func (l *Line) Write(level slog.Level) (bool, error) {
	defer func() {
		if cap(l.b) <= 16<<10 {
			*l.p = l.b[:0]
		}
		lineBufs.Put(l.p)
		*l = Line{}
	}()
	if !l.ok {
		return false, nil
	}
	l.b = l.h.enc.end(l.b)
	_, err := l.h.w.Write(l.b)
	if level >= l.h.now {
		if ferr := l.h.w.Flush(); err == nil {
			err = ferr
		}
	}
	return true, err
}
