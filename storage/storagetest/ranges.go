package storagetest

import (
	"bytes"
	"testing"
)

func exerciseRanges(t *testing.T, newStore NewStoreFunc) {
	t.Run("OpenReturnsExactlyTheRequestedSlice", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		data := []byte("0123456789abcdefghijklmnopqrstuvwxyz")
		size := int64(len(data))
		v := MustPut(t, st, bucket, "alphabet", data, "")

		tests := []struct {
			name           string
			offset, length int64
		}{
			{"whole object", 0, size},
			{"first byte", 0, 1},
			{"last byte", size - 1, 1},
			{"middle", 10, 5},
			{"tail", 30, size - 30},
			{"nothing at the start", 0, 0},
			{"nothing in the middle", 17, 0},
			{"nothing at the end", size, 0},
		}
		for _, tt := range tests {
			got := MustRead(t, st, v, tt.offset, tt.length)
			if want := data[tt.offset : tt.offset+tt.length]; !bytes.Equal(got, want) {
				t.Errorf("%s: Open(%d, %d) = %q, want %q", tt.name, tt.offset, tt.length, got, want)
			}
		}
	})

	t.Run("OpenOutsideTheObjectIsRefused", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		v := MustPut(t, st, bucket, "ten", []byte("0123456789"), "")

		for _, r := range [][2]int64{{-1, 1}, {0, -1}, {0, 11}, {10, 1}, {11, 0}} {
			rc, err := st.Open(t.Context(), v, r[0], r[1])
			if err == nil {
				rc.Close()
				t.Errorf("Open(%d, %d) of a 10-byte object succeeded, want an error", r[0], r[1])
			}
		}
	})
}
