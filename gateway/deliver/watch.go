package deliver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
	"time"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/storage"
)

// The two ways a store can stall a response. Both are storage.ErrTimeout:
// before the status line that is a 504 (and a refund on the link URL);
// after it, the response is cut short of its Content-Length.
var (
	errOpenTimeout = fmt.Errorf("gateway: no first byte from the store within the open timeout: %w", storage.ErrTimeout)
	errIdleTimeout = fmt.Errorf("gateway: no byte from the store within the idle timeout: %w", storage.ErrTimeout)
)

// storeWatch bounds every wait of one response on the store. A stopped
// S3 server with its connections open answers nothing and closes nothing,
// and a read blocked on its body can only be interrupted by cancelling the
// context the body was opened with. So the watch owns that context (ctx,
// to pass to Store.Open) and timers that cancel it, with the limit that
// passed as the cause. A store's reader must return once ctx is cancelled
// (an S3 body does; a local file is not interruptible, but its reads do
// not stall short of a broken disk).
type storeWatch struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	open   time.Duration
	idle   time.Duration
}

// watch returns a watch under parent; stop it when the response ends.
func (p *Pipeline) watch(parent context.Context) *storeWatch {
	ctx, cancel := context.WithCancelCause(parent)
	return &storeWatch{ctx: ctx, cancel: cancel, open: p.OpenTimeout, idle: p.IdleTimeout}
}

func (w *storeWatch) stop() { w.cancel(nil) }

// openFirst opens length bytes of v from offset and reads the first of
// them (peek, full or not), all within the open timeout: the time to
// first byte, so that a store that fails on its first read is noticed
// before the status line, while a stream claim can still be refunded. The
// reader it returns gives those bytes first and is bounded by the idle
// timeout (idleReader). Past the open timeout the error is
// errOpenTimeout.
func (w *storeWatch) openFirst(st storage.Store, v storage.Version, offset, length int64, full bool) (io.ReadCloser, error) {
	t := time.AfterFunc(w.open, func() { w.cancel(errOpenTimeout) })
	body, err := st.Open(w.ctx, v, offset, length)
	var first []byte
	if err == nil {
		first, err = peek(body, length, full)
	}
	if !t.Stop() && err == nil {
		// The limit passed as the first bytes arrived; the body's context
		// is (about to be) cancelled, so it cannot be read on.
		err = errOpenTimeout
	}
	if err != nil {
		if body != nil {
			body.Close()
		}
		httpx.PutBuf(first)
		return nil, w.explain(err)
	}
	if len(first) == 0 {
		return w.reader(body), nil
	}
	return &prefixed{first: first, buf: first, ReadCloser: w.reader(body)}, nil
}

// openNext opens a further range of a response that is already under way:
// its status line is out, so the wait is bounded by the idle timeout.
func (w *storeWatch) openNext(st storage.Store, v storage.Version, offset, length int64) (io.ReadCloser, error) {
	t := time.AfterFunc(w.idle, func() { w.cancel(errIdleTimeout) })
	body, err := st.Open(w.ctx, v, offset, length)
	if !t.Stop() && err == nil {
		body.Close()
		err = errIdleTimeout
	}
	if err != nil {
		return nil, w.explain(err)
	}
	return w.reader(body), nil
}

// explain returns err, or the limit that passed when the watch's timer is
// why the store call failed (the store itself only saw a cancellation).
func (w *storeWatch) explain(err error) error {
	if err == nil || err == io.EOF {
		return err
	}
	switch cause := context.Cause(w.ctx); cause {
	case errOpenTimeout, errIdleTimeout:
		if err == cause {
			return err
		}
		return fmt.Errorf("%w (the store call ended with: %v)", cause, err)
	}
	return err
}

// reader bounds each Read of body by the idle timeout. A file keeps its
// storage.Filer ability, so the kernel can still sendfile it: its reads
// cannot be interrupted anyway. A body that can splice (storage.Splicer) keeps
// it through the wrapper: copyN finds it, and bounds its waits with
// splice.
func (w *storeWatch) reader(body io.ReadCloser) io.ReadCloser {
	if _, ok := body.(storage.Filer); ok {
		return body
	}
	r := &idleReader{body: body, w: w, start: time.Now()}
	r.timer = time.AfterFunc(time.Hour, r.check)
	r.timer.Stop()
	return r
}

