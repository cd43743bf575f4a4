package gateway

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/pages"
	"github.com/dlgate/dlgate/sessions"
	"github.com/dlgate/dlgate/token"
)

// handleSession serves GET and HEAD /s/{token}: the session's pinned
// object version, whole or in ranges, under its byte budget and its
// concurrency cap (SPEC §3).
func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	tok, ok := s.pathToken(w, r, token.Session, probSessionUnavailable)
	if !ok {
		return
	}
	c, err := s.authenticate(r)
	if err != nil {
		s.refuseCredential(w, r, err)
		return
	}
	x, err := s.warm.session(r.Context(), token.Hash(tok))
	if err != nil {
		s.fail(w, r, err, probSessionUnavailable)
		return
	}
	attrs := []any{"session_id", x.ID, "link_id", x.LinkID}
	if reason := x.Refusal(s.dbTime(x.ReadAt)); reason != "" {
		s.fail(w, r, ledger.Refused(reason), probSessionUnavailable, attrs...)
		return
	}
	// An account-bound session demands its link's verified account (SPEC
	// §3); a session of an unbound link is anonymous (§5).
	if x.AccountID != "" && c.Account != x.AccountID {
		if c.Account == "" {
			requireAccount(w, r)
			return
		}
		s.fail(w, r, ledger.Refused(ledger.ReasonWrongAccount), probSessionUnavailable, attrs...)
		return
	}
	if why := s.previewOf(r); why != "" {
		// A preview draws no budget and takes no slot (SPEC §8).
		s.log.InfoContext(r.Context(), "preview served", append(attrs, "preview", why)...)
		s.metrics.previews.WithLabelValues("session").Inc()
		pages.WritePreview(w, r, pages.Preview{File: s.pageFile(x.Filename, x.Object, x.ExpiresAt), Details: s.previewDetails(x.AccountID), FormMethod: "get"})
		return
	}

	size := x.Object.Size
	var ranges []sessions.Range
	// RFC 9110 §13.1.5: If-Range only matters alongside Range; a validator
	// that does not match means "send me the whole thing".
	if rh := r.Header.Get("Range"); rh != "" && sessions.IfRangeAllows(r.Header.Values("If-Range"), x.Object.ETag, x.Object.LastModified) {
		ranges, err = sessions.ParseRange(rh, size)
		switch {
		case errors.Is(err, sessions.ErrMalformed):
			ranges = nil // RFC 9110 §14.2: a server MUST ignore a Range with a unit it does not understand; we serve 200
		case err != nil:
			// ErrInvalid (§14.2 lets us reject it), ErrUnsatisfiable or
			// ErrTooManyRanges: 416, drawing nothing from the budget.
			w.Header().Set("Content-Range", sessions.UnsatisfiableContentRange(size))
			w.Header().Set("Accept-Ranges", "bytes")
			writeProblem(w, r, probRangeNotSatisfiable, "")
			return
		}
	}

	s.objectHeaders(w, r, x.Object, x.Filename)
	h := w.Header()
	h.Set("Accept-Ranges", "bytes")
	status := http.StatusOK
	var mp *sessions.Multipart
	switch len(ranges) {
	case 0:
		ranges = []sessions.Range{{Start: 0, Length: size}}
	case 1:
		status = http.StatusPartialContent
		h.Set("Content-Range", ranges[0].ContentRange(size))
		h.Set("Content-Length", strconv.FormatInt(ranges[0].Length, 10))
	default:
		status = http.StatusPartialContent
		mp = sessions.NewMultipart(ranges, size, x.Object.ContentType, sessions.RandomBoundary())
		h.Set("Content-Type", mp.ContentType())
		h.Set("Content-Length", strconv.FormatInt(mp.ContentLength(), 10))
	}
	if r.Method == http.MethodHead {
		w.WriteHeader(status)
		return
	}
	s.serveRanges(w, r, x, ranges, mp, status, attrs)
}

