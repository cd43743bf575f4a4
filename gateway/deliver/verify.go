package deliver

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/storage"
)

// Verified downloads (docs/design.md): a whole version served from a local
// file (the fs store) is hashed while it goes out, and the slice that
// holds its last bytes waits for the verdict, so a version whose bytes no
// longer match its SHA-256 is never served as complete.
//
// The check is a cost sendfile does not have (about half of one stream's
// throughput on two cores), so it is shared and bounded:
//
//   - one check per file at a time: the downloads of one file that run
//     while it is being hashed all wait for that one hash, instead of each
//     hashing the whole file for itself (200 first downloads of a new
//     link used to hash it 200 times at once and starve the claims);
//   - at most hashSlots checks hash at once, half the processors: the
//     other half is left to claims and to sending;
//   - a file this process hashed to its digest is not hashed again while
//     its identity (device, inode, size, modification and change times)
//     is unchanged. Writing to the file, or replacing it, changes its
//     identity and the next download checks it again; a change below the
//     file system (bit rot with no write) is caught only by the first
//     download of each process.

// verifier holds the checks in flight and the files verified. Its zero
// value is ready.
type verifier struct {
	mu       sync.Mutex
	verified map[fileID]struct{}
	running  map[checkKey]*fileCheck
	slots    chan struct{} // made on first use: hashSlots() tokens

	// hashing counts the checks hashing now (a metric), peak the most at
	// once, hashes every hash begun.
	hashing, peak, hashes atomic.Int64
}

// fileID identifies a file and its last change.
type fileID struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64 // nanoseconds
}

// checkKey is what makes two downloads share a check: the same file, the
// same bytes of it, the same digest to match.
type checkKey struct {
	id         fileID
	start, end int64
	want       [sha256.Size]byte
}

// verifiedFilesSize bounds the set; a full set drops one at random.
const verifiedFilesSize = 4096

// hashSlots is how many checks may hash at once: half the processors the
// process may use, at least one.
func hashSlots() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// checkWhole returns body, a whole version o read from the start, so that
// its bytes are checked against o's digest when the store hands out a
// local file (storage.Filer) and the digest is known; anything else, an
// S3 body spliced from socket to socket among them, is returned as it is,
// as is a file this process already verified. On a mismatch the last
// slice is held back (errDigestMismatch: the response ends short of its
// Content-Length) and the mismatch is logged at error with the version
// and attrs. ctx is the response's: a download whose client leaves stops
// waiting for the verdict.
func (p *Pipeline) checkWhole(ctx context.Context, body io.ReadCloser, o storage.Version, attrs []any) io.ReadCloser {
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
	key := checkKey{start: start, end: start + o.Size}
	copy(key.want[:], want)
	check, ok := p.verifier.join(f, key)
	if !ok {
		return body // this process hashed this very file, unchanged since
	}
	return &checkedFile{body: body, f: f, check: check, ctx: ctx, end: key.end, sent: start,
		mismatch: func(got []byte) {
			p.Log.ErrorContext(ctx, "stored object does not match its SHA-256; response cut short",
				append(attrs, "bucket", o.Bucket, "key", o.Key, "version_id", o.VersionID,
					"want_sha256", o.SHA256, "got_sha256", hex.EncodeToString(got))...)
		}}
}

// join returns the check of key's bytes of f that is in flight, or a new
// one, with the caller counted among its users (release ends that);
// ok=false when f was verified and has not changed since. A file whose
// identity cannot be read gets a check of its own.
func (v *verifier) join(f *os.File, key checkKey) (*fileCheck, bool) {
	id, known := fileIdentity(f)
	key.id = id
	v.mu.Lock()
	defer v.mu.Unlock()
	if known {
		if _, seen := v.verified[id]; seen {
			return nil, false
		}
		if c := v.running[key]; c != nil {
			c.users++
			return c, true
		}
	}
	c, err := newFileCheck(v, f, key, known)
	if err != nil {
		// No second descriptor: this download checks alone, on its own
		// file, which it closes only once the hash stopped.
		c = &fileCheck{v: v, f: f, key: key, borrowed: true, quit: make(chan struct{}), ready: make(chan struct{})}
	}
	c.users = 1
	if known && !c.borrowed {
		if v.running == nil {
			v.running = make(map[checkKey]*fileCheck)
		}
		v.running[key] = c
	}
	return c, true
}

// remember records id as verified.
func (v *verifier) remember(id fileID) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.verified == nil {
		v.verified = make(map[fileID]struct{})
	}
	if len(v.verified) >= verifiedFilesSize {
		for k := range v.verified {
			delete(v.verified, k)
			break
		}
	}
	v.verified[id] = struct{}{}
}

// slot returns the semaphore of hashing checks.
func (v *verifier) slot() chan struct{} {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.slots == nil {
		v.slots = make(chan struct{}, hashSlots())
	}
	return v.slots
}

