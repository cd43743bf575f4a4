package storage

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// ExactReader reads exactly N more bytes of R: the one way the project
// checks a body's length, whether it is an object's bytes handed out by
// a store (Open) or a body handed to one (Put). The N-th byte is followed
// by io.EOF (R is not read past it), and R's end before it (io.EOF, or
// R's own io.ErrUnexpectedEOF) is an error wrapping Short and
// io.ErrUnexpectedEOF, so that a body shorter than its length is an
// error, never a short success. Once R ended wrongly, every later Read
// returns the same error.
type ExactReader struct {
	R io.Reader
	N int64 // bytes left
	// Short says what an early end means to the reader's owner, and is
	// wrapped in its error: ErrChanged for a stored file shorter than its
	// version, ErrUnavailable for a store's connection that broke off;
	// nil for a body to store, whose shortness is its sender's fault.
	Short error
	// Whole refuses an R longer than N as well: before the last bytes are
	// handed out, R is probed for one more, and if it has one, those
	// bytes are held back and the error wraps ErrTooLong. A store given a
	// body of a declared size then refuses it before its last byte leaves,
	// and keeps nothing.
	Whole bool

	err error
}

// ErrTooLong is a body longer than its declared length (ExactReader.Whole).
var ErrTooLong = errors.New("body is longer than its declared length")

func (e *ExactReader) Read(p []byte) (int, error) {
	switch {
	case e.err != nil:
		return 0, e.err
	case e.N <= 0:
		return 0, io.EOF
	}
	if int64(len(p)) > e.N {
		p = p[:e.N]
	}
	n, err := e.R.Read(p)
	e.N -= int64(n)
	switch {
	case e.N > 0 && (err == io.EOF || err == io.ErrUnexpectedEOF):
		e.err = shortError(e.Short, e.N)
		return n, e.err
	case e.N > 0 || !e.Whole:
		if e.N == 0 {
			err = io.EOF
		}
		return n, err
	case err == io.EOF:
		return n, io.EOF
	case err != nil:
		e.err = err
		return n, err
	}
	if err := e.probe(); err != nil {
		return 0, err
	}
	return n, io.EOF
}

// probe reads R past the N bytes: nil when R ends there.
func (e *ExactReader) probe() error {
	var one [1]byte
	for range 100 {
		n, err := e.R.Read(one[:])
		switch {
		case n > 0:
			e.err = ErrTooLong
		case err == io.EOF:
			return nil
		case err != nil:
			e.err = err
		default:
			continue
		}
		return e.err
	}
	e.err = io.ErrNoProgress
	return e.err
}

// shortError is the error of a body that ended missing bytes short of
// its length.
func shortError(short error, missing int64) error {
	if short == nil {
		return fmt.Errorf("body ended %d bytes short: %w", missing, io.ErrUnexpectedEOF)
	}
	return fmt.Errorf("%w: body ended %d bytes short: %w", short, missing, io.ErrUnexpectedEOF)
}

// CopyFile copies exactly n bytes of f, a stored object's file (Filer),
// from its offset to w, through an *io.LimitedReader over f: the shape
// net/http's response writer and *net.TCPConn hand to the kernel's
// sendfile. A file that ends before them has changed since its version
// was pinned: the error is an ExactReader's with Short ErrChanged.
func CopyFile(w io.Writer, f *os.File, n int64) (int64, error) {
	lr := &io.LimitedReader{R: f, N: n}
	k, err := io.Copy(w, lr)
	if err == nil && lr.N > 0 {
		err = shortError(ErrChanged, lr.N)
	}
	return k, err
}