// serveRanges holds a concurrency slot and streams the planned ranges,
// drawing byte budget chunk by chunk and returning what it did not send.
func (s *Server) serveRanges(w http.ResponseWriter, r *http.Request, x *ledger.Session, ranges []sessions.Range, mp *sessions.Multipart, status int, attrs []any) {
	// The slot and the budget come from this process's warm copy of the
	// session when an earlier request left them (warm.go), else from the
	// database; whatever is left goes back to the warm copy at the end.
	var need int64
	for _, rg := range ranges {
		need += rg.Length
	}
	lease, kept, err := s.warm.begin(r.Context(), x, need)
	if err != nil {
		if errors.Is(err, ledger.ErrNoSlot) {
			w.Header().Set("Retry-After", "1")
		}
		s.fail(w, r, err, probSessionUnavailable, attrs...)
		return
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	go func() {
		// A lease lost to another process (after a stall longer than the
		// lease) stops the response: that process may stream on the slot.
		select {
		case <-lease.lost:
			cancel(errLeaseLost)
		case <-ctx.Done():
		}
	}()
	// Draw ahead at most a sixteenth of the budget: what one process keeps
	// warm must never starve the session's other requests.
	tap := &budgetTap{s: s, ctx: ctx, sessionID: x.ID, have: kept, left: need, ahead: sessions.DrawAhead(s.WarmBudget, s.Chunk, x.ByteBudget)}
	complete := false
	defer func() { s.warm.end(x.ID, lease, tap.have, complete) }()
	if tap.left > 0 {
		// Draw before the status line: when nothing at all can be sent the
		// answer is still a clean 403 (or 404 for a session that died).
		if err := tap.ensure(); err != nil {
			s.fail(w, r, err, probSessionUnavailable, attrs...)
			return
		}
	}
	v := versionOf(x.Object)
	// As on the link URL: the first bytes within the open timeout, or a
	// 504 before the status line; each next ones within the idle timeout.
	watch := s.watchStore(ctx)
	defer watch.stop()
	opened, first, err := watch.openFirst(s.Store, v, ranges[0].Start, ranges[0].Length, false)
	if err != nil {
		s.fail(w, r, err, probSessionUnavailable, attrs...)
		return
	}
	defer putBuf(first)
	if len(ranges) == 1 && ranges[0].Start == 0 && ranges[0].Length == x.Object.Size {
		// The whole object: checked against its digest (digest.go).
		opened = s.checkWhole(r.Context(), opened, x.Object, attrs)
	}
	var body io.ReadCloser = opened
	if len(first) > 0 {
		body = &prefixed{first: first, ReadCloser: opened}
	}
	// Where this response begins in its connection's byte stream, to
	// charge it what the connection carried (acked.go).
	mark := markStream(r)
	w.WriteHeader(status)
	s.metrics.streaming.Inc()
	defer s.metrics.streaming.Dec()
	rc := http.NewResponseController(w)
	defer clearWriteDeadline(rc)
	for i, rg := range ranges {
		if i > 0 {
			if body, err = watch.openNext(s.Store, v, rg.Start, rg.Length); err != nil {
				break
			}
		}
		if mp != nil {
			if _, err = w.Write(mp.PartHeader(i)); err != nil {
				body.Close()
				break
			}
		}
		err = tap.copy(w, rc, body, rg.Length)
		body.Close()
		if err != nil {
			break
		}
	}
	if err == nil && mp != nil {
		_, err = w.Write(mp.Closing())
	}
	// Written is not yet carried: the bytes still queued in the socket
	// when the client resets the connection never reach it, and go back
	// to the session (acked.go). A whole response waits for its queue to
	// leave, as its last write would have with a smaller send buffer.
	unsent := mark.untransmitted(tap.sent, err != nil, time.Now().Add(s.WriteTimeout))
	tap.have += unsent
	if err == nil && unsent > 0 {
		err = errResetWhileQueued
	}
	if err != nil {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			err = cause
		}
		// The response ends here, short of its Content-Length: the client
		// sees a truncated body and can resume within the session.
		s.log.InfoContext(r.Context(), "session response ended early", append(attrs, "bytes", tap.sent-unsent, "untransmitted", unsent, "err", err)...)
		return
	}
	complete = true
	s.log.InfoContext(r.Context(), "session bytes sent", append(attrs, "bytes", tap.sent, "status", status)...)
}

var (
	errLeaseLost        = errors.New("gateway: concurrency slot lease lost")
	errResetWhileQueued = errors.New("gateway: connection reset before the whole response left the host")
)

// budgetTap draws the session's byte budget in chunks as bytes go out.
// have is drawn but not yet sent; left is what this response still has
// to send, so a draw never asks for more than the response can use.
type budgetTap struct {
	s         *Server
	ctx       context.Context
	sessionID string
	have      int64
	left      int64
	sent      int64
	ahead     int64 // the least to draw at a time (warm sessions)
}

func (b *budgetTap) ensure() error {
	if b.have > 0 {
		return nil
	}
	// At least `ahead`, so that a run of small ranges draws once for
	// many: what this response cannot send stays warm for the others.
	want := sessions.DrawSize(b.left, b.s.Chunk, b.ahead)
	got, err := b.s.warm.fill(b.ctx, b.sessionID, b.left, want)
	if errors.Is(err, ledger.ErrBudgetExhausted) {
		// The rest may be drawn already, warm for this process's next
		// request of the session: a request running alongside uses it.
		if got = b.s.warm.takeBudget(b.ctx, b.sessionID); got > 0 {
			err = nil
		}
	}
	if err != nil {
		return err
	}
	b.have = got
	return nil
}

func (b *budgetTap) copy(w http.ResponseWriter, rc *http.ResponseController, body io.Reader, n int64) error {
	for n > 0 {
		if err := b.ctx.Err(); err != nil {
			return err
		}
		if err := b.ensure(); err != nil {
			return err
		}
		k, err := b.s.copyN(w, rc, body, min(n, b.have))
		b.have -= k
		b.left -= k
		b.sent += k
		n -= k
		if err != nil {
			return err
		}
	}
	return nil
}
