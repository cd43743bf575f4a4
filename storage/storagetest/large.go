package storagetest

import (
	"bytes"
	"io"
	"testing"

	"github.com/dlgate/dlgate/storage"
)

// LargeSize is bigger than two S3 parts of the default 8 MiB, so an upload
// of unknown size goes through multipart with a short last part.
const LargeSize = 20 << 20

func exerciseLarge(t *testing.T, newStore NewStoreFunc) {
	t.Run("LargeObjectOfUnknownSizeStreamsAndRoundTrips", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		const seed = 42

		v, err := st.Put(t.Context(), bucket, "large.bin", OnlyReader(PseudoRandom(seed, LargeSize)), -1, "application/x-test")
		if err != nil {
			t.Fatalf("Put(%d bytes, unknown size) = %v", LargeSize, err)
		}
		if v.Size != LargeSize {
			t.Errorf("Put Size = %d, want %d", v.Size, LargeSize)
		}
		if want := sha256Of(t, PseudoRandom(seed, LargeSize)); v.SHA256 != want {
			t.Errorf("Put SHA256 = %q, want %s", v.SHA256, want)
		}
		got := MustStat(t, st, storage.Ref{Bucket: bucket, Key: "large.bin"})
		checkVersion(t, "Stat", got, v)

		rc, err := st.Open(t.Context(), got, 0, got.Size)
		if err != nil {
			t.Fatalf("Open whole = %v", err)
		}
		gotSum := sha256Of(t, rc)
		rc.Close()
		if want := sha256Of(t, PseudoRandom(seed, LargeSize)); gotSum != want {
			t.Errorf("sha256 of the stored object = %s, want %s", gotSum, want)
		}

		// Slices straddling where 8 MiB parts meet, and the very end.
		for _, r := range [][2]int64{{8<<20 - 7, 14}, {16<<20 - 1, 2}, {LargeSize - 1, 1}, {5 << 20, 1 << 20}} {
			b := MustRead(t, st, got, r[0], r[1])
			want := sliceOf(t, PseudoRandom(seed, LargeSize), r[0], r[1])
			if !bytes.Equal(b, want) {
				t.Errorf("Open(%d, %d) returned other bytes than were put", r[0], r[1])
			}
		}
	})
}

func sliceOf(tb testing.TB, r io.Reader, offset, length int64) []byte {
	tb.Helper()
	if _, err := io.CopyN(io.Discard, r, offset); err != nil {
		tb.Fatalf("skipping to %d: %v", offset, err)
	}
	b := make([]byte, length)
	if _, err := io.ReadFull(r, b); err != nil {
		tb.Fatalf("reading %d bytes at %d: %v", length, offset, err)
	}
	return b
}
