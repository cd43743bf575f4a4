package storagetest

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/dlgate/dlgate/storage"
)

// UploadEnv is what the resumable-upload suite needs of a backend.
type UploadEnv struct {
	// Store must implement storage.Uploader.
	Store  storage.Store
	Bucket string
	// Reopen returns a new Store over the same data, as a restarted
	// gateway, or another process, opens it.
	Reopen func(t *testing.T) storage.Store
	// Leftovers lists what the backend holds for uploads that are not
	// finished or aborted (partial files; multipart uploads, temporary
	// objects and every version of them): nothing once each upload is
	// finished or aborted.
	Leftovers func(t *testing.T) []string
}

// NewUploadEnvFunc returns an UploadEnv on a namespace no other call sees.
type NewUploadEnvFunc func(t *testing.T) UploadEnv

// ExerciseUploads runs the suite of storage.Uploader.
func ExerciseUploads(t *testing.T, newEnv NewUploadEnvFunc) {
	t.Run("AppendsOfOddSizesMakeTheObjectPutWouldHaveStored", func(t *testing.T) {
		t.Parallel()
		env := newEnv(t)
		up := uploader(t, env.Store)
		u := mustBegin(t, up, env.Bucket, "odd.bin", -1, "application/x-test")
		size, chunks := oddChunks(u.PartSize)
		u = mustBegin(t, up, env.Bucket, "odd.bin", size, "application/x-test")
		data := readAll(t, PseudoRandom(31, size))
		for _, c := range chunks {
			u = mustAppend(t, up, u, data[u.Offset:u.Offset+c])
		}
		if u.Offset != size {
			t.Fatalf("after the appends Offset = %d, want %d", u.Offset, size)
		}
		if _, err := env.Store.Stat(t.Context(), storage.Ref{Bucket: env.Bucket, Key: "odd.bin"}); !errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Stat before UploadFinish = %v, want ErrNotFound: nothing is visible until then", err)
		}
		v := mustFinish(t, up, u)
		checkUploaded(t, env.Store, v, data, "application/x-test")
		put := MustPut(t, env.Store, env.Bucket, "put.bin", data, "application/x-test")
		if v.ETag != put.ETag || v.SHA256 != put.SHA256 || v.ContentType != put.ContentType {
			t.Errorf("UploadFinish = ETag %s, SHA256 %s, type %q; Put of the same bytes: %s, %s, %q",
				v.ETag, v.SHA256, v.ContentType, put.ETag, put.SHA256, put.ContentType)
		}
		wantNoLeftovers(t, env, "after UploadFinish")
	})

	t.Run("AnUploadResumedByAFreshStoreContinuesWhereItStopped", func(t *testing.T) {
		t.Parallel()
		env := newEnv(t)
		first := uploader(t, env.Store)
		u := mustBegin(t, first, env.Bucket, "resumed.bin", -1, "")
		size, _ := oddChunks(u.PartSize)
		u = mustBegin(t, first, env.Bucket, "resumed.bin", size, "")
		data := readAll(t, PseudoRandom(32, size))
		// Stop short of a part boundary, so the next store must find
		// the bytes the first one could not send as a whole part.
		cut := size/2 + 3
		u = mustAppend(t, first, u, data[:cut])

		second := uploader(t, env.Reopen(t))
		u = mustAppend(t, second, u, data[cut:cut+7])
		third := uploader(t, env.Reopen(t))
		u = mustAppend(t, third, u, data[cut+7:])
		v := mustFinish(t, uploader(t, env.Reopen(t)), u)
		checkUploaded(t, env.Store, v, data, DefaultContentType)
		wantNoLeftovers(t, env, "after UploadFinish")
	})

	t.Run("AFailedAppendChangesNothingTheCallerKept", func(t *testing.T) {
		t.Parallel()
		env := newEnv(t)
		up := uploader(t, env.Store)
		u := mustBegin(t, up, env.Bucket, "failed.bin", -1, "")
		size, _ := oddChunks(u.PartSize)
		u = mustBegin(t, up, env.Bucket, "failed.bin", size, "")
		data := readAll(t, PseudoRandom(33, size))
		u = mustAppend(t, up, u, data[:size/3])
		// A body that breaks off after more than a part's worth: the
		// store may have sent parts and written bytes past u.Offset.
		broken := io.MultiReader(bytes.NewReader(bytes.Repeat([]byte{0xee}, int(size/2))), failingReader{})
		if _, err := up.UploadAppend(t.Context(), u, broken); err == nil {
			t.Fatal("UploadAppend of a body that fails = nil error")
		}
		u = mustAppend(t, uploader(t, env.Reopen(t)), u, data[u.Offset:])
		v := mustFinish(t, up, u)
		checkUploaded(t, env.Store, v, data, DefaultContentType)
	})

	t.Run("AnAbortedUploadLeavesNothingBehind", func(t *testing.T) {
		t.Parallel()
		env := newEnv(t)
		up := uploader(t, env.Store)
		u := mustBegin(t, up, env.Bucket, "aborted.bin", -1, "")
		size, _ := oddChunks(u.PartSize)
		u = mustBegin(t, up, env.Bucket, "aborted.bin", size, "")
		data := readAll(t, PseudoRandom(34, size))
		u = mustAppend(t, up, u, data[:size/2+1])
		u = mustAppend(t, up, u, data[size/2+1:size/2+100]) // another short tail
		small := mustBegin(t, up, env.Bucket, "small.bin", 10, "")
		small = mustAppend(t, up, small, []byte("01234"))
		if len(env.Leftovers(t)) == 0 {
			t.Fatal("Leftovers of two uploads under way = none; the check could not fail")
		}
		for _, x := range []storage.Upload{u, small} {
			if err := up.UploadAbort(t.Context(), x); err != nil {
				t.Fatalf("UploadAbort(%s) = %v", x.Key, err)
			}
			if err := up.UploadAbort(t.Context(), x); err != nil {
				t.Errorf("UploadAbort(%s) again = %v, want nil", x.Key, err)
			}
		}
		wantNoLeftovers(t, env, "after UploadAbort")
		for _, key := range []string{"aborted.bin", "small.bin"} {
			if _, err := env.Store.Stat(t.Context(), storage.Ref{Bucket: env.Bucket, Key: key}); !errors.Is(err, storage.ErrNotFound) {
				t.Errorf("Stat(%s) after UploadAbort = %v, want ErrNotFound", key, err)
			}
		}
	})

	t.Run("SmallAndEmptyUploadsAreStoredAsPutStoresThem", func(t *testing.T) {
		t.Parallel()
		env := newEnv(t)
		up := uploader(t, env.Store)
		for name, data := range map[string][]byte{"empty": nil, "small": []byte("resumable, and small\n")} {
			u := mustBegin(t, up, env.Bucket, name, int64(len(data)), "text/plain")
			for len(data) > 0 && u.Offset < int64(len(data)) {
				end := min(u.Offset+4, int64(len(data)))
				u = mustAppend(t, up, u, data[u.Offset:end])
			}
			v := mustFinish(t, up, u)
			checkUploaded(t, env.Store, v, data, "text/plain")
			if put := MustPut(t, env.Store, env.Bucket, name+".put", data, "text/plain"); v.ETag != put.ETag {
				t.Errorf("%s: UploadFinish ETag %s, Put of the same bytes %s", name, v.ETag, put.ETag)
			}
		}
		wantNoLeftovers(t, env, "after UploadFinish")
	})

	t.Run("ABodyLongerThanTheUploadIsRefused", func(t *testing.T) {
		t.Parallel()
		env := newEnv(t)
		up := uploader(t, env.Store)
		u := mustBegin(t, up, env.Bucket, "long.bin", 8, "")
		u = mustAppend(t, up, u, []byte("0123"))
		_, err := up.UploadAppend(t.Context(), u, bytes.NewReader([]byte("456789")))
		wantErr(t, "UploadAppend(6 bytes onto 4 of 8)", err, storage.ErrInvalid)
		u = mustAppend(t, up, u, []byte("4567"))
		_, err = up.UploadFinish(t.Context(), storage.Upload{})
		wantErr(t, "UploadFinish(not an upload)", err, storage.ErrInvalid)
		short := u
		short.Offset = 7 // what a caller that lost track would send
		_, err = up.UploadFinish(t.Context(), short)
		wantErr(t, "UploadFinish(7 of 8 bytes)", err, storage.ErrInvalid)
		checkUploaded(t, env.Store, mustFinish(t, up, u), []byte("01234567"), DefaultContentType)
	})
}

