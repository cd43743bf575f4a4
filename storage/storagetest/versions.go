package storagetest

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/dlgate/dlgate/storage"
)

func exerciseVersions(t *testing.T, newStore NewStoreFunc) {
	t.Run("StatWithoutVersionReturnsTheCurrentVersion", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)

		MustPut(t, st, bucket, "report.pdf", []byte("first"), "")
		second := MustPut(t, st, bucket, "report.pdf", []byte("second!"), "")
		got := MustStat(t, st, storage.Ref{Bucket: bucket, Key: "report.pdf"})
		checkVersion(t, "Stat(no version)", got, second)
	})

	t.Run("SecondPutMakesANewVersionAndTheFirstStaysReadable", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		one, two := []byte("version one"), []byte("version two, longer")

		first := MustPut(t, st, bucket, "k", one, "text/plain")
		second := MustPut(t, st, bucket, "k", two, "application/json")
		if second.VersionID == first.VersionID {
			t.Fatalf("second Put reused version id %q", first.VersionID)
		}
		if b := MustRead(t, st, first, 0, first.Size); !bytes.Equal(b, one) {
			t.Errorf("Open(first) = %q, want %q", b, one)
		}
		if b := MustRead(t, st, second, 0, second.Size); !bytes.Equal(b, two) {
			t.Errorf("Open(second) = %q, want %q", b, two)
		}
		got := MustStat(t, st, storage.Ref{Bucket: bucket, Key: "k", VersionID: first.VersionID})
		checkVersion(t, "Stat(first)", got, first)
	})

	t.Run("ConcurrentPutsOfOneKeyEachStayReadable", func(t *testing.T) {
		t.Parallel()
		st, bucket := newStore(t)
		const n = 4
		versions := make([]storage.Version, n)
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				data := fmt.Appendf(nil, "writer %d", i)
				versions[i], errs[i] = st.Put(t.Context(), bucket, "contended", bytes.NewReader(data), int64(len(data)), "")
			})
		}
		wg.Wait()
		ids := map[string]bool{}
		for i, v := range versions {
			if errs[i] != nil {
				t.Fatalf("Put #%d = %v", i, errs[i])
			}
			ids[v.VersionID] = true
			if b, want := MustRead(t, st, v, 0, v.Size), fmt.Sprintf("writer %d", i); string(b) != want {
				t.Errorf("Open(version of writer %d) = %q, want %q", i, b, want)
			}
		}
		if len(ids) != n {
			t.Errorf("%d concurrent Puts made %d distinct versions, want %d", n, len(ids), n)
		}
		cur := MustStat(t, st, storage.Ref{Bucket: bucket, Key: "contended"})
		if !ids[cur.VersionID] {
			t.Errorf("current version %q is none of the versions put", cur.VersionID)
		}
	})
}
