package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"

	"github.com/dlgate/dlgate/storage"
)

// connBody is the body of a response that arrived on one of connClient's
// connections. Read reads it as net/http's body would; WriteNTo moves it
// to a writer with ReadFrom without passing through a buffer of ours.
//
// The connection goes back to connClient when the body has been read to
// its end without error; closing it earlier, an error, or a cancelled
// context closes the connection instead. It is not safe for concurrent
// use, like any response body.
// A body on a connection of the store's own can splice (storage.Splicer).
var _ storage.Splicer = (*connBody)(nil)

type connBody struct {
	c    *connClient
	pc   *conn
	ctx  context.Context
	stop func() bool // stops the context's interrupt

	// left is what the Content-Length still promises; framed is
	// net/http's reader of a body framed otherwise (chunked, or until
	// the connection closes).
	left   int64
	framed io.ReadCloser

	stall      time.Duration
	renewAt    time.Time // when the read deadline needs pushing back
	callerSet  bool      // SetReadDeadline set one: the caller bounds the waits
	progressAt time.Time // when a byte last arrived

	reusable bool
	done     bool  // the connection was given back or closed
	err      error // sticky: the body cannot be read on
}

var errBodyClosed = errors.New("s3: read on a closed response body")

// renew keeps the read deadline between stall and 9/8 stall ahead while
// the store's own stall timeout bounds the reads. Pushing it on every
// Read would cost a timer update per read for nothing; this costs one
// per stall/8.
func (b *connBody) renew() {
	if b.done {
		return // the connection may be another request's by now
	}
	now := time.Now()
	if now.Before(b.renewAt) {
		return
	}
	b.pc.tcp.SetReadDeadline(now.Add(b.stall + b.stall/8)) //nolint:errcheck // fails only on a closed connection, which the read reports
	b.renewAt = now.Add(b.stall / 8)
	if b.ctx.Err() != nil {
		// The context ended between its interrupt and this renewal,
		// which would otherwise have undone it.
		b.pc.interrupt()
	}
}

// SetReadDeadline bounds the wait for the store's next bytes from now on,
// as net.Conn's does: a Read or WriteNTo waiting past t fails with an
// error that wraps os.ErrDeadlineExceeded, and the body can be read on
// after the deadline is moved. The zero time gives the bound back to the
// store's stall timeout. A silence of the store longer than the stall
// timeout still ends the body for good, whatever the deadline.
func (b *connBody) SetReadDeadline(t time.Time) error {
	if b.done {
		return nil // nothing waits on this body any more
	}
	b.callerSet = !t.IsZero()
	if !b.callerSet {
		b.renewAt = time.Time{}
		b.renew()
		return nil
	}
	err := b.pc.tcp.SetReadDeadline(t)
	if b.ctx.Err() != nil {
		b.pc.interrupt()
	}
	return err
}

