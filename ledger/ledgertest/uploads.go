package ledgertest

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
)

// uploadExpiry and uploadLease are the expiry and lock lease of these tests.
const (
	uploadExpiry = 24 * time.Hour
	uploadLease  = 30 * time.Second
)

func uploads(tb testing.TB, e *env) ledger.Uploads {
	tb.Helper()
	u, ok := e.l.(ledger.Uploads)
	if !ok {
		tb.Fatalf("%T does not implement ledger.Uploads", e.l)
	}
	return u
}

// mustUpload records a new upload of size bytes.
func (e *env) mustUpload(tb testing.TB, size int64) *ledger.Upload {
	tb.Helper()
	u, err := uploads(tb, e).UploadCreate(e.ctx, ledger.Upload{ID: uuid.Must(uuid.NewV7()).String(), Bucket: "b",
		Key: "incoming/report.pdf", Filename: "Report Q1.pdf", ContentType: "application/pdf", Size: size, PartSize: 8 << 20,
		SHA256State: []byte("sha-state-0"), StoreState: []byte(`{"upload_id":"mp-1"}`)}, uploadExpiry)
	if err != nil {
		tb.Fatalf("UploadCreate = %v", err)
	}
	return u
}

func (e *env) mustLock(tb testing.TB, id, holder string) {
	tb.Helper()
	if err := uploads(tb, e).UploadLock(e.ctx, id, holder, uploadLease); err != nil {
		tb.Fatalf("UploadLock(%s) = %v", holder, err)
	}
}

func (e *env) advance(id, holder string, from, to int64) error {
	return e.l.(ledger.Uploads).UploadAdvance(e.ctx, ledger.UploadAdvanceParams{ID: id, Holder: holder, From: from, Offset: to,
		SHA256State: []byte("sha-state-" + string(rune('0'+to%10))), StoreState: []byte(`{"parts":1}`), Expiry: uploadExpiry})
}

func (e *env) mustGetUpload(tb testing.TB, id string) *ledger.Upload {
	tb.Helper()
	u, err := uploads(tb, e).UploadGet(e.ctx, id)
	if err != nil {
		tb.Fatalf("UploadGet(%s) = %v", id, err)
	}
	return u
}

