package public

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/dlgate/dlgate/gateway/metrics"
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
//
// The refund before the answer is short (refundWait): the claim has
// usually spent the request's whole wait (GATEWAY_DB_TIMEOUT) on the
// COMMIT and on the ledger's own read-back of it, and a request is
// answered within that wait plus this grace, never two waits (a frozen
// database once held such a 503 for 4 s against a 2 s timeout). The
// client gets its 503 either way; what the grace does not settle, the
// background does.

// refundWait bounds the refund made before the 503; refundRetries bound
// the background retries after it (about an hour in all).
const (
	refundWait     = 500 * time.Millisecond
	refundRetries  = 20
	refundMaxPause = 5 * time.Minute
)

// settler gives back what a claim spent when no byte of it could be
// sent: a claim whose commit outcome is unknown (settleUnknown), and a
// stream's claim of which no byte left (refund, stream.go).
type settler struct {
	claims  ledger.Claims
	log     *slog.Logger
	metrics *metrics.Metrics
}

// unknownClaim is a claim whose commit outcome is unknown: its grant and,
// for a mint, the session it may have minted.
type unknownClaim struct {
	grantID, sessionID string
}

// settle refunds the claim (and so revokes the session it may have
// minted: nobody was told its URL). ErrNotFound: it never committed.
func (s *settler) settle(ctx context.Context, u unknownClaim) error {
	ctx, cancel := context.WithTimeout(ledger.WithoutWait(ctx), refundWait)
	defer cancel()
	return s.claims.GrantRefund(ctx, u.grantID)
}

// settleUnknown gives back u, a claim whose commit outcome is unknown,
// before its request is answered 503; it reports whether the outcome is
// now settled (refunded, or never committed).
func (s *settler) settleUnknown(ctx context.Context, u unknownClaim, attrs []any) bool {
	attrs = append(attrs, "grant_id", u.grantID)
	if u.sessionID != "" {
		attrs = append(attrs, "session_id", u.sessionID)
	}
	ctx = context.WithoutCancel(ctx)
	if s.settled(ctx, s.settle(ctx, u), attrs) {
		return true
	}
	s.log.WarnContext(ctx, "claim's commit outcome is unknown; refund retried in the background", attrs...)
	go s.refundLater(ctx, u, attrs)
	return false
}

// settled logs and counts a settlement that err ended; false when the
// database could not answer.
func (s *settler) settled(ctx context.Context, err error, attrs []any) bool {
	switch {
	case err == nil:
		s.metrics.Refunds.WithLabelValues("commit_unknown").Inc()
		s.log.WarnContext(ctx, "claim's commit outcome was unknown; it had committed and is refunded", attrs...)
		return true
	case errors.Is(err, ledger.ErrNotFound):
		s.log.InfoContext(ctx, "claim's commit outcome was unknown; it had not committed", attrs...)
		return true
	}
	return false
}

// refundLater retries the settlement of u with growing pauses until the
// database settles it. A process that stops meanwhile leaves it to the
// operator: the error line names the grant.
func (s *settler) refundLater(ctx context.Context, u unknownClaim, attrs []any) {
	pause := time.Second
	for range refundRetries {
		time.Sleep(pause)
		pause = min(2*pause, refundMaxPause)
		if s.settled(ctx, s.settle(ctx, u), attrs) {
			return
		}
	}
	s.log.ErrorContext(ctx, "claim's commit outcome is still unknown; refund it by hand if it exists", attrs...)
}

// refund gives back g's allowance; cause labels the refund metric. It
// reports whether the refund took place (a failed one is logged).
func (s *settler) refund(ctx context.Context, g *ledger.Grant, cause string, attrs []any) bool {
	if err := s.claims.GrantRefund(context.WithoutCancel(ctx), g.ID); err != nil {
		s.log.ErrorContext(ctx, "refund failed", append(attrs, "cause", cause, "err", err)...)
		return false
	}
	s.metrics.Refunds.WithLabelValues(cause).Inc()
	return true
}
