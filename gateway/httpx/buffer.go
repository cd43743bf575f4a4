package httpx

import "sync"

// BufSize is the pooled copy buffer: memory per download is constant
// whatever the object size. A copy through it reads and writes 64 KiB at
// a time; the paths that matter for speed do not copy at all (sendfile
// from the fs store, splice from an S3 connection).
const BufSize = 64 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, BufSize); return &b }}

// GetBuf takes a BufSize buffer from the pool.
func GetBuf() []byte { return *(bufPool.Get().(*[]byte)) }

// PutBuf gives b back to the pool; a buffer of another size is dropped.
func PutBuf(b []byte) {
	if cap(b) == BufSize {
		b = b[:BufSize]
		bufPool.Put(&b)
	}
}
