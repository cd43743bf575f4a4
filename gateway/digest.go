package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/storage"
)

// Digests of the representation (SPEC §3, §10): the SHA-256 of the whole
// pinned version, recorded when the gateway stored it or taken from the
// store's own full-object checksum, goes out in two fields, for two
// generations of clients:
//
//   - Repr-Digest: sha-256=:BASE64: (RFC 9530 §3), a Dictionary of Byte
//     Sequences; the digest of the whole representation, so the same on a
//     200, a 206 and a multipart/byteranges answer (§3: "the
//     representation data", not the content of this message).
//   - Digest: SHA-256=BASE64 (RFC 3230 §4.3.2, SHA-256 from RFC 5843),
//     obsoleted by RFC 9530 but what aria2c checks a finished file
//     against.
//
// Both are sent unless the request says SHA-256 is not acceptable
// (Want-Repr-Digest: sha-256=0, Want-Digest: SHA-256;q=0). A preference
// for an algorithm the gateway does not have changes nothing: RFC 9530 §4
// makes preferences hints, "it is not a protocol error if preferences
// are ignored", and nothing is ever refused because of them.

// setDigests sets Repr-Digest and Digest on h for a representation whose
// hex SHA-256 is sum, as the request r accepts them; for an unknown
// digest ("", or anything but 64 hex digits) it sets neither.
func setDigests(h http.Header, r *http.Request, sum string) {
	raw, err := hex.DecodeString(sum)
	if err != nil || len(raw) != sha256.Size {
		return
	}
	b64 := base64.StdEncoding.EncodeToString(raw)
	if acceptsReprDigest(r.Header.Values("Want-Repr-Digest")) {
		h.Set("Repr-Digest", "sha-256=:"+b64+":")
	}
	if acceptsDigest(r.Header.Values("Want-Digest")) {
		h.Set("Digest", "SHA-256="+b64)
	}
}

// acceptsReprDigest reports whether Want-Repr-Digest (RFC 9530 §4) lets
// sha-256 be sent: unless it is a valid Dictionary whose sha-256 member
// is the Integer 0, "not acceptable". A field that does not parse is a
// field not sent.
func acceptsReprDigest(values []string) bool {
	if len(values) == 0 {
		return true
	}
	d, err := sfDictionary(values)
	if err != nil {
		return true
	}
	pref, ok := d["sha-256"]
	return !ok || pref.kind != sfInteger || pref.integer != 0
}

// acceptsDigest reports whether Want-Digest (RFC 3230 §4.3.1:
// #(digest-algorithm [ ";q=" qvalue ]), algorithm names
// case-insensitive) lets SHA-256 be sent: unless SHA-256 is listed with
// qvalue 0. An element with a qvalue that does not parse says nothing.
func acceptsDigest(values []string) bool {
	for _, v := range values {
		for _, elem := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(elem, ";")
			if !strings.EqualFold(strings.TrimSpace(name), "SHA-256") {
				continue
			}
			k, q, _ := strings.Cut(strings.TrimSpace(params), "=")
			if !strings.EqualFold(strings.TrimSpace(k), "q") {
				continue
			}
			if f, err := strconv.ParseFloat(strings.TrimSpace(q), 64); err == nil && f == 0 {
				return false
			}
		}
	}
	return true
}

// checkWhole returns body, a whole version o read from the start, so
// that its bytes are checked against o's digest when the store hands out
// a local file (storage.Filer, the fs store) and the digest is known: a
// version whose bytes no longer match is then never served as complete.
// The file is hashed from its start on a goroutine of its own while the
// response goes out (sendfile still sends it: copyN), and the slice that
// holds the version's last bytes waits for the verdict: on a mismatch it
// is held back (errDigestMismatch, the response ends short of its
// Content-Length) and the mismatch is logged at error with the version
// and attrs. Anything else, an S3 body spliced from socket to socket
// among them, is returned as it is.
func (s *Server) checkWhole(ctx context.Context, body io.ReadCloser, o ledger.Object, attrs []any) io.ReadCloser {
	want, err := hex.DecodeString(o.SHA256)
	filer, local := body.(storage.Filer)
	if !local || err != nil || len(want) != sha256.Size || o.Size == 0 {
		return body
	}
	f := filer.File()
	start, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return body
	}
	id, known, seen := s.verified.has(f)
	if seen {
		return body // this process hashed this very file, unchanged since
	}
	return &checkedFile{body: body, f: f, want: want, start: start, end: start + o.Size, sent: start,
		done: make(chan struct{}),
		matched: func() {
			if known {
				s.verified.add(id)
			}
		},
		mismatch: func(got []byte) {
			s.log.ErrorContext(ctx, "stored object does not match its SHA-256; response cut short",
				append(attrs, "bucket", o.Bucket, "key", o.Key, "version_id", o.VersionID,
					"want_sha256", o.SHA256, "got_sha256", hex.EncodeToString(got))...)
		}}
}

