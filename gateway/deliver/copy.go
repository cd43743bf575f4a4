package deliver

import (
	"io"
	"net/http"
	"time"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/storage"
)

// peek reads the first bytes of body (at most httpx.BufSize, at most n) so that
// a store that fails on its first read is noticed before any header or
// byte is sent, while a refund is still honest. With full it waits for
// all of them; otherwise the first read that brings any is enough (the
// store is alive). A file needs no peek: an opened file has no
// first-read surprise worth the copy.
func peek(body io.Reader, n int64, full bool) ([]byte, error) {
	if _, ok := body.(storage.Filer); ok || n == 0 {
		return nil, nil
	}
	buf := httpx.GetBuf()
	want := min(int64(len(buf)), n)
	need := want
	if !full {
		need = 1
	}
	k, err := io.ReadAtLeast(body, buf[:want], int(need))
	if err != nil {
		httpx.PutBuf(buf)
		if err == io.ErrUnexpectedEOF || err == io.EOF {
			return nil, errShortBody
		}
		return nil, err
	}
	return buf[:k], nil
}

// writeSlice is the most bytes written between two write-deadline
// extensions: a client that takes longer than WriteTimeout to accept this
// much is gone; a slow one that keeps reading is never cut.
const writeSlice = 1 << 20

// copyN copies exactly n bytes of src to w in slices, renewing the write
// deadline per slice. The bytes pass through the process only when they
// must: when src is a file (storage.Filer) each slice goes through an
// *io.LimitedReader over the *os.File, which net/http hands to the
// kernel's sendfile; when src arrives on a connection it can hand over
// (connSource: S3 over plain HTTP), the kernel splices it from socket to
// socket. Anything else is read into a pooled buffer and written.
func (p *Pipeline) copyN(w http.ResponseWriter, rc *http.ResponseController, src io.Reader, n int64) (int64, error) {
	// A whole version from a file is hashed beside the copy; its last
	// slice waits for the verdict (checkedFile.next, digest.go).
	check, _ := src.(*checkedFile)
	if f, ok := src.(storage.Filer); ok {
		src = f.File()
	}
	var (
		done int64
		buf  []byte
	)
	defer func() {
		if buf != nil {
			httpx.PutBuf(buf)
		}
	}()
	for done < n {
		step := min(n-done, writeSlice)
		if check != nil {
			if err := check.next(step); err != nil {
				return done, err
			}
		}
		deadline := time.Now().Add(p.WriteTimeout)
		rc.SetWriteDeadline(deadline) //nolint:errcheck // unsupported writers just skip deadlines
		var (
			k   int64
			err error
		)
		if _, isFile := src.(interface{ Fd() uintptr }); isFile {
			k, err = io.Copy(w, &io.LimitedReader{R: src, N: step}) // w's ReadFrom → sendfile
		} else if sp := spliceSourceOf(src); sp.src != nil {
			k, err = sp.writeN(w, step, deadline)
		} else {
			if buf == nil {
				buf = httpx.GetBuf()
			}
			k, err = io.CopyBuffer(writerOnly{w}, &io.LimitedReader{R: src, N: step}, buf)
		}
		done += k
		if err != nil {
			return done, err
		}
		if k < step {
			return done, errShortBody
		}
	}
	return done, nil
}

// writerOnly hides w's ReadFrom so io.CopyBuffer uses our pooled buffer
// instead of allocating one per call.
type writerOnly struct{ io.Writer }

// connSource is a store body that can move its bytes to the response
// itself, without reading them into the process: an S3 body over plain
// HTTP (storage/s3), whose WriteNTo hands its connection to the
// response's ReadFrom, so that the kernel splices the bytes from the
// store's socket to the client's. SetReadDeadline bounds each wait on the
// store; a passed one fails WriteNTo with an error wrapping
// os.ErrDeadlineExceeded, and the copy can go on once it is moved.
type connSource interface {
	WriteNTo(w io.Writer, n int64) (int64, error)
	SetReadDeadline(t time.Time) error
}

// spliced is a connSource found inside the gateway's wrappers of a body
// (spliceSourceOf): the watch whose idle timeout bounds it, and the bytes
// a peek took out of it before the status line, still to be written.
type spliced struct {
	src    connSource
	watch  *storeWatch
	prefix *prefixed
}

// spliceSourceOf finds the connSource in src, or returns a zero spliced.
func spliceSourceOf(src io.Reader) spliced {
	var sp spliced
	for {
		switch r := src.(type) {
		case *prefixed:
			sp.prefix = r
			src = r.ReadCloser
		case *idleReader:
			sp.watch = r.w
			src = r.body
		case connSource:
			sp.src = r
			return sp
		default:
			return spliced{}
		}
	}
}

// writeN writes the peeked bytes still pending, then moves the rest of n
// bytes in the kernel, waiting on the store at most its idle timeout.
func (sp spliced) writeN(w io.Writer, n int64, writeDeadline time.Time) (int64, error) {
	var done int64
	if p := sp.prefix; p != nil && len(p.first) > 0 {
		k, err := w.Write(p.first[:min(int64(len(p.first)), n)])
		p.first = p.first[k:]
		done += int64(k)
		if err != nil {
			return done, err
		}
	}
	if done == n {
		return done, nil
	}
	if sp.watch == nil {
		k, err := sp.src.WriteNTo(w, n-done)
		return done + k, err
	}
	k, err := sp.watch.splice(w, sp.src, n-done, writeDeadline)
	return done + k, err
}

// clearWriteDeadline removes the per-write deadline when a response is
// done, so the next request on a kept-alive connection does not inherit
// a deadline that may already have passed.
func clearWriteDeadline(rc *http.ResponseController) {
	rc.SetWriteDeadline(time.Time{}) //nolint:errcheck // unsupported writers just skip deadlines
}
