package s3_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/storage/storagetest"
)

// A key within S3's 1024 bytes can still be one the server refuses: a
// versitygw on a POSIX file system answers a path segment over 255 bytes
// with 400 KeyTooLongError (or, below a directory, 409
// ExistingObjectIsDirectory). That is the caller's key, not a store
// outage: storage.ErrInvalidKey, which the admin API answers with 400.
func TestAKeyTheServerRefusesIsAnInvalidKey(t *testing.T) {
	st, bucket := MustStore(t, true)
	for _, key := range []string{strings.Repeat("k", 300), "dir/" + strings.Repeat("k", 300)} {
		if err := storage.ValidateKey(key); err != nil {
			t.Fatalf("ValidateKey(%d bytes) = %v; the test needs a key only the server refuses", len(key), err)
		}
		_, err := st.Put(t.Context(), bucket, key, strings.NewReader("x"), 1, "")
		if !errors.Is(err, storage.ErrInvalidKey) || errors.Is(err, storage.ErrUnavailable) {
			t.Errorf("Put(%d-byte key) = %v, want ErrInvalidKey and not ErrUnavailable", len(key), err)
		}
		_, err = st.Stat(t.Context(), storage.Ref{Bucket: bucket, Key: key})
		if err == nil || errors.Is(err, storage.ErrUnavailable) || errors.Is(err, storage.ErrTimeout) {
			t.Errorf("Stat(%d-byte key) = %v, want a client error (not found or invalid), not a store failure", len(key), err)
		}
	}
	// The store still works for everyone else.
	storagetest.MustPut(t, st, bucket, "dir/short", []byte("x"), "")
}
