package storage_test

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
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
		short   error
		whole   bool
		want    string
		wantErr error
	}{
		{"ExactlyN", "hello", 5, nil, false, "hello", nil},
		{"LongerSourceIsNotReadPastN", "hello, world", 5, nil, false, "hello", nil},
		{"ShorterSourceIsUnexpectedEOF", "hel", 5, nil, false, "hel", io.ErrUnexpectedEOF},
		{"ShorterSourceWrapsShort", "hel", 5, storage.ErrChanged, false, "hel", storage.ErrChanged},
		{"Zero", "hello", 0, nil, false, "", nil},
		{"WholeExactlyN", "hello", 5, nil, true, "hello", nil},
		{"WholeLongerSourceHoldsTheLastBytesBack", "hello, world", 5, nil, true, "hell", storage.ErrTooLong},
		{"WholeShorterSourceIsUnexpectedEOF", "hel", 5, nil, true, "hel", io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := strings.NewReader(tc.src)
			// One byte a read: every boundary is met by a Read of its own.
			e := &storage.ExactReader{R: iotest.OneByteReader(src), N: tc.n, Short: tc.short, Whole: tc.whole}
			got, err := io.ReadAll(e)
			if string(got) != tc.want || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("read %q, %v; want %q, %v", got, err, tc.want, tc.wantErr)
			}
			if err != nil {
				if _, again := e.Read(make([]byte, 1)); again != err {
					t.Errorf("Read after %v = %v, want the same error", err, again)
				}
			}
			if left := int64(len(tc.src)) - tc.n; left > 0 && !tc.whole && src.Len() != int(left) {
				t.Fatalf("the source was read past N: %d of %d bytes left, want %d", src.Len(), len(tc.src), left)
			}
		})
	}
	if err := iotest.TestReader(&storage.ExactReader{R: strings.NewReader("0123456789abcdef"), N: 10}, []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
}

func TestCopyFileCopiesNBytesAndFailsOnAShortFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, []byte("0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		offset  int64
		n       int64
		want    string
		wantErr error
	}{
		{"Within", 2, 5, "23456", nil},
		{"ToTheEnd", 4, 6, "456789", nil},
		{"PastTheEndIsChanged", 4, 8, "456789", storage.ErrChanged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.Seek(tc.offset, io.SeekStart); err != nil {
				t.Fatal(err)
			}
			var w bytes.Buffer
			k, err := storage.CopyFile(&w, f, tc.n)
			if w.String() != tc.want || k != int64(len(tc.want)) || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Fatalf("CopyFile(%d at %d) = %d %q, %v; want %q, %v", tc.n, tc.offset, k, w.String(), err, tc.want, tc.wantErr)
			}
			if tc.wantErr != nil && !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("CopyFile of a short file = %v, want it to wrap io.ErrUnexpectedEOF too", err)
			}
		})
	}
}
