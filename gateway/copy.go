package gateway

import (
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/dlgate/dlgate/storage"
)

// bufSize is the pooled copy buffer: memory per download is constant
// whatever the object size.
const bufSize = 64 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, bufSize); return &b }}

func getBuf() []byte { return *(bufPool.Get().(*[]byte)) }

func putBuf(b []byte) {
	if cap(b) == bufSize {
		b = b[:bufSize]
		bufPool.Put(&b)
	}
}

// peek reads the first bytes of body (at most bufSize, at most n) so that
// a store that fails on its first read is noticed before any header or
// byte is sent, while a refund is still honest. With full it waits for
// all of them; otherwise the first read that brings any is enough (the
// store is alive). A file needs no peek: an opened file has no
// first-read surprise worth the copy.
func peek(body io.Reader, n int64, full bool) ([]byte, error) {
	if _, ok := body.(storage.Filer); ok || n == 0 {
		return nil, nil
	}
	buf := getBuf()
	want := min(int64(len(buf)), n)
	need := want
	if !full {
		need = 1
	}
	k, err := io.ReadAtLeast(body, buf[:want], int(need))
	if err != nil {
		putBuf(buf)
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

// copyBody writes first, then the next n-len(first) bytes of body to w.
// It returns the body bytes written. A short body is an error.
func (s *Server) copyBody(w http.ResponseWriter, body io.Reader, first []byte, n int64) (int64, error) {
	rc := http.NewResponseController(w)
	defer clearWriteDeadline(rc)
	var sent int64
	if len(first) > 0 {
		rc.SetWriteDeadline(time.Now().Add(s.WriteTimeout)) //nolint:errcheck // unsupported writers just skip deadlines
		k, err := w.Write(first)
		sent += int64(k)
		if err != nil {
			return sent, err
		}
	}
	k, err := s.copyN(w, rc, body, n-sent)
	return sent + k, err
}

// copyN copies exactly n bytes of src to w in slices, renewing the write
// deadline per slice. When src is a file (storage.Filer) each slice goes
// through an *io.LimitedReader over the *os.File, which net/http hands to
// the kernel's sendfile.
func (s *Server) copyN(w http.ResponseWriter, rc *http.ResponseController, src io.Reader, n int64) (int64, error) {
	if f, ok := src.(storage.Filer); ok {
		src = f.File()
	}
	var (
		done int64
		buf  []byte
	)
	defer func() {
		if buf != nil {
			putBuf(buf)
		}
	}()
	for done < n {
		step := min(n-done, writeSlice)
		rc.SetWriteDeadline(time.Now().Add(s.WriteTimeout)) //nolint:errcheck // see copyBody
		lr := &io.LimitedReader{R: src, N: step}
		var (
			k   int64
			err error
		)
		if _, isFile := src.(interface{ Fd() uintptr }); isFile {
			k, err = io.Copy(w, lr) // w's ReadFrom → sendfile
		} else {
			if buf == nil {
				buf = getBuf()
			}
			k, err = io.CopyBuffer(writerOnly{w}, lr, buf)
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

// clearWriteDeadline removes the per-write deadline when a response is
// done, so the next request on a kept-alive connection does not inherit
// a deadline that may already have passed.
func clearWriteDeadline(rc *http.ResponseController) {
	rc.SetWriteDeadline(time.Time{}) //nolint:errcheck // see copyBody
}