func (b *connBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	if b.framed == nil && b.left <= 0 {
		// Read to its end: the connection went back to connClient.
		return 0, io.EOF
	}
	if !b.callerSet {
		b.renew()
	}
	if b.framed != nil {
		n, err := b.framed.Read(p)
		if err != nil && err != io.EOF {
			err = b.fail(err)
		}
		return n, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	// bufio hands a read at least its size straight to the connection.
	n, err := b.pc.br.Read(p)
	b.left -= int64(n)
	if n > 0 {
		b.progressAt = time.Time{}
	}
	switch {
	case b.left == 0:
		b.release()
		return n, io.EOF
	case err == io.EOF:
		return n, b.fail(io.ErrUnexpectedEOF)
	case err != nil:
		return n, b.fail(err)
	}
	return n, nil
}

// WriteNTo writes the next n bytes of the body to w, or fewer with an
// error (a body that ends early is storage.ErrUnavailable). When w has
// ReadFrom, as net/http's response writer does, the bytes after those
// already buffered go through it with the connection itself as the
// source: net.TCPConn.ReadFrom then has the kernel splice them from this
// socket to the client's (Linux), and they are never copied into the
// process.
//
// The waits on the store and on w are not told apart inside such a
// copy: a deadline set with SetReadDeadline can pass while w is slow to
// accept, and then the error wraps os.ErrDeadlineExceeded with the
// bytes written so far; the body can be read on once the deadline is
// moved. After any other error the body is unusable: bytes taken from
// the store may not have reached w.
func (b *connBody) WriteNTo(w io.Writer, n int64) (int64, error) {
	if b.err != nil {
		return 0, b.err
	}
	rf, ok := w.(io.ReaderFrom)
	if !ok || b.framed != nil {
		return io.CopyN(struct{ io.Writer }{w}, struct{ io.Reader }{b}, n)
	}
	n = min(n, b.left)
	if n <= 0 {
		return 0, nil // at the end, the connection may be another request's
	}
	var done int64
	if k := b.pc.br.Buffered(); k > 0 && n > 0 {
		// Bytes that came with the headers are ours already.
		p, _ := b.pc.br.Peek(int(min(int64(k), n)))
		m, err := w.Write(p)
		b.pc.br.Discard(m) //nolint:errcheck // m ≤ Buffered
		done += int64(m)
		b.left -= int64(m)
		if err != nil {
			b.reusable = false
			return done, err
		}
	}
	if !b.callerSet {
		b.renew()
	}
	for done < n {
		lr := io.LimitedReader{R: b.pc.tcp, N: n - done}
		k, err := rf.ReadFrom(&lr)
		done += k
		b.left -= k
		if k > 0 {
			b.progressAt = time.Time{}
		}
		if err == nil && k == 0 {
			err = io.ErrUnexpectedEOF // the store closed the connection
		}
		if err != nil {
			b.reusable = false
			return done, b.fail(err)
		}
	}
	if b.left == 0 {
		b.release()
	}
	return done, nil
}

// fail turns a failed read into the body's error: the context's when it
// ended; the caller's deadline passing, which can be moved and read on;
// otherwise the end of the body, with the storage error it means where
// that is known.
func (b *connBody) fail(err error) error {
	if cerr := b.ctx.Err(); cerr != nil {
		b.err = cerr
		b.discard()
		return b.err
	}
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded) && b.callerSet && !b.silentTooLong():
		return err
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.err = fmt.Errorf("s3 GetObject body: %w: %w", storage.ErrTimeout, &awshttp.ResponseTimeoutError{TimeoutDur: b.stall})
	case errors.Is(err, io.ErrUnexpectedEOF):
		b.err = fmt.Errorf("s3 GetObject body: %w: %w", storage.ErrUnavailable, io.ErrUnexpectedEOF)
	default:
		b.err = err
	}
	b.discard()
	return b.err
}

// silentTooLong reports whether the store has sent nothing for its stall
// timeout. It starts counting at the first wait without progress, which
// is never before the last byte arrived.
func (b *connBody) silentTooLong() bool {
	now := time.Now()
	if b.progressAt.IsZero() {
		b.progressAt = now
		return false
	}
	return now.Sub(b.progressAt) >= b.stall
}

// release gives the connection back for reuse, unless something makes
// that unsafe; the body is complete.
func (b *connBody) release() {
	if b.done {
		return
	}
	b.done = true
	// stop fails when the context's interrupt already ran or runs.
	if b.stop() && b.reusable && b.err == nil && b.framed == nil {
		b.c.put(b.pc)
		return
	}
	b.pc.close()
}

// discard closes the connection: the body was not read to its end.
func (b *connBody) discard() {
	if b.done {
		return
	}
	b.done = true
	b.stop()
	b.pc.close()
}

func (b *connBody) Close() error {
	if b.framed != nil {
		b.framed.Close()
	}
	if b.left == 0 && b.framed == nil && b.err == nil {
		b.release()
	} else {
		b.discard()
	}
	if b.err == nil {
		b.err = errBodyClosed
	}
	return nil
}