// fileCheck is one hash of a file's bytes, shared by the downloads that
// joined it. It reads its own descriptor of the file (a dup of the first
// download's, at its own offsets), so that any download may end first.
type fileCheck struct {
	v        *verifier
	f        *os.File
	key      checkKey
	shared   bool // registered in v.running under key
	borrowed bool // f is the download's own file, not a dup

	users int // under v.mu
	once  sync.Once
	stop  atomic.Bool
	quit  chan struct{} // closed by release when the last user left
	ready chan struct{} // closed when hash returns: sum or err set
	sum   []byte
	err   error
}

func newFileCheck(v *verifier, f *os.File, key checkKey, shared bool) (*fileCheck, error) {
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	syscall.CloseOnExec(fd)
	return &fileCheck{v: v, f: os.NewFile(uintptr(fd), f.Name()), key: key, shared: shared,
		quit: make(chan struct{}), ready: make(chan struct{})}, nil
}

// begin starts the hash, once.
func (c *fileCheck) begin() {
	c.once.Do(func() { go c.hash() })
}

// release is a user leaving. The last one to leave before the verdict
// stops the hash: nobody waits for it any more.
func (c *fileCheck) release() {
	c.v.mu.Lock()
	c.users--
	last := c.users == 0
	if last && c.shared && c.v.running[c.key] == c {
		delete(c.v.running, c.key)
	}
	c.v.mu.Unlock()
	if last {
		c.stop.Store(true)
		close(c.quit)
		c.once.Do(func() { // never started: nothing will close ready
			c.err = errUnchecked
			c.closeFile()
			close(c.ready)
		})
	}
}

func (c *fileCheck) closeFile() {
	if !c.borrowed {
		c.f.Close()
	}
}

// hash waits for a slot, then reads the bytes of the check (at its own
// offsets: the file's position is sendfile's) and hashes them, until done
// or stopped; a match marks the file verified.
func (c *fileCheck) hash() {
	defer close(c.ready)
	defer c.closeFile()
	slots := c.v.slot()
	select {
	case slots <- struct{}{}:
		defer func() { <-slots }()
	case <-c.quit:
		c.err = errUnchecked
		return
	}
	now := c.v.hashing.Add(1)
	defer c.v.hashing.Add(-1)
	for peak := c.v.peak.Load(); now > peak && !c.v.peak.CompareAndSwap(peak, now); peak = c.v.peak.Load() {
	}
	c.v.hashes.Add(1)
	h := sha256.New()
	buf := httpx.GetBuf()
	defer httpx.PutBuf(buf)
	for off := c.key.start; off < c.key.end; {
		if c.stop.Load() {
			c.err = errUnchecked
			return
		}
		k, err := c.f.ReadAt(buf[:min(c.key.end-off, int64(len(buf)))], off)
		h.Write(buf[:k])
		off += int64(k)
		if err != nil && off < c.key.end {
			c.err = fmt.Errorf("%w: %w", errUnchecked, err)
			return
		}
	}
	c.sum = h.Sum(nil)
	if !bytes.Equal(c.sum, c.key.want[:]) {
		c.err = errDigestMismatch
		return
	}
	if c.shared {
		c.v.remember(c.key.id)
	}
}

// errDigestMismatch ends a response whose stored bytes do not hash to
// the version's recorded SHA-256: a storage failure, as a short body is.
var errDigestMismatch = fmt.Errorf("gateway: stored object does not match its SHA-256: %w", storage.ErrChanged)

// errUnchecked ends a response whose last bytes could not be checked:
// reading the file for the hash failed, or the hash was stopped.
var errUnchecked = fmt.Errorf("gateway: stored object could not be read to check its SHA-256: %w", storage.ErrUnavailable)

// checkedFile is checkWhole's body: one download's view of a shared
// check. Its bytes go out through File (copyN's sendfile, which calls
// next before each slice) or Read; either way, the last ones only once
// the check has hashed all of them and they match.
type checkedFile struct {
	body     io.ReadCloser // the store's, a storage.Filer
	f        *os.File
	check    *fileCheck
	ctx      context.Context
	end      int64 // file offset past the version's last byte
	sent     int64 // file offset of the next byte the response sends
	failed   bool
	mismatch func(got []byte)
	closed   bool
}

var _ storage.Filer = (*checkedFile)(nil)

func (c *checkedFile) File() *os.File { return c.f }

// Close leaves the check, then closes the file. A check that hashes the
// download's own file (no dup could be made) is waited for first, so that
// it never reads a closed file.
func (c *checkedFile) Close() error {
	if !c.closed {
		c.closed = true
		c.check.release()
		if c.check.borrowed {
			<-c.check.ready
		}
	}
	return c.body.Close()
}

// next is called before the n bytes from the file's position are sent:
// an error means they must not be.
func (c *checkedFile) next(n int64) error {
	c.check.begin()
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
	c.check.begin()
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

// verdict waits for the check's verdict, or for the download's client to
// leave.
func (c *checkedFile) verdict() error {
	select {
	case <-c.check.ready:
	case <-c.ctx.Done():
		c.failed = true
		return fmt.Errorf("%w: %w", errUnchecked, context.Cause(c.ctx))
	}
	switch err := c.check.err; {
	case err == errDigestMismatch:
		c.failed = true
		c.mismatch(c.check.sum)
		return err
	case err != nil:
		c.failed = true
		return err
	}
	return nil
}
