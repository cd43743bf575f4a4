package storage

import "io"

// ExactReader reads exactly N more bytes of R, the way the stores hand
// out an object's bytes: the N-th byte is followed by io.EOF (R is not
// read past it), and R's end before it is io.ErrUnexpectedEOF, so that an
// object shorter than its metadata is an error, never a short success.
type ExactReader struct {
	R io.Reader
	N int64 // bytes left
}

func (e *ExactReader) Read(p []byte) (int, error) {
	if e.N <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.N {
		p = p[:e.N]
	}
	n, err := e.R.Read(p)
	e.N -= int64(n)
	switch {
	case e.N == 0:
		return n, io.EOF
	case err == io.EOF:
		return n, io.ErrUnexpectedEOF
	}
	return n, err
}
