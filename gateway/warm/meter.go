package warm

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/dlgate/dlgate/gateway/deliver"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/sessions"
)

// errLeaseLost cuts a response whose concurrency slot another process
// reclaimed (after a stall longer than the lease): that process may
// stream on the slot.
var errLeaseLost = errors.New("gateway: concurrency slot lease lost")

// Meter returns the meter of one response of session x (deliver.Meter):
// it holds a concurrency slot from Begin to End and draws the byte budget
// chunk by chunk as bytes go out, taking first what this process kept
// warm; at the end what it drew and did not send, and what the
// connection never carried, goes back. attrs name the session in logs.
func (w *Sessions) Meter(x *ledger.Session, attrs []any) deliver.Meter {
	return &meter{w: w, x: x, attrs: attrs}
}

type meter struct {
	w     *Sessions
	x     *ledger.Session
	attrs []any

	lease  *slotLease
	cancel context.CancelCauseFunc
	have   int64 // drawn and not yet granted
	left   int64 // what this response still has to send
	ahead  int64 // the least to draw at a time (1 for a long response)
}

// Begin takes a slot (one this process keeps idle, or a new lease) and the
// budget kept warm, then draws before the status line: when nothing at
// all can be sent the answer is still a clean 403 (or 404 for a session
// that died). Errors: ledger.ErrNoSlot (after the slot wait),
// ledger.ErrBudgetExhausted, a refusal, ErrUnavailable.
func (m *meter) Begin(ctx context.Context, need int64) (context.Context, error) {
	lease, kept, err := m.w.begin(ctx, m.x, need)
	if err != nil {
		return nil, err
	}
	m.lease, m.have, m.left = lease, kept, need
	// Draw ahead at most a sixteenth of the budget: what one process
	// keeps warm must never starve the session's other requests. Only a
	// response shorter than that draws ahead at all: a run of small
	// ranges then draws once for many, while a long one (a whole
	// download above all) draws no more than it still has to send. What
	// a process holds warm is drawn in the database's count, and a GET
	// without Range goes back to its client's session only when the
	// undrawn budget covers the object (SessionMint): a whole response
	// that drew past its end would make the next whole GET claim anew.
	// Its first draw is at least ahead anyway, so this changes only the
	// tail of a response longer than a chunk: a 100 MiB download drew
	// 104 MiB and held 4 MiB warm for WarmIdle; ranges draw as before.
	if m.ahead = sessions.DrawAhead(m.w.Keep, m.w.Chunk, m.x.ByteBudget); need >= m.ahead {
		m.ahead = 1
	}
	rctx, cancel := context.WithCancelCause(ctx)
	unwatch := context.AfterFunc(lease.lostCtx, func() { cancel(errLeaseLost) })
	m.cancel = func(cause error) {
		unwatch()
		cancel(cause)
	}
	if m.left > 0 {
		if err := m.ensure(rctx); err != nil {
			m.end(false, carried{})
			cancel(nil)
			return nil, err
		}
	}
	return rctx, nil
}

// ensure draws when nothing drawn is left: at least ahead, so that a run
// of small ranges draws once for many; what this response cannot send
// stays warm for the others. A response at least ahead long draws the
// next chunk of what it has left, never past its end.
func (m *meter) ensure(ctx context.Context) error {
	if m.have > 0 {
		return nil
	}
	want := sessions.DrawSize(m.left, m.w.Chunk, m.ahead)
	got, err := m.w.fill(ctx, m.x.ID, m.left, want)
	if errors.Is(err, ledger.ErrBudgetExhausted) {
		// The rest may be drawn already, warm for this process's next
		// request of the session: a request running alongside uses it.
		if got = m.w.takeBudget(ctx, m.x.ID); got > 0 {
			err = nil
		}
	}
	if err != nil {
		return err
	}
	m.have = got
	return nil
}

// Take grants what is drawn, drawing again when it is spent.
func (m *meter) Take(ctx context.Context, n int64) (int64, error) {
	if err := m.ensure(ctx); err != nil {
		return 0, err
	}
	k := min(n, m.have)
	m.have -= k
	m.left -= k
	return k, nil
}

// End gives back what was drawn and not sent or not carried, and the
// slot: after a complete response the slot and the rest stay warm for the
// session's next request (warm.end). The ranges its client acknowledged
// join the session's evidence, reported with the budget returns.
func (m *meter) End(ctx context.Context, res deliver.Result) {
	if m.lease == nil {
		return // Begin failed, or the store could not be opened: nothing held
	}
	defer m.cancel(nil)
	m.have += res.Granted - res.Sent + res.Unsent
	complete := res.Err == nil && res.Status != 0
	m.end(complete, carried{covered: res.Covered, measured: res.Measured})
	log := m.w.Log
	switch {
	case res.Status == 0:
	case res.Err != nil:
		// The response ends here, short of its Content-Length: the
		// client sees a truncated body and can resume within the session.
		log.LogAttrs(ctx, slog.LevelInfo, "session response ended early", slog.Group("", m.attrs...),
			slog.Int64("bytes", res.Sent-res.Unsent), slog.Int64("untransmitted", res.Unsent), slog.Int64("bytes_acked", res.Acked), slog.Any("err", res.Err))
	default:
		// One a range: the record goes to the handler as LogAttrs would
		// hand it, without the caller's PC it takes (runtime.Callers; no
		// source is logged), the session's attributes inline as the
		// group of the line above writes them.
		if !log.Enabled(ctx, slog.LevelInfo) {
			return
		}
		r := slog.NewRecord(time.Now(), slog.LevelInfo, "session bytes sent", 0)
		r.Add(m.attrs...)
		r.AddAttrs(slog.Int64("bytes", res.Sent), slog.Int64("bytes_acked", res.Acked), slog.Int("status", res.Status))
		log.Handler().Handle(ctx, r) //nolint:errcheck // as LogAttrs: nowhere to report it
	}
}

func (m *meter) end(complete bool, acked carried) {
	m.w.end(m.x.ID, m.lease, m.have, complete, acked)
	m.lease = nil
}
