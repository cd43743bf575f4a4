package uploads

import (
	"context"
	"log/slog"

	xslog "golang.org/x/exp/slog"
)

// tusdLogger is a logger for tusd's handler, which logs through
// golang.org/x/exp/slog, writing to the gateway's log/slog logger. tusd
// logs every request and chunk at Info (RequestIncoming,
// ChunkWriteStart, ResponseOutgoing, …); those go to Debug, so that the
// gateway's own lines (upload created, object stored) are what Info
// shows. Warnings and errors keep their level, but for a body that broke
// off, which is the client's and logged at Info.
func tusdLogger(l *slog.Logger) *xslog.Logger {
	return xslog.New(bridge{h: l.Handler()})
}

type bridge struct{ h slog.Handler }

func level(l xslog.Level) slog.Level {
	if l < xslog.LevelWarn {
		return slog.LevelDebug
	}
	return slog.Level(l)
}

func (b bridge) Enabled(ctx context.Context, l xslog.Level) bool { return b.h.Enabled(ctx, level(l)) }

func (b bridge) Handle(ctx context.Context, r xslog.Record) error {
	l := level(r.Level)
	if r.Message == "BodyReadError" {
		// A client whose connection broke off mid-PATCH: what arrived
		// is kept, and the client resumes. Not the gateway's error.
		l = slog.LevelInfo
	}
	out := slog.NewRecord(r.Time, l, "tusd: "+r.Message, r.PC)
	r.Attrs(func(a xslog.Attr) bool {
		out.AddAttrs(attr(a))
		return true
	})
	return b.h.Handle(ctx, out)
}

func (b bridge) WithAttrs(attrs []xslog.Attr) xslog.Handler {
	as := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		as[i] = attr(a)
	}
	return bridge{h: b.h.WithAttrs(as)}
}

func (b bridge) WithGroup(name string) xslog.Handler {
	return bridge{h: b.h.WithGroup(name)}
}

// attr converts one attribute, groups included.
func attr(a xslog.Attr) slog.Attr {
	if a.Value.Kind() == xslog.KindGroup {
		in := a.Value.Group()
		out := make([]any, len(in))
		for i, g := range in {
			out[i] = attr(g)
		}
		return slog.Group(a.Key, out...)
	}
	return slog.Any(a.Key, a.Value.Resolve().Any())
}