// oddChunks returns an upload size of about two and a half parts and
// append lengths that end inside parts, on their boundaries and across
// them (parts of 5 MiB where the store has none).
func oddChunks(partSize int64) (int64, []int64) {
	p := partSize
	if p == 0 {
		p = 5 << 20
	}
	chunks := []int64{1, p/3 + 7, p - (p/3 + 8), 2, p + 5, p/7 + 1}
	size := int64(0)
	for _, c := range chunks {
		size += c
	}
	last := 2*p + p/2 + 13 - size
	return size + last, append(chunks, last)
}

func uploader(tb testing.TB, st storage.Store) storage.Uploader {
	tb.Helper()
	up, ok := st.(storage.Uploader)
	if !ok {
		tb.Fatalf("%T does not implement storage.Uploader", st)
	}
	return up
}

// mustBegin begins an upload; size -1 asks only for the part size, with
// an upload of 1 byte that is aborted at once.
func mustBegin(tb testing.TB, up storage.Uploader, bucket, key string, size int64, contentType string) storage.Upload {
	tb.Helper()
	probe := size < 0
	if probe {
		size = 1
	}
	u, err := up.UploadBegin(tb.Context(), bucket, key, size, contentType)
	if err != nil {
		tb.Fatalf("UploadBegin(%q, %d) = %v", key, size, err)
	}
	if u.Offset != 0 || u.Size != size || u.Key != key || u.Bucket == "" {
		tb.Fatalf("UploadBegin(%q, %d) = %+v, want offset 0 of %d and the bucket named", key, size, u, size)
	}
	if probe {
		if err := up.UploadAbort(tb.Context(), u); err != nil {
			tb.Fatalf("UploadAbort = %v", err)
		}
	}
	return u
}