// exerciseUploads: resumable uploads (SPEC §11). The lock and the advance
// are what keep two PATCHes of one upload from both writing, on any
// process; the expired ones go to one sweeper at a time.
func exerciseUploads(t *testing.T, newLedger NewLedger) {
	t.Run("AnUploadIsRecordedAsCreatedAndExpiresByTheDatabasesClock", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		u := e.mustUpload(t, 1000)
		got := e.mustGetUpload(t, u.ID)
		if got.Bucket != "b" || got.Key != "incoming/report.pdf" || got.Filename != "Report Q1.pdf" || got.ContentType != "application/pdf" ||
			got.Size != 1000 || got.PartSize != 8<<20 || got.Offset != 0 || !bytes.Equal(got.SHA256State, []byte("sha-state-0")) ||
			string(got.StoreState) != `{"upload_id":"mp-1"}` || got.FinishedAt != nil || got.Object != nil || got.Holder != "" {
			t.Fatalf("UploadGet = %+v, want the upload as created", got)
		}
		if want := e.clock.Now().Add(uploadExpiry); !got.ExpiresAt.Equal(want) || got.Expired() {
			t.Errorf("ExpiresAt = %v (expired %v), want %v", got.ExpiresAt, got.Expired(), want)
		}
		e.clock.Add(uploadExpiry)
		if got := e.mustGetUpload(t, u.ID); !got.Expired() {
			t.Errorf("an upload read at its expiry is not Expired: ReadAt %v, ExpiresAt %v", got.ReadAt, got.ExpiresAt)
		}
	})

	t.Run("CreateRefusesATakenIDAndIncompleteUploads", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		ups := uploads(t, e)
		u := e.mustUpload(t, 10)
		again := *u
		again.Offset = 0
		if _, err := ups.UploadCreate(e.ctx, again, uploadExpiry); !errors.Is(err, ledger.ErrConflict) {
			t.Errorf("UploadCreate(taken id) = %v, want ErrConflict", err)
		}
		valid := ledger.Upload{ID: uuid.Must(uuid.NewV7()).String(), Key: "k", ContentType: "x", SHA256State: []byte("s")}
		for name, edit := range map[string]func(*ledger.Upload, *time.Duration){
			"NoID":          func(u *ledger.Upload, _ *time.Duration) { u.ID = "" },
			"NoKey":         func(u *ledger.Upload, _ *time.Duration) { u.Key = "" },
			"NegativeSize":  func(u *ledger.Upload, _ *time.Duration) { u.Size = -1 },
			"NotAtOffset0":  func(u *ledger.Upload, _ *time.Duration) { u.Size, u.Offset = 5, 1 },
			"NoDigestState": func(u *ledger.Upload, _ *time.Duration) { u.SHA256State = nil },
			"NoExpiry":      func(_ *ledger.Upload, d *time.Duration) { *d = 0 },
		} {
			in, expiry := valid, uploadExpiry
			edit(&in, &expiry)
			if _, err := ups.UploadCreate(e.ctx, in, expiry); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("UploadCreate(%s) = %v, want ErrInvalid", name, err)
			}
		}
	})

	t.Run("OfConcurrentLocksOfOneUploadExactlyOneWins", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		u := e.mustUpload(t, 10)
		const n = 8
		var (
			mu     sync.Mutex
			won    []string
			locked int
		)
		releaseAll(t, n, func(i int) error {
			holder := uuid.Must(uuid.NewV7()).String()
			err := uploads(t, e).UploadLock(e.ctx, u.ID, holder, uploadLease)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won = append(won, holder)
			case errors.Is(err, ledger.ErrLocked):
				locked++
			default:
				return err
			}
			return nil
		})
		if len(won) != 1 || locked != n-1 {
			t.Fatalf("%d concurrent locks: %d won, %d refused ErrLocked; want 1 and %d", n, len(won), locked, n-1)
		}
		if got := e.mustGetUpload(t, u.ID); got.Holder != won[0] || !got.LeaseUntil.Equal(e.clock.Now().Add(uploadLease)) {
			t.Errorf("Holder = %q until %v, want %q until %v", got.Holder, got.LeaseUntil, won[0], e.clock.Now().Add(uploadLease))
		}
	})

	t.Run("ALockIsRenewedByItsHolderAndTakenByAnotherOnlyOnceItsLeaseLapsed", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		ups := uploads(t, e)
		u := e.mustUpload(t, 10)
		e.mustLock(t, u.ID, "a")
		e.clock.Add(uploadLease - time.Second)
		if err := ups.UploadLock(e.ctx, u.ID, "b", uploadLease); !errors.Is(err, ledger.ErrLocked) {
			t.Fatalf("UploadLock(b) while a holds it = %v, want ErrLocked", err)
		}
		e.mustLock(t, u.ID, "a") // renewed: another lease from now
		e.clock.Add(uploadLease - time.Second)
		if err := ups.UploadLock(e.ctx, u.ID, "b", uploadLease); !errors.Is(err, ledger.ErrLocked) {
			t.Fatalf("UploadLock(b) within a's renewed lease = %v, want ErrLocked", err)
		}
		e.clock.Add(time.Second)
		e.mustLock(t, u.ID, "b")
		if err := e.advance(u.ID, "a", 0, 4); !errors.Is(err, ledger.ErrLocked) {
			t.Errorf("UploadAdvance by a, whose lease lapsed and was taken = %v, want ErrLocked", err)
		}
		if err := ups.UploadLock(e.ctx, uuid.Must(uuid.NewV7()).String(), "a", uploadLease); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("UploadLock(unknown upload) = %v, want ErrNotFound", err)
		}
	})

	t.Run("UnlockFreesTheLockAtOnceButOnlyForItsHolder", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		ups := uploads(t, e)
		u := e.mustUpload(t, 10)
		e.mustLock(t, u.ID, "a")
		if err := ups.UploadUnlock(e.ctx, u.ID, "b"); err != nil {
			t.Fatalf("UploadUnlock by another = %v, want nil (a no-op)", err)
		}
		if err := ups.UploadLock(e.ctx, u.ID, "b", uploadLease); !errors.Is(err, ledger.ErrLocked) {
			t.Fatalf("UploadLock(b) after b's unlock of a's lock = %v, want ErrLocked", err)
		}
		if err := ups.UploadUnlock(e.ctx, u.ID, "a"); err != nil {
			t.Fatalf("UploadUnlock(a) = %v", err)
		}
		e.mustLock(t, u.ID, "b")
	})

	t.Run("AnAdvanceFromAStaleOffsetOrByAnotherHolderIsRefused", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		u := e.mustUpload(t, 10)
		if err := e.advance(u.ID, "a", 0, 4); !errors.Is(err, ledger.ErrLocked) {
			t.Fatalf("UploadAdvance without the lock = %v, want ErrLocked", err)
		}
		e.mustLock(t, u.ID, "a")
		e.clock.Add(time.Hour)
		if err := e.advance(u.ID, "a", 0, 4); err != nil {
			t.Fatalf("UploadAdvance(0 → 4) = %v", err)
		}
		got := e.mustGetUpload(t, u.ID)
		if got.Offset != 4 || string(got.SHA256State) != "sha-state-4" || string(got.StoreState) != `{"parts":1}` {
			t.Errorf("after the advance: offset %d, digest state %q, store state %q", got.Offset, got.SHA256State, got.StoreState)
		}
		if want := e.clock.Now().Add(uploadExpiry); !got.ExpiresAt.Equal(want) {
			t.Errorf("ExpiresAt after an advance = %v, want the expiry from the advance, %v", got.ExpiresAt, want)
		}
		for _, c := range []struct {
			from, to int64
			want     error
		}{
			{0, 6, ledger.ErrConflict}, // another request's append from where this one started
			{3, 6, ledger.ErrConflict},
			{4, 11, ledger.ErrInvalid}, // past the size
			{4, 3, ledger.ErrInvalid},  // backwards
		} {
			if err := e.advance(u.ID, "a", c.from, c.to); !errors.Is(err, c.want) {
				t.Errorf("UploadAdvance(%d → %d) = %v, want %v", c.from, c.to, err, c.want)
			}
		}
		if got := e.mustGetUpload(t, u.ID); got.Offset != 4 {
			t.Errorf("after the refused advances offset = %d, want 4", got.Offset)
		}
		if err := e.advance(uuid.Must(uuid.NewV7()).String(), "a", 0, 1); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("UploadAdvance(unknown upload) = %v, want ErrNotFound", err)
		}
	})

	t.Run("FinishRecordsTheVersionOfACompleteUploadOnce", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		ups := uploads(t, e)
		u := e.mustUpload(t, 10)
		e.mustLock(t, u.ID, "a")
		o := ledger.Object{Bucket: "b", Key: u.Key, VersionID: "v-9", Size: 10, ETag: `"e9"`, ContentType: u.ContentType,
			SHA256: digestOf("ten bytes!")}
		if err := ups.UploadFinish(e.ctx, u.ID, "a", o, uploadExpiry); !errors.Is(err, ledger.ErrConflict) {
			t.Fatalf("UploadFinish of an upload at 0 of 10 = %v, want ErrConflict", err)
		}
		if err := e.advance(u.ID, "a", 0, 10); err != nil {
			t.Fatal(err)
		}
		if err := ups.UploadFinish(e.ctx, u.ID, "b", o, uploadExpiry); !errors.Is(err, ledger.ErrLocked) {
			t.Errorf("UploadFinish by another holder = %v, want ErrLocked", err)
		}
		bad := o
		bad.SHA256 = "not hex"
		if err := ups.UploadFinish(e.ctx, u.ID, "a", bad, uploadExpiry); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("UploadFinish(bad sha256) = %v, want ErrInvalid", err)
		}
		e.clock.Add(time.Hour)
		if err := ups.UploadFinish(e.ctx, u.ID, "a", o, uploadExpiry); err != nil {
			t.Fatalf("UploadFinish = %v", err)
		}
		got := e.mustGetUpload(t, u.ID)
		if got.FinishedAt == nil || got.Object == nil || *got.Object != o || len(got.StoreState) != 0 || len(got.SHA256State) != 0 {
			t.Fatalf("after UploadFinish: finished %v, object %+v, states %q %q; want %+v and no states", got.FinishedAt, got.Object,
				got.SHA256State, got.StoreState, o)
		}
		if want := e.clock.Now().Add(uploadExpiry); !got.ExpiresAt.Equal(want) {
			t.Errorf("a finished upload expires %v, want %v", got.ExpiresAt, want)
		}
		if err := ups.UploadFinish(e.ctx, u.ID, "a", o, uploadExpiry); !errors.Is(err, ledger.ErrConflict) {
			t.Errorf("UploadFinish again = %v, want ErrConflict", err)
		}
		if err := e.advance(u.ID, "a", 10, 10); !errors.Is(err, ledger.ErrConflict) {
			t.Errorf("UploadAdvance of a finished upload = %v, want ErrConflict", err)
		}
	})

	t.Run("ExpiredUploadsAreHandedOutOnceAndNotWhileLocked", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		ups := uploads(t, e)
		var expired []string
		for range 5 {
			expired = append(expired, e.mustUpload(t, 10).ID)
		}
		busy := e.mustUpload(t, 10) // its PATCH holds the lock
		done := e.mustUpload(t, 10) // finished: its bytes are a version now
		e.mustLock(t, done.ID, "a")
		if err := e.advance(done.ID, "a", 0, 10); err != nil {
			t.Fatal(err)
		}
		if err := ups.UploadFinish(e.ctx, done.ID, "a", ledger.Object{Bucket: "b", Key: done.Key, VersionID: "v", Size: 10, ETag: `"e"`}, uploadExpiry); err != nil {
			t.Fatal(err)
		}
		if got, err := ups.UploadExpiredClaim(e.ctx, uploadLease, 100); err != nil || len(got) != 0 {
			t.Fatalf("UploadExpiredClaim before any expired = %d uploads, %v; want none", len(got), err)
		}
		e.clock.Add(uploadExpiry - 10*time.Second)
		e.mustLock(t, busy.ID, "patch") // until 20 s past the expiry
		e.clock.Add(15 * time.Second)

		var (
			mu     sync.Mutex
			handed = map[string]int{}
		)
		claim := func() (int, error) {
			got, err := ups.UploadExpiredClaim(e.ctx, uploadLease, 2)
			mu.Lock()
			defer mu.Unlock()
			for _, u := range got {
				handed[u.ID]++
				if u.Holder == "" || u.FinishedAt != nil || !u.Expired() {
					t.Errorf("handed out %+v, want an expired unfinished upload with a holder", u)
				}
			}
			return len(got), err
		}
		// Concurrent sweepers, then one until nothing is left: where the
		// engine skips no locked rows, concurrent ones read the same
		// candidates and only one takes each.
		releaseAll(t, 4, func(int) error { _, err := claim(); return err })
		for range len(expired) {
			if n, err := claim(); err != nil || n == 0 {
				break
			}
		}
		for _, id := range expired {
			if handed[id] != 1 {
				t.Errorf("expired upload %s handed out %d times, want once", id, handed[id])
			}
		}
		if handed[busy.ID] != 0 || handed[done.ID] != 0 {
			t.Errorf("handed out the locked upload %d times and the finished one %d times, want neither", handed[busy.ID], handed[done.ID])
		}
		// A sweeper that dies loses its uploads when its lease lapses.
		e.clock.Add(uploadLease)
		again, err := ups.UploadExpiredClaim(e.ctx, uploadLease, 100)
		if err != nil || len(again) != len(expired)+1 {
			t.Fatalf("UploadExpiredClaim after the leases lapsed = %d uploads, %v; want %d", len(again), err, len(expired)+1)
		}
		for _, u := range again {
			if err := ups.UploadDelete(e.ctx, u.ID, "someone else"); !errors.Is(err, ledger.ErrLocked) {
				t.Errorf("UploadDelete by another holder = %v, want ErrLocked", err)
			}
			if err := ups.UploadDelete(e.ctx, u.ID, u.Holder); err != nil {
				t.Errorf("UploadDelete by the sweeper = %v", err)
			}
			if _, err := ups.UploadGet(e.ctx, u.ID); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("UploadGet after UploadDelete = %v, want ErrNotFound", err)
			}
		}
		if err := ups.UploadDelete(e.ctx, again[0].ID, again[0].Holder); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("UploadDelete again = %v, want ErrNotFound", err)
		}
		if _, err := ups.UploadExpiredClaim(e.ctx, uploadLease, 0); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("UploadExpiredClaim(limit 0) = %v, want ErrInvalid", err)
		}
	})

	t.Run("PurgeForgetsFinishedUploadsOnlyPastTheirExpiry", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		ups := uploads(t, e)
		active := e.mustUpload(t, 10)
		var finished []string
		for range 3 {
			u := e.mustUpload(t, 1)
			e.mustLock(t, u.ID, "a")
			if err := e.advance(u.ID, "a", 0, 1); err != nil {
				t.Fatal(err)
			}
			if err := ups.UploadFinish(e.ctx, u.ID, "a", ledger.Object{Bucket: "b", Key: u.Key, VersionID: "v", Size: 1, ETag: `"e"`}, uploadExpiry); err != nil {
				t.Fatal(err)
			}
			if err := ups.UploadUnlock(e.ctx, u.ID, "a"); err != nil {
				t.Fatal(err)
			}
			finished = append(finished, u.ID)
		}
		if n, err := ups.UploadPurge(e.ctx, 100); err != nil || n != 0 {
			t.Fatalf("UploadPurge before their expiry = %d, %v; want 0", n, err)
		}
		e.clock.Add(uploadExpiry)
		if n, err := ups.UploadPurge(e.ctx, 2); err != nil || n != 2 {
			t.Fatalf("UploadPurge(limit 2) = %d, %v; want 2", n, err)
		}
		if n, err := ups.UploadPurge(e.ctx, 100); err != nil || n != 1 {
			t.Fatalf("UploadPurge of the rest = %d, %v; want 1", n, err)
		}
		for _, id := range finished {
			if _, err := ups.UploadGet(e.ctx, id); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("UploadGet(purged) = %v, want ErrNotFound", err)
			}
		}
		if got := e.mustGetUpload(t, active.ID); got.FinishedAt != nil {
			t.Errorf("the purge touched an unfinished upload: %+v", got)
		}
	})
}
