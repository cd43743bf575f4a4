package tlsserve

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapLogger hands certmagic's zap logging to the gateway's slog logger:
// its warnings and errors as they are, its running commentary (info) at
// debug, since onEvent writes the lines an operator reads.
func zapLogger(log *slog.Logger) *zap.Logger {
	return zap.New(&slogCore{log: log})
}

type slogCore struct {
	log   *slog.Logger
	attrs []slog.Attr
}

func level(l zapcore.Level) slog.Level {
	switch {
	case l >= zapcore.ErrorLevel:
		return slog.LevelError
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	default:
		return slog.LevelDebug
	}
}

func (c *slogCore) Enabled(l zapcore.Level) bool {
	return c.log.Enabled(context.Background(), level(l))
}

func (c *slogCore) With(fields []zapcore.Field) zapcore.Core {
	return &slogCore{log: c.log, attrs: append(append([]slog.Attr(nil), c.attrs...), attrsOf(fields)...)}
}

func (c *slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c *slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	attrs := append(append([]slog.Attr{slog.String("logger", "certmagic")}, c.attrs...), attrsOf(fields)...)
	c.log.LogAttrs(context.Background(), level(e.Level), "acme: "+e.Message, attrs...)
	return nil
}

func (c *slogCore) Sync() error { return nil }

func attrsOf(fields []zapcore.Field) []slog.Attr {
	enc := zapcore.NewMapObjectEncoder()
	for _, f := range fields {
		f.AddTo(enc)
	}
	out := make([]slog.Attr, 0, len(enc.Fields))
	for k, v := range enc.Fields {
		out = append(out, slog.Any(k, v))
	}
	return out
}