func mustAppend(tb testing.TB, up storage.Uploader, u storage.Upload, data []byte) storage.Upload {
	tb.Helper()
	got, err := up.UploadAppend(tb.Context(), u, OnlyReader(bytes.NewReader(data)))
	if err != nil {
		tb.Fatalf("UploadAppend(%d bytes at %d) = %v", len(data), u.Offset, err)
	}
	if got.Offset != u.Offset+int64(len(data)) {
		tb.Fatalf("UploadAppend(%d bytes at %d) Offset = %d", len(data), u.Offset, got.Offset)
	}
	return got
}

func mustFinish(tb testing.TB, up storage.Uploader, u storage.Upload) storage.Version {
	tb.Helper()
	v, err := up.UploadFinish(tb.Context(), u)
	if err != nil {
		tb.Fatalf("UploadFinish(%s) = %v", u.Key, err)
	}
	return v
}

// checkUploaded fails unless v is a version of data, with its SHA-256,
// as Stat and Open see it.
func checkUploaded(tb testing.TB, st storage.Store, v storage.Version, data []byte, contentType string) {
	tb.Helper()
	if v.Size != int64(len(data)) || v.SHA256 != SHA256Hex(data) || v.ContentType != contentType || v.VersionID == "" || !isQuoted(v.ETag) {
		tb.Fatalf("UploadFinish = %+v, want %d bytes of SHA-256 %s, type %q, a version id and a quoted ETag",
			v, len(data), SHA256Hex(data), contentType)
	}
	got := MustStat(tb, st, storage.Ref{Bucket: v.Bucket, Key: v.Key, VersionID: v.VersionID})
	checkVersion(tb, "Stat of the uploaded version", got, v)
	if cur := MustStat(tb, st, storage.Ref{Bucket: v.Bucket, Key: v.Key}); cur.VersionID != v.VersionID {
		tb.Errorf("current version = %s, want the uploaded %s", cur.VersionID, v.VersionID)
	}
	if b := MustRead(tb, st, got, 0, got.Size); !bytes.Equal(b, data) {
		tb.Errorf("the uploaded version holds other bytes than were appended (SHA-256 %s, want %s)", SHA256Hex(b), SHA256Hex(data))
	}
}

func wantNoLeftovers(tb testing.TB, env UploadEnv, when string) {
	tb.Helper()
	if left := env.Leftovers(tb.(*testing.T)); len(left) > 0 {
		tb.Errorf("%s the store still holds %q", when, left)
	}
}

func readAll(tb testing.TB, r io.Reader) []byte {
	tb.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, io.ErrClosedPipe }
