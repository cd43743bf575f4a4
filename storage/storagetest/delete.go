package storagetest

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/dlgate/dlgate/storage"
)

// mustDeleter returns st's storage.Deleter, or fails: every store of the
// gateway deletes the versions it stored (SPEC §6).
func mustDeleter(tb testing.TB, st storage.Store) storage.Deleter {
	tb.Helper()
	d, ok := st.(storage.Deleter)
	if !ok {
		tb.Fatalf("%T is not a storage.Deleter", st)
	}
	return d
}

// wantGone fails unless v can be neither found nor read.
func wantGone(tb testing.TB, st storage.Store, v storage.Version) {
	tb.Helper()
	_, err := st.Stat(tb.Context(), storage.Ref{Bucket: v.Bucket, Key: v.Key, VersionID: v.VersionID})
	wantErr(tb, fmt.Sprintf("Stat(deleted %s@%s)", v.Key, v.VersionID), err, storage.ErrNotFound)
	rc, err := st.Open(tb.Context(), v, 0, v.Size)
	if err == nil {
		b, _ := io.ReadAll(rc)
		rc.Close()
		tb.Errorf("Open(deleted %s@%s) served %d bytes", v.Key, v.VersionID, len(b))
		return
	}
	wantErr(tb, fmt.Sprintf("Open(deleted %s@%s)", v.Key, v.VersionID), err, storage.ErrNotFound)
}

func exerciseDelete(t *testing.T, newStore NewStoreFunc) {
	t.Run("DeleteRemovesExactlyThatVersion", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		var versions []storage.Version
		var data [][]byte
		for i := range 3 {
			b := fmt.Appendf(nil, "version %d of the report", i)
			data = append(data, b)
			versions = append(versions, MustPut(t, st, bucket, "report.pdf", b, "application/pdf"))
		}
		neighbour := MustPut(t, st, bucket, "report.pdf.bak", []byte("another key"), "")
		if err := mustDeleter(t, st).Delete(t.Context(), versions[1]); err != nil {
			t.Fatalf("Delete(middle version) = %v", err)
		}
		wantGone(t, st, versions[1])
		for _, i := range []int{0, 2} {
			if b := MustRead(t, st, versions[i], 0, versions[i].Size); !bytes.Equal(b, data[i]) {
				t.Errorf("version %d after deleting version 1 reads %q, want %q", i, b, data[i])
			}
			checkVersion(t, fmt.Sprintf("Stat(version %d)", i), MustStat(t, st, storage.Ref{Bucket: bucket, Key: "report.pdf", VersionID: versions[i].VersionID}), versions[i])
		}
		checkVersion(t, "Stat(current)", MustStat(t, st, storage.Ref{Bucket: bucket, Key: "report.pdf"}), versions[2])
		if b := MustRead(t, st, neighbour, 0, neighbour.Size); string(b) != "another key" {
			t.Errorf("another key after the deletion reads %q", b)
		}
	})

	t.Run("DeletingTheCurrentVersionMakesThePreviousOneCurrent", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		first := MustPut(t, st, bucket, "k", []byte("first"), "text/plain")
		second := MustPut(t, st, bucket, "k", []byte("second"), "text/plain")
		if err := mustDeleter(t, st).Delete(t.Context(), second); err != nil {
			t.Fatalf("Delete(current version) = %v", err)
		}
		wantGone(t, st, second)
		checkVersion(t, "Stat(current) after deleting the newest", MustStat(t, st, storage.Ref{Bucket: bucket, Key: "k"}), first)
		if b := MustRead(t, st, first, 0, first.Size); string(b) != "first" {
			t.Errorf("first version reads %q", b)
		}
	})

	t.Run("DeletingTheOnlyVersionLeavesNoObject", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		v := MustPut(t, st, bucket, "only", []byte("alone"), "")
		if err := mustDeleter(t, st).Delete(t.Context(), v); err != nil {
			t.Fatalf("Delete(only version) = %v", err)
		}
		wantGone(t, st, v)
		_, err := st.Stat(t.Context(), storage.Ref{Bucket: bucket, Key: "only"})
		wantErr(t, "Stat(key whose only version was deleted)", err, storage.ErrNotFound)
		again := MustPut(t, st, bucket, "only", []byte("back"), "")
		checkVersion(t, "Stat(current) after a new Put", MustStat(t, st, storage.Ref{Bucket: bucket, Key: "only"}), again)
	})

	t.Run("DeletingAMissingVersionIsNotFound", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		d := mustDeleter(t, st)
		v := MustPut(t, st, bucket, "k", []byte("data"), "")
		other := MustPut(t, st, bucket, "other", []byte("other data"), "")
		if err := d.Delete(t.Context(), v); err != nil {
			t.Fatal(err)
		}
		wantErr(t, "Delete(the same version twice)", d.Delete(t.Context(), v), storage.ErrNotFound)

		// A real version id of another key is no version of this one.
		foreign := other
		foreign.Key = "k"
		wantErr(t, "Delete(version of another key)", d.Delete(t.Context(), foreign), storage.ErrNotFound)
		missing := other
		missing.Key = "never/written"
		wantErr(t, "Delete(version of a missing key)", d.Delete(t.Context(), missing), storage.ErrNotFound)
		noVersion := other
		noVersion.VersionID = ""
		wantErr(t, "Delete(no version id)", d.Delete(t.Context(), noVersion), storage.ErrNotFound)
		if b := MustRead(t, st, other, 0, other.Size); string(b) != "other data" {
			t.Errorf("the other key after refused deletions reads %q", b)
		}
	})

	t.Run("DeleteRefusesAnInvalidKey", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		v := MustPut(t, st, bucket, "k", []byte("data"), "")
		bad := v
		bad.Key = "../k"
		wantErr(t, "Delete(key \"../k\")", mustDeleter(t, st).Delete(t.Context(), bad), storage.ErrInvalidKey)
	})
}
