package deliver

import (
	"io"
	"net/http"
	"os"
	"time"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/storage"
)

// Short bodies: a store's body ends before its length only with an error
// (storage.Store.Open, storage.ExactReader), and the copy below takes its
// slices with the same reader (sliceOf; storage.CopyFile for a file's
// sendfile, storage.Splicer's WriteNTo for a splice), so that a store
// breaking its promise of the pinned size is a storage failure
// (errShortBody, storage.ErrChanged: 502 before the status line, a
// response cut short after it), never a short 200 and never a copy that
// waits for bytes that will not come.

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
	k, err := io.ReadAtLeast(sliceOf(body, want), buf[:want], int(need))
	if err != nil {
		httpx.PutBuf(buf)
		return nil, err
	}
	return buf[:k], nil
}

// sliceOf is the next n bytes of a store's body, to be read whole: an
// early end is errShortBody.
func sliceOf(body io.Reader, n int64) io.Reader {
	return &storage.ExactReader{R: body, N: n, Short: errShortBody}
}

// writeSlice is the most bytes written between two write-deadline
// extensions: a client that takes longer than WriteTimeout to accept this
// much is gone; a slow one that keeps reading is never cut.
const writeSlice = 1 << 20

// copyN copies exactly n bytes of src to w in slices, renewing the write
// deadline per slice; fewer only with an error. The bytes pass through
// the process only when they must: when src is a file (storage.Filer)
// each slice goes through storage.CopyFile, whose *io.LimitedReader over
// the *os.File net/http hands to the kernel's sendfile; when src arrives
// on a connection it can hand over (storage.Splicer: S3 over plain HTTP),
// the kernel splices it from socket to socket. Anything else is read into
// a pooled buffer and written.
func (p *Pipeline) copyN(w http.ResponseWriter, rc *http.ResponseController, src io.Reader, n int64) (int64, error) {
	// A whole version from a file is hashed beside the copy; its last
	// slice waits for the verdict (checkedFile.next, digest.go).
	check, _ := src.(*checkedFile)
	var file *os.File
	if f, ok := src.(storage.Filer); ok {
		file = f.File()
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
		if file != nil {
			k, err = storage.CopyFile(w, file, step) // w's ReadFrom → sendfile
		} else if sp := spliceSourceOf(src); sp.src != nil {
			k, err = sp.writeN(w, step, deadline) // storage.Splicer: fewer only with an error
		} else {
			if buf == nil {
				buf = httpx.GetBuf()
			}
			k, err = io.CopyBuffer(writerOnly{w}, sliceOf(src, step), buf)
		}
		done += k
		if err != nil {
			return done, err
		}
	}
	return done, nil
}

// writerOnly hides w's ReadFrom so io.CopyBuffer uses our pooled buffer
// instead of allocating one per call.
type writerOnly struct{ io.Writer }

// spliced is a storage.Splicer found inside the gateway's wrappers of a body
// (spliceSourceOf): the watch whose idle timeout bounds it, and the bytes
// a peek took out of it before the status line, still to be written.
type spliced struct {
	src    storage.Splicer
	watch  *storeWatch
	prefix *prefixed
}

// spliceSourceOf finds the storage.Splicer in src, or returns a zero spliced.
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
		case storage.Splicer:
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
		p.drained()
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
