// Package storagetest is the conformance suite every storage.Store must
// pass. Each backend's test supplies only a constructor:
//
//	func TestStore(t *testing.T) {
//		storagetest.Exercise(t, func(t *testing.T) (storage.Store, string) {
//			return newIsolatedStore(t), ""
//		})
//	}
package storagetest

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/dlgate/dlgate/storage"
)

// NewStoreFunc returns a store and the bucket the tests should write to
// ("" for the store's default). Every call must return a namespace no other
// call sees, because subtests run in parallel and count versions.
type NewStoreFunc func(t *testing.T) (storage.Store, string)

// Exercise runs the conformance suite against the stores newStore makes.
func Exercise(t *testing.T, newStore NewStoreFunc) {
	t.Helper()
	for _, area := range []func(*testing.T, NewStoreFunc){
		exerciseRoundTrip,
		exerciseVersions,
		exerciseRanges,
		exerciseErrors,
		exerciseLarge,
		exerciseDelete,
		exerciseDigest,
	} {
		area(t, newStore)
	}
}

// DefaultContentType is what both stores record for a Put without a
// content type. S3 itself would say binary/octet-stream; the stores set it
// explicitly so a link's Content-Type does not depend on the backend.
const DefaultContentType = "application/octet-stream"

// MustPut stores data under key and returns the new version.
func MustPut(tb testing.TB, st storage.Store, bucket, key string, data []byte, contentType string) storage.Version {
	tb.Helper()
	v, err := st.Put(tb.Context(), bucket, key, bytes.NewReader(data), int64(len(data)), contentType)
	if err != nil {
		tb.Fatalf("Put(%q, %q, %d bytes) = %v", bucket, key, len(data), err)
	}
	return v
}

// MustStat returns the metadata of ref.
func MustStat(tb testing.TB, st storage.Store, ref storage.Ref) storage.Version {
	tb.Helper()
	v, err := st.Stat(tb.Context(), ref)
	if err != nil {
		tb.Fatalf("Stat(%+v) = %v", ref, err)
	}
	return v
}

// MustRead returns length bytes of v from offset, read through Open.
func MustRead(tb testing.TB, st storage.Store, v storage.Version, offset, length int64) []byte {
	tb.Helper()
	rc, err := st.Open(tb.Context(), v, offset, length)
	if err != nil {
		tb.Fatalf("Open(%s@%s, %d, %d) = %v", v.Key, v.VersionID, offset, length, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		tb.Fatalf("reading %s@%s [%d, +%d): %v", v.Key, v.VersionID, offset, length, err)
	}
	return b
}

// PseudoRandom returns size bytes that depend only on seed, so a test can
// generate an object twice instead of keeping a copy.
func PseudoRandom(seed byte, size int64) io.Reader {
	var key [32]byte
	key[0] = seed
	return io.LimitReader(rand.NewChaCha8(key), size)
}

// OnlyReader hides every method of r but Read, the way an HTTP request
// body looks: no Seek, no WriteTo, no length.
func OnlyReader(r io.Reader) io.Reader { return struct{ io.Reader }{r} }

// QuotedMD5 is the ETag S3 gives a single-part upload of data.
func QuotedMD5(data []byte) string {
	sum := md5.Sum(data)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

func sha256Of(tb testing.TB, r io.Reader) string {
	tb.Helper()
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		tb.Fatalf("hashing: %v", err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// wantErr fails tb unless err wraps target.
func wantErr(tb testing.TB, what string, err, target error) {
	tb.Helper()
	if !errors.Is(err, target) {
		tb.Errorf("%s = %v, want %v", what, err, target)
	}
}

// checkVersion compares the fields Put and Stat must agree on.
func checkVersion(tb testing.TB, what string, got, want storage.Version) {
	tb.Helper()
	if got.Key != want.Key || got.VersionID != want.VersionID || got.Size != want.Size ||
		got.ETag != want.ETag || got.ContentType != want.ContentType {
		tb.Errorf("%s = %+v, want %+v", what, got, want)
	}
	if want.Bucket != "" && got.Bucket != want.Bucket {
		tb.Errorf("%s bucket = %q, want %q", what, got.Bucket, want.Bucket)
	}
}

// contextWithPassedDeadline is a context whose deadline is already over,
// without depending on how long anything takes.
func contextWithPassedDeadline(tb testing.TB) context.Context {
	ctx, cancel := context.WithDeadline(tb.Context(), fixedPast)
	tb.Cleanup(cancel)
	return ctx
}

func isQuoted(etag string) bool {
	return len(etag) >= 2 && strings.HasPrefix(etag, `"`) && strings.HasSuffix(etag, `"`)
}
