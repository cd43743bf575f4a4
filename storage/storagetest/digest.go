package storagetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/dlgate/dlgate/storage"
)

// SHA256Hex is the digest Put must report for data.
func SHA256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

func exerciseDigest(t *testing.T, newStore NewStoreFunc) {
	t.Run("PutReportsTheSHA256OfTheBytesItStored", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		for name, data := range map[string][]byte{
			"empty": nil,
			"small": []byte("verified downloads\n"),
			"kib":   []byte(strings.Repeat("0123456789abcdef", 4096)),
		} {
			v := MustPut(t, st, bucket, name, data, "")
			if v.SHA256 != SHA256Hex(data) {
				t.Errorf("Put(%s, %d bytes) SHA256 = %q, want %s", name, len(data), v.SHA256, SHA256Hex(data))
			}
			// An unseekable body of unknown size is hashed as it passes.
			v, err := st.Put(t.Context(), bucket, name+".stream", OnlyReader(bytes.NewReader(data)), -1, "")
			if err != nil {
				t.Fatalf("Put(%s, unknown size) = %v", name, err)
			}
			if v.SHA256 != SHA256Hex(data) {
				t.Errorf("Put(%s, unknown size) SHA256 = %q, want %s", name, v.SHA256, SHA256Hex(data))
			}
		}
	})

	t.Run("PutOfKnownSizeBeyondOnePartReportsTheWholeObjectsSHA256", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		const seed = 7
		v, err := st.Put(t.Context(), bucket, "parts.bin", OnlyReader(PseudoRandom(seed, LargeSize)), LargeSize, "")
		if err != nil {
			t.Fatalf("Put(%d bytes, known size) = %v", LargeSize, err)
		}
		if want := sha256Of(t, PseudoRandom(seed, LargeSize)); v.SHA256 != want {
			t.Errorf("Put SHA256 = %q, want the whole object's %s (not a digest of parts)", v.SHA256, want)
		}
	})

	t.Run("StatReportsTheStoredSHA256OrNoneButNeverAnother", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		data := []byte("stat me")
		v := MustPut(t, st, bucket, "k", data, "")
		got := MustStat(t, st, storage.Ref{Bucket: bucket, Key: "k", VersionID: v.VersionID})
		if got.SHA256 != "" && got.SHA256 != SHA256Hex(data) {
			t.Errorf("Stat SHA256 = %q, want %s or none", got.SHA256, SHA256Hex(data))
		}
	})
}
