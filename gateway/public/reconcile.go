package public

import (
	"context"
	"errors"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

// A claim whose COMMIT failed has an unknown outcome (ledger.ErrAmbiguous):
// the grant may exist. The client is answered 503 and gets no byte, so
// the grant must not stay spent (SPEC §1: a download is spent only when
// its bytes could be sent). It is refunded before the answer: the refund
// is a transaction on the grant's row, which waits for the failed
// transaction's locks to go, so it either finds the grant (and refunds
// it) or finds none (ErrNotFound: nothing was spent). When the database
// cannot answer that either, the refund is retried in the background
// until it can (refundLater).

// refundWait bounds the refund made before the 503; refundRetries bound
// the background retries after it (about an hour in all).
const (
	refundWait     = 2 * time.Second
	refundRetries  = 20
	refundMaxPause = 5 * time.Minute
)

// settleUnknown gives back g, a grant whose commit outcome is unknown,
// before its request is answered 503; it reports whether the outcome is
// now settled (refunded, or never committed).
func (h *Handler) settleUnknown(ctx context.Context, g *ledger.Grant, attrs []any) bool {
	attrs = append(attrs, "grant_id", g.ID)
	ctx, cancel := context.WithTimeout(ledger.WithoutWait(context.WithoutCancel(ctx)), refundWait)
	defer cancel()
	err := h.Claims.GrantRefund(ctx, g.ID)
	switch {
	case err == nil:
		h.Metrics.Refunds.WithLabelValues("commit_unknown").Inc()
		h.Log.WarnContext(ctx, "claim's commit outcome was unknown; it had committed and is refunded", attrs...)
		return true
	case errors.Is(err, ledger.ErrNotFound):
		h.Log.InfoContext(ctx, "claim's commit outcome was unknown; it had not committed", attrs...)
		return true
	}
	h.Log.WarnContext(ctx, "claim's commit outcome is unknown; refund retried in the background", append(attrs, "err", err)...)
	go h.refundLater(context.WithoutCancel(ctx), g, attrs)
	return false
}

// refundLater retries the refund of g with growing pauses until the
// database settles it. A process that stops meanwhile leaves it to the
// operator: the error line names the grant.
func (h *Handler) refundLater(ctx context.Context, g *ledger.Grant, attrs []any) {
	pause := time.Second
	for range refundRetries {
		time.Sleep(pause)
		pause = min(2*pause, refundMaxPause)
		rctx, cancel := context.WithTimeout(ledger.WithoutWait(ctx), refundWait)
		err := h.Claims.GrantRefund(rctx, g.ID)
		cancel()
		switch {
		case err == nil:
			h.Metrics.Refunds.WithLabelValues("commit_unknown").Inc()
			h.Log.WarnContext(ctx, "claim's commit outcome was unknown; it had committed and is refunded", attrs...)
			return
		case errors.Is(err, ledger.ErrNotFound):
			h.Log.InfoContext(ctx, "claim's commit outcome was unknown; it had not committed", attrs...)
			return
		}
	}
	h.Log.ErrorContext(ctx, "claim's commit outcome is still unknown; refund it by hand if it exists", attrs...)
}
