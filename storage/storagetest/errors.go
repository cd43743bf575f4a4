package storagetest

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/dlgate/dlgate/storage"
)

var fixedPast = time.Unix(1, 0)

// InvalidKeys are keys every store must refuse with storage.ErrInvalidKey.
var InvalidKeys = []string{"", "../x", "/abs", "a\x00b", "a/../b", "a/./b", "..", "a\\b", "a\nb", "bad\xffutf8", strings.Repeat("k", storage.MaxKeyLen+1)}

func exerciseErrors(t *testing.T, newStore NewStoreFunc) {
	t.Run("MissingKeyIsNotFound", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)

		_, err := st.Stat(t.Context(), storage.Ref{Bucket: bucket, Key: "never/written"})
		wantErr(t, "Stat(missing key)", err, storage.ErrNotFound)
	})

	t.Run("MissingVersionIsNotFound", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		// A real version id of another key is well formed on every
		// backend, yet is no version of this one.
		other := MustPut(t, st, bucket, "other", []byte("other"), "")
		MustPut(t, st, bucket, "this", []byte("other"), "")

		_, err := st.Stat(t.Context(), storage.Ref{Bucket: bucket, Key: "this", VersionID: other.VersionID})
		wantErr(t, "Stat(version of another key)", err, storage.ErrNotFound)

		pinned := other
		pinned.Key = "this"
		rc, err := st.Open(t.Context(), pinned, 0, pinned.Size)
		if err == nil {
			rc.Close()
		}
		wantErr(t, "Open(version of another key)", err, storage.ErrNotFound)

		missing := other
		missing.Key = "never/written"
		rc, err = st.Open(t.Context(), missing, 0, missing.Size)
		if err == nil {
			rc.Close()
		}
		wantErr(t, "Open(missing key)", err, storage.ErrNotFound)
	})

	t.Run("MalformedVersionIDIsNotFound", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		v := MustPut(t, st, bucket, "k", []byte("data"), "")
		// Version ids reach the store from the admin API: user input.
		for _, id := range []string{"not-a-version", "../current", "%2e%2e", "v\x00"} {
			_, err := st.Stat(t.Context(), storage.Ref{Bucket: bucket, Key: "k", VersionID: id})
			wantErr(t, fmt.Sprintf("Stat(version %q)", id), err, storage.ErrNotFound)
			bad := v
			bad.VersionID = id
			rc, err := st.Open(t.Context(), bad, 0, bad.Size)
			if err == nil {
				rc.Close()
			}
			wantErr(t, fmt.Sprintf("Open(version %q)", id), err, storage.ErrNotFound)
		}
	})

	t.Run("InvalidKeysAreRefused", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		for _, key := range InvalidKeys {
			_, err := st.Put(t.Context(), bucket, key, strings.NewReader("x"), 1, "")
			wantErr(t, fmt.Sprintf("Put(%q)", key), err, storage.ErrInvalidKey)
			_, err = st.Stat(t.Context(), storage.Ref{Bucket: bucket, Key: key})
			wantErr(t, fmt.Sprintf("Stat(%q)", key), err, storage.ErrInvalidKey)
			rc, err := st.Open(t.Context(), storage.Version{Bucket: bucket, Key: key, VersionID: "1", Size: 1, ETag: `"x"`}, 0, 1)
			if err == nil {
				rc.Close()
			}
			wantErr(t, fmt.Sprintf("Open(%q)", key), err, storage.ErrInvalidKey)
		}
	})

	t.Run("OpenWithAnotherETagIsChanged", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		v := MustPut(t, st, bucket, "pinned", []byte("pinned bytes"), "")

		wrong := v
		wrong.ETag = QuotedMD5([]byte("something else"))
		rc, err := st.Open(t.Context(), wrong, 0, wrong.Size)
		if err == nil {
			rc.Close()
		}
		wantErr(t, "Open(wrong ETag)", err, storage.ErrChanged)
	})

	t.Run("OpenWithAnotherSizeIsChanged", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		v := MustPut(t, st, bucket, "pinned", []byte("pinned bytes"), "")

		for _, size := range []int64{v.Size - 1, v.Size + 1} {
			wrong := v
			wrong.Size = size
			for _, length := range []int64{1, size} {
				rc, err := st.Open(t.Context(), wrong, 0, length)
				if err == nil {
					rc.Close()
				}
				wantErr(t, fmt.Sprintf("Open(0, %d) of a %d-byte version pinned as %d bytes", length, v.Size, size), err, storage.ErrChanged)
			}
		}
	})

	// A Put whose body does not match what it promised stores nothing and
	// leaves the current version as it was.
	refusedPuts := []struct {
		name string
		body func() io.Reader
		size int64
	}{
		{"PutOfABodyShorterThanItsSizeIsRefusedAndChangesNothing", func() io.Reader { return OnlyReader(strings.NewReader("short")) }, 10},
		{"PutOfABodyLongerThanItsSizeIsRefusedAndChangesNothing", func() io.Reader { return OnlyReader(strings.NewReader("too long")) }, 3},
		{"PutWhoseBodyFailsIsRefusedAndChangesNothing", func() io.Reader {
			return io.MultiReader(strings.NewReader("partial"), errReader{io.ErrClosedPipe})
		}, -1},
	}
	for _, rp := range refusedPuts {
		t.Run(rp.name, func(t *testing.T) {
			t.Parallel()
			st, bucket := newStore(t)
			before := MustPut(t, st, bucket, "k", []byte("kept"), "")

			if _, err := st.Put(t.Context(), bucket, "k", rp.body(), rp.size, ""); err == nil {
				t.Fatalf("%s: Put succeeded, want an error", rp.name)
			}
			checkVersion(t, "Stat after a refused Put", MustStat(t, st, storage.Ref{Bucket: bucket, Key: "k"}), before)
		})
	}

	t.Run("CallsAfterTheDeadlineAreTimeouts", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		v := MustPut(t, st, bucket, "k", []byte("data"), "")
		ctx := contextWithPassedDeadline(t)

		_, err := st.Stat(ctx, storage.Ref{Bucket: bucket, Key: "k"})
		wantErr(t, "Stat(passed deadline)", err, storage.ErrTimeout)
		rc, err := st.Open(ctx, v, 0, v.Size)
		if err == nil {
			rc.Close()
		}
		wantErr(t, "Open(passed deadline)", err, storage.ErrTimeout)
		_, err = st.Put(ctx, bucket, "k", bytes.NewReader([]byte("new")), 3, "")
		wantErr(t, "Put(passed deadline)", err, storage.ErrTimeout)
	})
}

type errReader struct{ err error }

func (r errReader) Read([]byte) (int, error) { return 0, r.err }
