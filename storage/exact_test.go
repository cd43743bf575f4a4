package storage_test

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/dlgate/dlgate/storage"
)

func TestExactReaderEndsAtNAndFailsShort(t *testing.T) {
	for _, tc := range []struct {
		name    string
		src     string
		n       int64
		want    string
		wantErr error
	}{
		{"ExactlyN", "hello", 5, "hello", nil},
		{"LongerSourceIsNotReadPastN", "hello, world", 5, "hello", nil},
		{"ShorterSourceIsUnexpectedEOF", "hel", 5, "hel", io.ErrUnexpectedEOF},
		{"Zero", "hello", 0, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.NewReader(tc.src)
			// One byte a read: every boundary is met by a Read of its own.
			got, err := io.ReadAll(&storage.ExactReader{R: iotest.OneByteReader(src), N: tc.n})
			if string(got) != tc.want || !errors.Is(err, tc.wantErr) {
				t.Fatalf("read %q, %v; want %q, %v", got, err, tc.want, tc.wantErr)
			}
			if left := int64(len(tc.src)) - tc.n; left > 0 && src.Len() != int(left) {
				t.Fatalf("the source was read past N: %d of %d bytes left, want %d", src.Len(), len(tc.src), left)
			}
		})
	}
	if err := iotest.TestReader(&storage.ExactReader{R: strings.NewReader("0123456789abcdef"), N: 10}, []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
}