// idleReader is a store body whose every Read must make progress within
// the idle timeout; otherwise the watch's context is cancelled, which
// makes the blocked Read return, and the error is errIdleTimeout. Time
// spent writing to the client does not count: only a Read in progress
// is timed.
//
// A Read only notes when it started; one timer, armed by the first Read,
// looks at the Read in progress when it could have waited the idle
// timeout, and goes back to sleep until then otherwise. Resetting a timer
// around every Read, 16,000 times per GiB, would cost more than the
// check.
type idleReader struct {
	body  io.ReadCloser
	w     *storeWatch
	start time.Time   // origin of reading
	timer *time.Timer // runs check
	armed bool        // the first Read armed timer
	// reading is when the Read in progress started, in nanoseconds
	// after start plus one; 0 between Reads.
	reading atomic.Int64
	fired   atomic.Bool // check cut the response
	closed  atomic.Bool
}

func (r *idleReader) since() int64 { return int64(time.Since(r.start)) + 1 }

func (r *idleReader) Read(p []byte) (int, error) {
	if !r.armed {
		r.armed = true
		r.timer.Reset(r.w.idle)
	}
	r.reading.Store(r.since())
	n, err := r.body.Read(p)
	r.reading.Store(0)
	if err == nil && r.fired.Load() {
		// The bytes that did arrive are good; the next Read would fail on
		// the cancelled context anyway.
		err = errIdleTimeout
	}
	return n, r.w.explain(err)
}

// check runs on the timer: it cuts the response when the Read in
// progress has waited the idle timeout, and otherwise sleeps until the
// Read in progress, or one starting now, could have.
func (r *idleReader) check() {
	if r.closed.Load() {
		return
	}
	next := r.w.idle
	if started := r.reading.Load(); started != 0 {
		waited := time.Duration(r.since() - started)
		if waited >= r.w.idle {
			r.fired.Store(true)
			r.w.cancel(errIdleTimeout)
			return
		}
		next = r.w.idle - waited
	}
	r.timer.Reset(next)
}

func (r *idleReader) Close() error {
	r.closed.Store(true)
	r.timer.Stop()
	return r.body.Close()
}

// splice moves n bytes of src to dst in the kernel (storage.Splicer.WriteNTo),
// under the limit reader puts on Reads: the store may leave the response
// waiting at most the idle timeout for its next byte, while time spent
// on a slow client does not count. Inside one kernel copy the two waits
// cannot be told apart, so the store's read deadline runs in windows of
// an eighth of the idle timeout: a window that ends with bytes moved
// proves the store alive (and the wait starts again then), one that ends
// with none was spent waiting on the store alone. The response is cut
// when those add up to the idle timeout: after between 1 and 9/8 idle
// timeouts without a byte. A deadline error past writeDeadline, the
// client's, is the client's failure and is returned as it is.
func (w *storeWatch) splice(dst io.Writer, src storage.Splicer, n int64, writeDeadline time.Time) (int64, error) {
	window := max(w.idle/8, time.Millisecond)
	var done int64
	quiet := time.Now() // since when the store has moved nothing
	for done < n {
		deadline := time.Now().Add(window)
		if end := quiet.Add(w.idle); end.Before(deadline) {
			deadline = end
		}
		// A millisecond late, so that the last window ends past the limit.
		src.SetReadDeadline(deadline.Add(time.Millisecond)) //nolint:errcheck // a closed body fails the copy
		k, err := src.WriteNTo(dst, n-done)
		done += k
		if err == nil {
			continue
		}
		switch now := time.Now(); {
		case context.Cause(w.ctx) != nil:
			return done, w.explain(err)
		case !errors.Is(err, os.ErrDeadlineExceeded) || !now.Before(writeDeadline):
			return done, err
		case k > 0:
			quiet = now
		case now.Sub(quiet) >= w.idle:
			w.cancel(errIdleTimeout)
			return done, errIdleTimeout
		}
	}
	return done, nil
}

// prefixed reads first, then body: the bytes a peek took out of body
// before the status line, put back in front of it. The peek's buffer goes
// back to the pool as soon as its bytes were handed on (drained), not at
// the end of the response: a download of a gigabyte would otherwise hold
// 64 KiB it no longer needs for its whole length (200 S3 downloads at
// once: 12.8 MiB of the gateway's memory), and at the latest on Close.
type prefixed struct {
	first []byte
	buf   []byte
	io.ReadCloser
}

func (p *prefixed) Read(b []byte) (int, error) {
	if len(p.first) > 0 {
		n := copy(b, p.first)
		p.first = p.first[n:]
		p.drained()
		return n, nil
	}
	return p.ReadCloser.Read(b)
}

// drained gives the peek's buffer back once its bytes were handed on.
func (p *prefixed) drained() {
	if len(p.first) == 0 && p.buf != nil {
		httpx.PutBuf(p.buf)
		p.buf, p.first = nil, nil
	}
}

func (p *prefixed) Close() error {
	p.first = nil
	p.drained()
	return p.ReadCloser.Close()
}
