package storagetest

import (
	"bytes"
	"strings"
	"testing"

	"github.com/dlgate/dlgate/storage"
)

func exerciseRoundTrip(t *testing.T, newStore NewStoreFunc) {
	t.Run("PutThenStatAndOpenRoundTripBytes", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		data := []byte("hello, download gateway\n")

		v := MustPut(t, st, bucket, "docs/hello.txt", data, "text/plain")
		if v.Key != "docs/hello.txt" || v.Size != int64(len(data)) || v.VersionID == "" || !isQuoted(v.ETag) {
			t.Fatalf("Put = %+v, want key docs/hello.txt, size %d, a version id and a quoted ETag", v, len(data))
		}
		if v.Bucket == "" || bucket != "" && v.Bucket != bucket {
			t.Errorf("Put bucket = %q, want %q (or the default when empty)", v.Bucket, bucket)
		}
		got := MustStat(t, st, storage.Ref{Bucket: bucket, Key: v.Key, VersionID: v.VersionID})
		checkVersion(t, "Stat", got, v)
		if got.LastModified.IsZero() {
			t.Errorf("Stat LastModified is zero, want the upload time")
		}
		if b := MustRead(t, st, v, 0, v.Size); !bytes.Equal(b, data) {
			t.Errorf("Open whole = %q, want %q", b, data)
		}
	})

	t.Run("PutFromAReaderWithoutSeekOrLengthRoundTrips", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		data := []byte(strings.Repeat("request body ", 1000))

		v, err := st.Put(t.Context(), bucket, "body.bin", OnlyReader(bytes.NewReader(data)), int64(len(data)), "")
		if err != nil {
			t.Fatalf("Put(known size, unseekable) = %v", err)
		}
		if b := MustRead(t, st, v, 0, v.Size); !bytes.Equal(b, data) {
			t.Errorf("Open whole returned %d bytes, want the %d put", len(b), len(data))
		}
		v2, err := st.Put(t.Context(), bucket, "body.bin", OnlyReader(bytes.NewReader(data)), -1, "")
		if err != nil {
			t.Fatalf("Put(unknown size, unseekable) = %v", err)
		}
		if v2.Size != int64(len(data)) {
			t.Errorf("Put(unknown size) Size = %d, want %d", v2.Size, len(data))
		}
		if b := MustRead(t, st, v2, 0, v2.Size); !bytes.Equal(b, data) {
			t.Errorf("Open whole returned %d bytes, want the %d put", len(b), len(data))
		}
	})

	t.Run("EmptyObjectRoundTrips", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)

		v := MustPut(t, st, bucket, "empty", nil, "")
		if v.Size != 0 || v.ETag != QuotedMD5(nil) {
			t.Errorf("Put(empty) = %+v, want size 0, ETag %s", v, QuotedMD5(nil))
		}
		got := MustStat(t, st, storage.Ref{Bucket: bucket, Key: "empty"})
		checkVersion(t, "Stat", got, v)
		if b := MustRead(t, st, v, 0, 0); len(b) != 0 {
			t.Errorf("Open(0, 0) = %q, want nothing", b)
		}
	})

	t.Run("ETagOfASinglePartUploadIsTheQuotedMD5", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		data := []byte("etag me")

		v := MustPut(t, st, bucket, "etag", data, "")
		if v.ETag != QuotedMD5(data) {
			t.Errorf("Put ETag = %s, want %s", v.ETag, QuotedMD5(data))
		}
	})

	t.Run("ContentTypeRoundTrips", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		for key, ct := range map[string]string{
			"with-type":    "text/csv; charset=utf-8",
			"without-type": "",
		} {
			MustPut(t, st, bucket, key, []byte("a,b\n"), ct)
			want := ct
			if want == "" {
				want = DefaultContentType
			}
			if got := MustStat(t, st, storage.Ref{Bucket: bucket, Key: key}); got.ContentType != want {
				t.Errorf("Stat(%q).ContentType = %q, want %q", key, got.ContentType, want)
			}
		}
	})

	t.Run("KeysWithSpacesAndUnicodeRoundTrip", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		for _, key := range []string{
			"dir/naïve file (1).txt",
			"q?x=1&y=2#frag",
			"percent%20plus+sign",
			"日本語/ファイル.bin",
		} {
			v := MustPut(t, st, bucket, key, []byte(key), "")
			got := MustStat(t, st, storage.Ref{Bucket: bucket, Key: key})
			checkVersion(t, "Stat("+key+")", got, v)
			if b := MustRead(t, st, got, 0, got.Size); string(b) != key {
				t.Errorf("Open(%q) = %q, want the key itself", key, b)
			}
		}
	})
}
