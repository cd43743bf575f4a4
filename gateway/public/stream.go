package public

import (
	"context"
	"net/http"

	"github.com/dlgate/dlgate/gateway/deliver"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
)

// stream sends the whole object of l under the grant g, through the
// pipeline; the claim was made, so the meter grants every byte and only
// settles the grant at the end.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, l *ledger.Link, g *ledger.Grant) {
	attrs := []any{"link_id", l.ID, "grant_id", g.ID}
	h.Pipeline.Serve(w, r, deliver.Request{Object: deliver.ObjectOf(l.Object, l.Filename, false),
		Meter: &streamMeter{h: h, grant: g, attrs: attrs}, NotFound: problem.LinkUnavailable, Attrs: attrs, Refundable: true})
}

// streamMeter is a stream grant's meter: nothing to draw. When no byte
// could leave (the store failed before the status line, or the client
// left), the claim is refunded, as SPEC §1 says.
type streamMeter struct {
	h     *Handler
	grant *ledger.Grant
	attrs []any
}

func (m *streamMeter) Begin(ctx context.Context, _ int64) (context.Context, error) { return ctx, nil }

func (m *streamMeter) Take(_ context.Context, n int64) (int64, error) { return n, nil }

func (m *streamMeter) End(ctx context.Context, res deliver.Result) {
	log := m.h.Log
	switch {
	case res.Status == 0 && ctx.Err() != nil:
		// The client hung up before a byte left: refunded, and a client
		// disconnect, not a server error.
		if m.h.refund(ctx, m.grant, "client_disconnect", m.attrs) {
			log.InfoContext(ctx, "client left before the first byte; claim refunded", m.attrs...)
		}
	case res.Status == 0:
		if m.h.refund(ctx, m.grant, "storage_error", m.attrs) {
			log.WarnContext(ctx, "storage failed before the first byte; claim refunded", append(m.attrs, "err", res.Err)...)
		}
	case res.Err != nil:
		// The claim stands: we cannot prove what the client kept.
		log.InfoContext(ctx, "stream ended early", append(m.attrs, "bytes", res.Sent, "err", res.Err)...)
	default:
		log.InfoContext(ctx, "streamed", append(m.attrs, "bytes", res.Sent)...)
	}
}

// refund gives back g's allowance; cause labels the refund metric. It
// reports whether the refund took place (a failed one is logged).
func (h *Handler) refund(ctx context.Context, g *ledger.Grant, cause string, attrs []any) bool {
	if err := h.Claims.GrantRefund(context.WithoutCancel(ctx), g.ID); err != nil {
		h.Log.ErrorContext(ctx, "refund failed", append(attrs, "cause", cause, "err", err)...)
		return false
	}
	h.Metrics.Refunds.WithLabelValues(cause).Inc()
	return true
}
