package public

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/dlgate/dlgate/gateway/deliver"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
)

// stream sends the whole object of l under the grant g, through the
// pipeline: the claim's own download (attempt 1), or a retry of an
// interrupted one (SPEC §1), whose attempt GrantRetryBegin started. The
// meter grants every byte; at the end it records what the client
// acknowledged, once (GrantDeliveryRecord), with the keys that name its
// client for a later retry (clients.retrier), or refunds a claim of which
// no byte left. On a link with retries, a client without the gateway's
// cookie gets one on the 200, so that a browser's next click is the same
// client (SPEC §5).
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, c *call, l *ledger.Link, g *ledger.Grant, attempt int) {
	attrs := []any{"link_id", l.ID, "grant_id", g.ID}
	if attempt > 1 {
		attrs = append(attrs, "attempt", attempt)
	}
	who := h.clients.retrier(c, l)
	if who.cookie != "" && who.cookie != c.cookie {
		h.clients.setCookie(w, c, who.cookie, l.ExpiresAt)
	}
	h.Pipeline.Serve(w, r, deliver.Request{Object: deliver.ObjectOf(l.Object, l.Filename, false),
		Meter: &streamMeter{h: h, grant: g, size: l.Object.Size, attempt: attempt, keys: who.keys, attrs: attrs}, NotFound: problem.LinkUnavailable,
		Attrs: attrs, Refundable: attempt == 1})
}

// streamMeter is a stream grant's meter: nothing to draw. A retry's
// attempt keeps its lease in the ledger while it streams (GrantRetryRenew
// every third of it), so that a second retry of the grant cannot begin
// beside it; a lease found lost cuts the response, as a lost slot does. At
// the end the meter records the attempt (one write per response, never
// per slice), or, when no byte of the claim's download could leave (the
// store failed before the status line, or the client left), refunds the
// claim, as SPEC §1 says, and records nothing.
type streamMeter struct {
	h       *Handler
	grant   *ledger.Grant
	size    int64 // of the version the link pins, for the record
	attempt int
	keys    []string
	attrs   []any

	stop context.CancelFunc
}

// errRetryLost cuts a retry whose attempt is no longer the grant's one in
// flight: its lease lapsed (a stall longer than DefaultRetryLease) and
// another attempt may be streaming.
var errRetryLost = errors.New("gateway: the retry's lease was lost")

func (m *streamMeter) Begin(ctx context.Context, _ int64) (context.Context, error) {
	if m.attempt < 2 {
		return ctx, nil
	}
	rctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	m.stop = func() { close(done); cancel(nil) }
	go m.renew(rctx, done, cancel)
	return rctx, nil
}

// renew extends the lease of the retry in flight every third of it until
// the response ends; a renewal that finds the attempt gone cuts it, one
// that fails otherwise (the database briefly away) is logged and tried
// again at the next tick.
func (m *streamMeter) renew(ctx context.Context, done <-chan struct{}, cut context.CancelCauseFunc) {
	lease := m.h.RetryLease
	t := time.NewTicker(lease / 3)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
			err := m.h.Deliveries.GrantRetryRenew(context.WithoutCancel(ctx), m.grant.ID, m.attempt, lease)
			switch {
			case errors.Is(err, ledger.ErrNotFound):
				cut(errRetryLost)
				return
			case err != nil:
				m.h.Log.WarnContext(ctx, "retry lease renewal failed; retrying", append(m.attrs, "err", err)...)
			}
		}
	}
}

func (m *streamMeter) Take(_ context.Context, n int64) (int64, error) { return n, nil }

func (m *streamMeter) End(ctx context.Context, res deliver.Result) {
	if m.stop != nil {
		m.stop()
	}
	log := m.h.Log
	switch {
	case res.Status == 0 && m.attempt == 1 && ctx.Err() != nil:
		// The client hung up before a byte left: refunded, and a client
		// disconnect, not a server error.
		if m.h.settler.refund(ctx, m.grant, "client_disconnect", m.attrs) {
			log.InfoContext(ctx, "client left before the first byte; claim refunded", m.attrs...)
		}
		return
	case res.Status == 0 && m.attempt == 1:
		if m.h.settler.refund(ctx, m.grant, "storage_error", m.attrs) {
			log.WarnContext(ctx, "storage failed before the first byte; claim refunded", append(m.attrs, "err", res.Err)...)
		}
		return
	case res.Status == 0:
		// A retry claimed nothing to give back: its attempt ends with
		// nothing delivered, and the client may try again.
		log.WarnContext(ctx, "retry failed before the first byte", append(m.attrs, "err", res.Err)...)
	case res.Err != nil:
		// The claim stands: we cannot prove what the client kept.
		log.InfoContext(ctx, "stream ended early", append(m.attrs, "bytes", res.Sent, "bytes_acked", res.Acked, "err", res.Err)...)
	default:
		log.InfoContext(ctx, "streamed", append(m.attrs, "bytes", res.Sent, "bytes_acked", res.Acked)...)
	}
	m.record(ctx, res)
}

// record writes what the attempt delivered (SPEC §1, "Delivery
// evidence"), beside the response rather than in its way: the handler
// returns at once, so that the next request of a kept-alive connection
// does not wait for the write (a commit of its own, which no claim
// transaction can share), unless maxPendingRecords are waiting already:
// then it waits for a place. Handler.WaitRecords waits for the writes
// under way; a process that crashes loses them, as it loses a response
// in flight. It is evidence, not a decision: when the database cannot
// take it, the response has been answered all the same, and the failure
// is logged.
func (m *streamMeter) record(ctx context.Context, res deliver.Result) {
	d := ledger.StreamDelivery{GrantID: m.grant.ID, Attempt: m.attempt, BytesAcked: res.Acked, Measured: res.Measured, Size: m.size, ClientKeys: m.keys}
	ctx = context.WithoutCancel(ctx)
	m.h.recording <- struct{}{}
	m.h.records.Go(func() {
		defer func() { <-m.h.recording }()
		if err := m.h.Deliveries.GrantDeliveryRecord(ctx, d); err != nil {
			m.h.Log.WarnContext(ctx, "delivery not recorded", append(m.attrs, "bytes_acked", res.Acked, "err", err)...)
		}
	})
}

// WaitRecords returns once the delivery records of the stream responses
// that ended were written (or failed); a process that stops calls it
// after its listeners drained.
func (h *Handler) WaitRecords() { h.records.Wait() }
