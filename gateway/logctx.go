package gateway

import (
	"context"
	"log/slog"
)

// contextHandler adds the request's id and route to every record logged
// with the request's context, so that "streamed", "session minted" and
// every error line can be matched to the access line of its request.
type contextHandler struct{ slog.Handler }

func (h contextHandler) Handle(ctx context.Context, r slog.Record) error {
	if info, _ := ctx.Value(reqInfoKey).(*reqInfo); info != nil {
		r.AddAttrs(slog.String("request_id", info.id), slog.String("route", info.route))
	}
	return h.Handler.Handle(ctx, r)
}

func (h contextHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return contextHandler{h.Handler.WithAttrs(attrs)}
}

func (h contextHandler) WithGroup(name string) slog.Handler {
	return contextHandler{h.Handler.WithGroup(name)}
}