// errDigestMismatch ends a response whose stored bytes do not hash to
// the version's recorded SHA-256: a storage failure, as a short body is.
var errDigestMismatch = fmt.Errorf("gateway: stored object does not match its SHA-256: %w", storage.ErrChanged)

// errUnchecked ends a response whose last bytes could not be checked:
// reading the file for the hash failed.
var errUnchecked = fmt.Errorf("gateway: stored object could not be read to check its SHA-256: %w", storage.ErrUnavailable)

// checkedFile is checkWhole's body. Its bytes go out through File
// (copyN's sendfile, which calls next before each slice) or Read; either
// way, the last ones only once hash, on its own goroutine, has read and
// hashed all of them and they match.
type checkedFile struct {
	body       io.ReadCloser // the store's, a storage.Filer
	f          *os.File
	want       []byte
	start, end int64 // the version's bytes in the file
	sent       int64 // file offset of the next byte the response sends
	failed     bool
	mismatch   func(got []byte)
	matched    func() // the whole file hashed to want

	once sync.Once
	stop atomic.Bool
	done chan struct{} // closed when hash returns, sum or err set
	sum  []byte
	err  error
}

var _ storage.Filer = (*checkedFile)(nil)

func (c *checkedFile) File() *os.File { return c.f }

// Close stops the hash, if it runs, before the file is closed under it.
func (c *checkedFile) Close() error {
	c.stop.Store(true)
	c.once.Do(func() { // never started: nothing to wait for
		c.err = errUnchecked
		close(c.done)
	})
	<-c.done
	return c.body.Close()
}

// hash reads the version from the file (at its own offsets: the file's
// position is sendfile's) and hashes it, until done or stopped.
func (c *checkedFile) hash() {
	defer close(c.done)
	h := sha256.New()
	buf := getBuf()
	defer putBuf(buf)
	for off := c.start; off < c.end; {
		if c.stop.Load() {
			c.err = errUnchecked
			return
		}
		k, err := c.f.ReadAt(buf[:min(c.end-off, int64(len(buf)))], off)
		h.Write(buf[:k])
		off += int64(k)
		if err != nil && off < c.end {
			c.err = fmt.Errorf("%w: %w", errUnchecked, err)
			return
		}
	}
	c.sum = h.Sum(nil)
}

// next is called before the n bytes from the file's position are sent:
// an error means they must not be.
func (c *checkedFile) next(n int64) error {
	c.once.Do(func() { go c.hash() })
	if c.failed {
		return errDigestMismatch
	}
	if c.sent+n >= c.end {
		if err := c.verdict(); err != nil {
			return err
		}
	}
	c.sent += n
	return nil
}

func (c *checkedFile) Read(p []byte) (int, error) {
	c.once.Do(func() { go c.hash() })
	if c.failed {
		return 0, errDigestMismatch
	}
	n, err := c.body.Read(p)
	if n > 0 && c.sent+int64(n) >= c.end {
		if verr := c.verdict(); verr != nil {
			return 0, verr // the last bytes, held back
		}
	}
	c.sent += int64(n)
	return n, err
}

// verdict waits for the hash of every byte and compares it.
func (c *checkedFile) verdict() error {
	<-c.done
	if c.err != nil {
		c.failed = true
		return c.err
	}
	if !bytes.Equal(c.sum, c.want) {
		c.failed = true
		c.mismatch(c.sum)
		return errDigestMismatch
	}
	if c.matched != nil {
		c.matched()
		c.matched = nil
	}
	return nil
}
