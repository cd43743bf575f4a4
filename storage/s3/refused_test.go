package s3_test

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/storage/s3"
	"github.com/dlgate/dlgate/storage/storagetest"
)

// keysNotEveryServerStores are keys ValidateKey accepts that not every
// server stores: S3 (AWS, SeaweedFS) takes any key up to 1,024 bytes,
// while versitygw on a POSIX file system answers a path segment over 255
// bytes with 400 KeyTooLongError (or, below a directory, 409
// ExistingObjectIsDirectory), and bytes under a key ending in "/" (its
// directory) with 400 DirectoryObjectContainsData, which SeaweedFS
// stores as a directory entry (without a version, even in a bucket with
// versioning: VersionID "null").
var keysNotEveryServerStores = []string{
	"dir/",
	"deeper/dir/",
	strings.Repeat("k", 255),
	strings.Repeat("k", 300),
	"dir/" + strings.Repeat("k", 300),
	strings.Repeat("k", storage.MaxKeyLen),
	strings.Repeat("d/", (storage.MaxKeyLen-1)/2) + "k",
}

// Such a key is either stored or refused, and the store says which truly,
// whatever the server's limits: a key the server refuses is the
// caller's key, storage.ErrInvalidKey (which the admin API answers with
// 400), never an outage; a key it accepts round-trips like any other. The
// test finds out which the server does for each key and holds it to that.
func TestAKeyTheServerRefusesIsAnInvalidKey(t *testing.T) {
	eachServer(t, func(t *testing.T, env *testenv.S3) {
		st, bucket := MustStore(t, env, true)
		var stored, refused int
		for _, key := range keysNotEveryServerStores {
			if err := storage.ValidateKey(key); err != nil {
				t.Fatalf("ValidateKey(%d bytes) = %v; the test needs keys ValidateKey accepts", len(key), err)
			}
			name := fmt.Sprintf("%q", key)
			if len(key) > 32 {
				name = fmt.Sprintf("%d-byte key", len(key))
			}
			data := fmt.Appendf(nil, "a %d-byte key", len(key))
			v, err := st.Put(t.Context(), bucket, key, bytes.NewReader(data), int64(len(data)), "")
			switch {
			case err == nil:
				stored++
				got := storagetest.MustStat(t, st, storage.Ref{Bucket: bucket, Key: key})
				if got.Key != key || got.VersionID != v.VersionID || got.ETag != v.ETag || got.Size != v.Size {
					t.Errorf("Stat(%s) = %+v, want the version Put made, %+v", name, got, v)
				}
				if b := storagetest.MustRead(t, st, got, 0, got.Size); !bytes.Equal(b, data) {
					t.Errorf("Open(%s) = %q, want %q", name, b, data)
				}
			case errors.Is(err, storage.ErrInvalidKey) && !errors.Is(err, storage.ErrUnavailable):
				refused++
				// A HEAD's 400 has no body to name the key: any client
				// error will do, never a store failure.
				_, err = st.Stat(t.Context(), storage.Ref{Bucket: bucket, Key: key})
				if !errors.Is(err, storage.ErrNotFound) && !errors.Is(err, storage.ErrInvalidKey) && !errors.Is(err, storage.ErrInvalid) {
					t.Errorf("Stat(%s, which the server refused) = %v, want a client error (not found or invalid), not a store failure", name, err)
				}
			default:
				t.Errorf("Put(%s) = %v, want success or ErrInvalidKey (and not ErrUnavailable)", name, err)
			}
		}
		t.Logf("of %d keys, the server stored %d and refused %d", len(keysNotEveryServerStores), stored, refused)
		// The store still works for everyone else.
		storagetest.MustPut(t, st, bucket, "dir/short", []byte("x"), "")
	})
}

// A key longer than S3's 1,024 bytes is refused by the store itself,
// before any request: no server is asked what it would do with it.
func TestAKeyOverS3sLimitIsRefusedBeforeAnyRequest(t *testing.T) {
	api := &deletingAPI{} // every call but DeleteObject fails with errUnexpectedCall
	st := s3.NewFromClient(api, "bucket")
	key := strings.Repeat("k", storage.MaxKeyLen+1)
	v := storage.Version{Key: key, VersionID: "v-1", Size: 1, ETag: `"e"`}
	_, putErr := st.Put(t.Context(), "", key, strings.NewReader("x"), 1, "")
	_, statErr := st.Stat(t.Context(), storage.Ref{Key: key})
	_, openErr := st.Open(t.Context(), v, 0, 1)
	for what, err := range map[string]error{
		"Put":    putErr,
		"Stat":   statErr,
		"Open":   openErr,
		"Delete": st.Delete(t.Context(), v),
	} {
		if !errors.Is(err, storage.ErrInvalidKey) || errors.Is(err, errUnexpectedCall) {
			t.Errorf("%s(%d-byte key) = %v, want ErrInvalidKey before any request", what, len(key), err)
		}
	}
	if api.deleted != nil {
		t.Errorf("Delete(%d-byte key) sent DeleteObject", len(key))
	}
}
