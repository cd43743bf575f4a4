package ledgertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
)

// retention is the object retention of these tests.
const retention = time.Hour

// mustRecord records a new version of key as stored by the gateway.
func (e *env) mustRecord(tb testing.TB, key string) ledger.Object {
	tb.Helper()
	return mustRecord(tb, e.l, key)
}

func mustRecord(tb testing.TB, l ledger.Ledger, key string) ledger.Object {
	tb.Helper()
	o := ledger.Object{Bucket: "b", Key: key, VersionID: uuid.Must(uuid.NewV7()).String(), Size: 1000,
		ETag: `"abc"`, ContentType: "application/pdf"}
	if err := l.ObjectRecord(context.Background(), o); err != nil {
		tb.Fatalf("ObjectRecord(%s) = %v", key, err)
	}
	return o
}

// linkTo creates a link with n downloads pinning o.
func (e *env) linkTo(tb testing.TB, o ledger.Object, n int, edit ...func(*ledger.Link)) *ledger.Link {
	tb.Helper()
	return e.MustLink(tb, n, append([]func(*ledger.Link){func(l *ledger.Link) { l.Object = o }}, edit...)...)
}

// claimDeletions runs one retention round and returns the versions it
// handed out, by version id.
func (e *env) claimDeletions(tb testing.TB) map[string]ledger.Deletion {
	tb.Helper()
	ds, err := e.l.DeletionClaim(e.ctx, retention, 100)
	if err != nil {
		tb.Fatalf("DeletionClaim = %v", err)
	}
	out := map[string]ledger.Deletion{}
	for _, d := range ds {
		out[d.Object.VersionID] = d
	}
	return out
}

// wantDeletions fails unless the next retention round hands out exactly
// the versions of want, and reports each of them deleted.
func (e *env) wantDeletions(tb testing.TB, when string, want ...ledger.Object) {
	tb.Helper()
	got := e.claimDeletions(tb)
	for _, o := range want {
		d, ok := got[o.VersionID]
		if !ok {
			tb.Fatalf("%s: retention did not hand out %s (got %d deletions)", when, o.Key, len(got))
		}
		if d.Object.Bucket != o.Bucket || d.Object.Key != o.Key || d.Object.ETag != o.ETag || d.Object.Size != o.Size {
			tb.Fatalf("%s: deletion names %+v, want %+v", when, d.Object, o)
		}
		if err := e.l.DeletionFinish(e.ctx, d, nil); err != nil {
			tb.Fatalf("DeletionFinish(%s) = %v", o.Key, err)
		}
		delete(got, o.VersionID)
	}
	for _, d := range got {
		tb.Fatalf("%s: retention handed out %s, which it must not delete", when, d.Object.Key)
	}
}

func (e *env) wantState(tb testing.TB, o ledger.Object, want ledger.ObjectState) *ledger.StoredObject {
	tb.Helper()
	got, err := e.l.ObjectGet(e.ctx, o.Bucket, o.Key, o.VersionID)
	if err != nil || got.State != want {
		tb.Fatalf("StoredObject(%s) = %+v, %v; want state %s", o.Key, got, err, want)
	}
	return got
}

func exerciseObjects(t *testing.T, newLedger NewLedger) {
	t.Run("VersionPinnedByALiveLinkIsNeverDeleted", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		o := e.mustRecord(t, "pinned")
		l := e.linkTo(t, o, 3, func(l *ledger.Link) { l.ExpiresAt = e.clock.Now().Add(30 * 24 * time.Hour) })
		for i := 0; i < 3; i++ {
			e.clock.Add(2 * retention)
			e.wantDeletions(t, fmt.Sprintf("%d retentions on", 2*(i+1)))
			if i < 2 {
				if _, err := e.claim(l, ""); err != nil {
					t.Fatal(err)
				}
			}
		}
		_, err := e.l.DeletionBegin(e.ctx, o.Bucket, o.Key, o.VersionID, false)
		var pe *ledger.PinnedError
		if !errors.As(err, &pe) || !errors.Is(err, ledger.ErrPinned) || pe.Links != 1 || pe.Sessions != 0 {
			t.Fatalf("DeletionBegin of a version with a live link = %v, want ErrPinned by 1 link", err)
		}
		e.wantState(t, o, ledger.ObjectStored)
	})
	t.Run("VersionPinnedByALiveSessionIsNeverDeleted", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		start := e.clock.Now()
		o := e.mustRecord(t, "session")
		l := e.linkTo(t, o, 1, func(l *ledger.Link) { l.Delivery = ledger.DeliverySession })
		e.MustSession(t, l, 1000, 1) // exhausts the link; the session lives an hour
		e.clock.Add(30 * time.Minute)
		e.wantDeletions(t, "while the session lives")
		_, err := e.l.DeletionBegin(e.ctx, o.Bucket, o.Key, o.VersionID, false)
		var pe *ledger.PinnedError
		if !errors.As(err, &pe) || pe.Links != 0 || pe.Sessions != 1 {
			t.Fatalf("DeletionBegin of a version with a live session = %v, want ErrPinned by 1 session", err)
		}
		// Link and session both die at start+1h.
		e.clock.Set(start.Add(time.Hour + retention - time.Microsecond))
		e.wantDeletions(t, "a microsecond before the retention")
		e.clock.Add(time.Microsecond)
		e.wantDeletions(t, "at the retention", o)
		e.wantState(t, o, ledger.ObjectDeleted)
	})
	t.Run("DeadLinksVersionIsDeletedAfterTheRetention", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		start := e.clock.Now()
		exhausted, revoked, expired, unlinked := e.mustRecord(t, "exhausted"), e.mustRecord(t, "revoked"),
			e.mustRecord(t, "expired"), e.mustRecord(t, "unlinked")
		used := e.linkTo(t, exhausted, 1, func(l *ledger.Link) { l.ExpiresAt = start.Add(30 * 24 * time.Hour) })
		if _, err := e.claim(used, ""); err != nil { // dead from start on
			t.Fatal(err)
		}
		withdrawn := e.linkTo(t, revoked, 5)
		e.linkTo(t, expired, 5, func(l *ledger.Link) { l.ExpiresAt = start.Add(20 * time.Minute) })
		e.clock.Set(start.Add(10 * time.Minute))
		if err := e.l.LinkRevoke(e.ctx, withdrawn.ID); err != nil {
			t.Fatal(err)
		}

		e.clock.Set(start.Add(retention - time.Microsecond))
		e.wantDeletions(t, "before any retention is over")
		e.clock.Set(start.Add(retention))
		e.wantDeletions(t, "a retention after the upload and the last download", exhausted, unlinked)
		e.clock.Set(start.Add(10*time.Minute + retention))
		e.wantDeletions(t, "a retention after the revocation", revoked)
		e.clock.Set(start.Add(20*time.Minute + retention))
		e.wantDeletions(t, "a retention after the expiry", expired)
		for _, o := range []ledger.Object{exhausted, revoked, expired, unlinked} {
			e.wantState(t, o, ledger.ObjectDeleted)
		}
		// The exhausted link was revoked with its version, so nothing
		// brings it back to life pointing at a deleted version.
		if st := e.mustStatus(t, used.ID); st.RevokedAt == nil {
			t.Fatalf("the exhausted link of a deleted version is not revoked: %+v", st)
		}
		if err := e.l.AllowanceAdd(e.ctx, used.ID, 1, "more"); !errors.Is(err, ledger.ErrRevoked) {
			t.Fatalf("topping up the link of a deleted version = %v, want ErrRevoked", err)
		}
	})
	t.Run("NoLinkCanPinAVersionBeingOrBeenDeleted", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		o := e.mustRecord(t, "going")
		e.clock.Add(retention)
		d := e.claimDeletions(t)[o.VersionID]
		newLink := func() error {
			_, _, err := e.l.LinkCreate(e.ctx, e.newLinkValue(t, func(l *ledger.Link) { l.Object = o }))
			return err
		}
		if err := newLink(); !errors.Is(err, ledger.ErrObjectDeleted) {
			t.Fatalf("LinkCreate on a version being deleted = %v, want ErrObjectDeleted", err)
		}
		if err := e.l.DeletionFinish(e.ctx, d, nil); err != nil {
			t.Fatal(err)
		}
		if err := newLink(); !errors.Is(err, ledger.ErrObjectDeleted) {
			t.Fatalf("LinkCreate on a deleted version = %v, want ErrObjectDeleted", err)
		}
	})
	t.Run("ALinkCreatedWhileADeletionDecidesEitherPinsOrIsRefused", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		// The deletion waits for the row lock of the link's transaction
		// (or the other way round): whichever commits first, never both.
		for round := range 20 {
			o := e.mustRecord(t, fmt.Sprintf("race/%02d", round))
			var (
				linked  bool
				deleted bool
			)
			releaseAll(t, 2, func(i int) error {
				if i == 0 {
					l := e.newLink()
					l.Object = o
					_, _, err := e.l.LinkCreate(e.ctx, l)
					switch {
					case err == nil:
						linked = true
					case !errors.Is(err, ledger.ErrObjectDeleted):
						return err
					}
					return nil
				}
				_, err := e.l.DeletionBegin(e.ctx, o.Bucket, o.Key, o.VersionID, false)
				var pe *ledger.PinnedError
				switch {
				case err == nil:
					deleted = true
				case !errors.As(err, &pe):
					return err
				}
				return nil
			})
			if linked == deleted {
				t.Fatalf("round %d: link created %v, deletion begun %v; want exactly one", round, linked, deleted)
			}
		}
	})
	t.Run("AFailedStoreDeletionIsRetriedAfterABackoff", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		o := e.mustRecord(t, "flaky")
		e.clock.Add(retention)
		for attempt := 1; attempt <= 3; attempt++ {
			d, ok := e.claimDeletions(t)[o.VersionID]
			if !ok || d.Attempts != attempt-1 {
				t.Fatalf("attempt %d: deletion = %+v, %v; want it handed out after %d failures", attempt, d, ok, attempt-1)
			}
			if attempt == 3 {
				if err := e.l.DeletionFinish(e.ctx, d, nil); err != nil {
					t.Fatal(err)
				}
				break
			}
			if err := e.l.DeletionFinish(e.ctx, d, errors.New("store: 503 Slow Down")); err != nil {
				t.Fatal(err)
			}
			if got := e.wantState(t, o, ledger.ObjectDeleting); got.Attempts != attempt {
				t.Fatalf("after %d failures: attempts = %d", attempt, got.Attempts)
			}
			backoff := ledger.DeletionBackoff(attempt)
			e.clock.Add(backoff - time.Microsecond)
			e.wantDeletions(t, fmt.Sprintf("before the backoff after failure %d", attempt))
			e.clock.Add(time.Microsecond)
		}
		e.wantState(t, o, ledger.ObjectDeleted)
		e.clock.Add(24 * time.Hour)
		e.wantDeletions(t, "after the deletion")
		if ledger.DeletionBackoff(1) != ledger.DeletionRetryMin || ledger.DeletionBackoff(2) != 2*ledger.DeletionRetryMin ||
			ledger.DeletionBackoff(100) != ledger.DeletionRetryMax {
			t.Fatalf("DeletionBackoff does not double from %v to %v", ledger.DeletionRetryMin, ledger.DeletionRetryMax)
		}
	})
	t.Run("ADeletionWhoseHolderDiedIsHandedOutAgain", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		o := e.mustRecord(t, "orphaned")
		e.clock.Add(retention)
		if _, ok := e.claimDeletions(t)[o.VersionID]; !ok {
			t.Fatal("retention did not hand the version out")
		}
		e.clock.Add(ledger.DeletionLease - time.Microsecond)
		e.wantDeletions(t, "while the first holder's lease runs")
		e.clock.Add(time.Microsecond)
		e.wantDeletions(t, "after the lease lapsed", o)
	})
	t.Run("AVersionTheGatewayDidNotUploadIsNeverDeleted", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		foreign := ledger.Object{Bucket: "b", Key: "theirs", VersionID: "v-foreign", Size: 10, ETag: `"f"`}
		l := e.linkTo(t, foreign, 1)
		if _, err := e.claim(l, ""); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(100 * retention)
		e.wantDeletions(t, "long after its only link died")
		if _, err := e.l.DeletionBegin(e.ctx, foreign.Bucket, foreign.Key, foreign.VersionID, true); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("DeletionBegin of a version the gateway did not store = %v, want ErrNotFound", err)
		}
		if _, err := e.l.ObjectGet(e.ctx, foreign.Bucket, foreign.Key, foreign.VersionID); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("StoredObject of a version the gateway did not store = %v, want ErrNotFound", err)
		}
	})
	t.Run("ForcedDeletionRevokesTheLiveLinksAndTheirSessions", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		o := e.mustRecord(t, "forced")
		active := e.linkTo(t, o, 2)
		withSession := e.linkTo(t, o, 1, func(l *ledger.Link) { l.Delivery = ledger.DeliverySession })
		x := e.MustSession(t, withSession, 1000, 1)
		_, err := e.l.DeletionBegin(e.ctx, o.Bucket, o.Key, o.VersionID, false)
		var pe *ledger.PinnedError
		if !errors.As(err, &pe) || pe.Links != 1 || pe.Sessions != 1 {
			t.Fatalf("DeletionBegin without force = %v, want ErrPinned by 1 link and 1 session", err)
		}
		d, err := e.l.DeletionBegin(e.ctx, o.Bucket, o.Key, o.VersionID, true)
		if err != nil || d.Object.VersionID != o.VersionID {
			t.Fatalf("DeletionBegin with force = %+v, %v", d, err)
		}
		for _, id := range []string{active.ID, withSession.ID} {
			if st := e.mustStatus(t, id); st.RevokedAt == nil || st.ActiveSessions != 0 {
				t.Fatalf("link %s after a forced deletion: %+v, want revoked without sessions", id, st)
			}
		}
		if got, err := e.l.SessionGet(e.ctx, x.ID); err != nil || got.Refusal(e.clock.Now()) != ledger.ReasonRevoked {
			t.Fatalf("session after a forced deletion = %+v, %v; want revoked", got, err)
		}
		if err := e.l.DeletionFinish(e.ctx, *d, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := e.l.DeletionBegin(e.ctx, o.Bucket, o.Key, o.VersionID, true); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("DeletionBegin of a deleted version = %v, want ErrNotFound", err)
		}
	})
	t.Run("AdminDeletionNeedsNoRetentionAndRetriesAFailedOne", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		o := e.mustRecord(t, "now")
		l := e.linkTo(t, o, 1)
		if _, err := e.claim(l, ""); err != nil {
			t.Fatal(err)
		}
		d, err := e.l.DeletionBegin(e.ctx, o.Bucket, o.Key, o.VersionID, false)
		if err != nil {
			t.Fatalf("DeletionBegin of a version whose only link just ran out = %v", err)
		}
		if err := e.l.DeletionFinish(e.ctx, *d, errors.New("store: timeout")); err != nil {
			t.Fatal(err)
		}
		again, err := e.l.DeletionBegin(e.ctx, o.Bucket, o.Key, o.VersionID, false)
		if err != nil || again.Attempts != 1 {
			t.Fatalf("DeletionBegin after a failed attempt = %+v, %v; want it handed out again", again, err)
		}
		if err := e.l.DeletionFinish(e.ctx, *again, nil); err != nil {
			t.Fatal(err)
		}
		if err := e.l.DeletionFinish(e.ctx, *again, nil); err != nil {
			t.Fatalf("reporting a finished deletion again = %v, want a no-op", err)
		}
		e.wantState(t, o, ledger.ObjectDeleted)
		gone := ledger.Deletion{Object: ledger.Object{Bucket: "b", Key: "never", VersionID: "v"}}
		if err := e.l.DeletionFinish(e.ctx, gone, nil); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("DeletionFinish of a version never recorded = %v, want ErrNotFound", err)
		}
	})
	t.Run("RecordingAVersionAgainStartsItOver", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		o := ledger.Object{Bucket: "b", Key: "unversioned", VersionID: "null", Size: 5, ETag: `"first"`}
		if err := e.l.ObjectRecord(e.ctx, o); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(retention)
		d := e.claimDeletions(t)[o.VersionID]
		if err := e.l.DeletionFinish(e.ctx, d, errors.New("down")); err != nil {
			t.Fatal(err)
		}
		o.ETag, o.Size = `"second"`, 7
		if err := e.l.ObjectRecord(e.ctx, o); err != nil {
			t.Fatal(err)
		}
		got := e.wantState(t, o, ledger.ObjectStored)
		if got.ETag != o.ETag || got.Size != 7 || got.Attempts != 0 || !got.StoredAt.Equal(e.clock.Now()) {
			t.Fatalf("version recorded again = %+v", got)
		}
		// The old deletion's late report changes nothing.
		if err := e.l.DeletionFinish(e.ctx, d, nil); err != nil {
			t.Fatal(err)
		}
		e.wantState(t, o, ledger.ObjectStored)
		if err := e.l.ObjectRecord(e.ctx, ledger.Object{Bucket: "b", Key: "k"}); !errors.Is(err, ledger.ErrInvalid) {
			t.Fatalf("ObjectRecord without a version id = %v, want ErrInvalid", err)
		}
	})
	t.Run("ConcurrentSweepersDeleteEachVersionOnce", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		var due []ledger.Object
		for i := 0; i < 20; i++ {
			due = append(due, e.mustRecord(t, fmt.Sprintf("batch/%02d", i)))
		}
		kept := e.mustRecord(t, "batch/kept")
		e.linkTo(t, kept, 1, func(l *ledger.Link) { l.ExpiresAt = e.clock.Now().Add(100 * retention) })
		e.clock.Add(retention)
		counts := sweepConcurrently(t, []ledger.Ledger{e.l}, 4, retention)
		wantEachOnce(t, counts, due, kept)
	})
	t.Run("DeadLinksArePurgedAfterTheAuditRetention", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		start := e.clock.Now()
		const audit = 2 * time.Hour
		old := e.MustLink(t, 2, func(l *ledger.Link) { l.Delivery = ledger.DeliverySession })
		x := e.MustSession(t, old, 1000, 1) // ends with the link, at start+1h
		e.MustSession(t, old, 1000, 1)      // a second grant
		if err := e.l.AllowanceAdd(e.ctx, old.ID, 1, "support ticket"); err != nil {
			t.Fatal(err)
		}
		live := e.MustLink(t, 1, func(l *ledger.Link) { l.ExpiresAt = start.Add(100 * audit) })
		e.clock.Set(start.Add(time.Hour + audit - time.Microsecond))
		if res, err := e.l.LinkPurge(e.ctx, audit, 100); err != nil || res.Links != 0 {
			t.Fatalf("LinkPurge before the audit retention = %+v, %v", res, err)
		}
		e.clock.Add(time.Microsecond)
		if res, err := e.l.LinkPurge(e.ctx, audit, 100); err != nil || res.Links != 1 {
			t.Fatalf("LinkPurge at the audit retention = %+v, %v; want one link", res, err)
		}
		if _, err := e.l.LinkGet(e.ctx, old.ID); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("purged link = %v, want ErrNotFound", err)
		}
		if _, err := e.l.SessionGet(e.ctx, x.ID); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("session of a purged link = %v, want ErrNotFound", err)
		}
		e.mustStatus(t, live.ID)
		if res, err := e.l.LinkPurge(e.ctx, 0, 100); err != nil || res.Links != 0 {
			t.Fatalf("LinkPurge with retention 0 = %+v, %v; want nothing purged", res, err)
		}
	})
	t.Run("ALinkIsPurgedOnlyOnceItsSessionsAreDeadAsLong", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		start := e.clock.Now()
		l := e.MustLink(t, 1, func(l *ledger.Link) { l.Delivery = ledger.DeliverySession })
		req := ledger.MintRequest{Claim: ledger.ClaimRequest{LinkID: l.ID, Client: "test"},
			SessionID: uuid.Must(uuid.NewV7()).String(), TokenHash: randomHash(t),
			ByteBudget: 1000, MaxConcurrency: 1, ExpiresAt: start.Add(5 * time.Hour)}
		if _, _, err := e.l.SessionMint(e.ctx, req); err != nil {
			t.Fatal(err)
		}
		e.clock.Set(start.Add(2 * time.Hour)) // the link expired an hour ago; its session lives on
		if res, err := e.l.LinkPurge(e.ctx, time.Hour, 100); err != nil || res.Links != 0 {
			t.Fatalf("LinkPurge while a session lives = %+v, %v", res, err)
		}
		e.clock.Set(start.Add(6 * time.Hour))
		if res, err := e.l.LinkPurge(e.ctx, time.Hour, 100); err != nil || res.Links != 1 {
			t.Fatalf("LinkPurge an hour after the session died = %+v, %v", res, err)
		}
	})
	t.Run("RetentionCountsFromAPurgedLinksDeath", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		start := e.clock.Now()
		o := e.mustRecord(t, "kept-longer")
		e.linkTo(t, o, 1, func(l *ledger.Link) { l.ExpiresAt = start.Add(time.Hour) })
		const objects, audit = 3 * time.Hour, time.Hour
		e.clock.Set(start.Add(2 * time.Hour))
		if res, err := e.l.LinkPurge(e.ctx, audit, 100); err != nil || res.Links != 1 {
			t.Fatalf("LinkPurge = %+v, %v; want the expired link", res, err)
		}
		claim := func() int {
			ds, err := e.l.DeletionClaim(e.ctx, objects, 100)
			if err != nil {
				t.Fatal(err)
			}
			return len(ds)
		}
		e.clock.Set(start.Add(time.Hour + objects - time.Microsecond))
		if n := claim(); n != 0 {
			t.Fatalf("a retention after the upload, before one after its purged link's expiry: %d deletions", n)
		}
		e.clock.Add(time.Microsecond)
		if n := claim(); n != 1 {
			t.Fatalf("a retention after its purged link's expiry: %d deletions, want 1", n)
		}
	})
	t.Run("TombstonesArePurgedAfterTheAuditRetention", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		o := e.mustRecord(t, "tomb")
		e.clock.Add(retention)
		e.wantDeletions(t, "at the retention", o)
		e.clock.Add(2 * time.Hour)
		if res, err := e.l.LinkPurge(e.ctx, 2*time.Hour, 100); err != nil || res.Tombstones != 1 {
			t.Fatalf("LinkPurge = %+v, %v; want one tombstone", res, err)
		}
		if _, err := e.l.ObjectGet(e.ctx, o.Bucket, o.Key, o.VersionID); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("StoredObject after its tombstone was purged = %v, want ErrNotFound", err)
		}
	})
	t.Run("InvalidRetentionOrLimitIsRefused", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		if _, err := e.l.DeletionClaim(e.ctx, -time.Second, 10); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("DeletionClaim(negative retention) = %v, want ErrInvalid", err)
		}
		if _, err := e.l.DeletionClaim(e.ctx, time.Hour, 0); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("DeletionClaim(limit 0) = %v, want ErrInvalid", err)
		}
		if _, err := e.l.LinkPurge(e.ctx, -time.Second, 10); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("LinkPurge(negative retention) = %v, want ErrInvalid", err)
		}
	})
}

// ExerciseObjectsAcrossProcesses runs retention in several processes at
// once: ledgers of their own on one database, whose database clock
// decides (no stand-in), as gateways sharing a database would.
func ExerciseObjectsAcrossProcesses(t *testing.T, open OpenShared) {
	t.Run("TwoSweepersOnTwoLedgersDeleteEachVersionOnce", func(t *testing.T) {
		t.Parallel()
		// The records are stamped three hours ago, by a clock the
		// database's does not follow; it is an hour later for the database
		// than a retention after every death.
		past := func() time.Time { return time.Now().Add(-3 * time.Hour) }
		ls := open(t, past, past)
		var due, kept []ledger.Object
		for i := 0; i < 30; i++ {
			o := mustRecord(t, ls[i%2], fmt.Sprintf("shared/%02d", i))
			expires := time.Now().Add(-2 * time.Hour)
			if i%6 == 4 {
				expires = time.Now().Add(time.Hour)
			}
			if i%3 != 2 {
				l := &ledger.Link{ID: uuid.Must(uuid.NewV7()).String(), TokenHash: randomHash(t), Object: o,
					Allowance: 1, Remaining: 1, ExpiresAt: expires, Delivery: ledger.DeliveryStream}
				if _, _, err := ls[0].LinkCreate(context.Background(), l); err != nil {
					t.Fatal(err)
				}
			}
			if i%6 == 4 {
				kept = append(kept, o)
			} else {
				due = append(due, o)
			}
		}
		counts := sweepConcurrently(t, ls, 2, retention)
		wantEachOnce(t, counts, due, kept...)
	})
}

// sweepConcurrently runs workers sweepers on each ledger at once, each
// claiming small batches until a round hands out nothing, "deleting" each
// version it gets and reporting success. It returns how often each
// version id was handed out.
func sweepConcurrently(t *testing.T, ls []ledger.Ledger, workers int, retention time.Duration) map[string]int {
	t.Helper()
	var (
		mu     sync.Mutex
		counts = map[string]int{}
	)
	releaseAll(t, workers*len(ls), func(i int) error {
		l := ls[i%len(ls)]
		for {
			ds, err := l.DeletionClaim(context.Background(), retention, 3)
			if err != nil || len(ds) == 0 {
				return err
			}
			for _, d := range ds {
				mu.Lock()
				counts[d.Object.VersionID]++
				mu.Unlock()
				if err := l.DeletionFinish(context.Background(), d, nil); err != nil {
					return err
				}
			}
		}
	})
	return counts
}

func wantEachOnce(t *testing.T, counts map[string]int, due []ledger.Object, kept ...ledger.Object) {
	t.Helper()
	for _, o := range due {
		if n := counts[o.VersionID]; n != 1 {
			t.Errorf("%s was handed out %d times, want once", o.Key, n)
		}
	}
	for _, o := range kept {
		if n := counts[o.VersionID]; n != 0 {
			t.Errorf("%s, pinned by a live link, was handed out %d times", o.Key, n)
		}
	}
	if len(counts) != len(due) {
		t.Errorf("%d versions handed out, want %d", len(counts), len(due))
	}
}

// exerciseObjectEvents checks the webhook events of the object lifecycle:
// object.deleted in the transaction that records the deletion, and
// link.revoked for each used-up link its deletion revokes.
func exerciseObjectEvents(t *testing.T, newLedger NewOutboxLedger) {
	t.Run("DeletingAVersionAnnouncesItAndTheLinksItRevokes", func(t *testing.T) {
		t.Parallel()
		c := NewClock()
		e := &env{l: newLedger(t, c.Now, true), clock: c, ctx: t.Context()}
		o := e.l.(ledger.Outbox)
		obj := e.mustRecord(t, "announced")
		l := e.linkTo(t, obj, 1, func(l *ledger.Link) { l.ExpiresAt = c.Now().Add(100 * retention) })
		if _, err := e.claim(l, ""); err != nil {
			t.Fatal(err)
		}
		drain(t, e, o)
		e.clock.Add(retention)
		d, ok := e.claimDeletions(t)[obj.VersionID]
		if !ok {
			t.Fatal("retention did not hand the version out")
		}
		if err := e.l.DeletionFinish(e.ctx, d, errors.New("store down")); err != nil {
			t.Fatal(err)
		}
		got := drain(t, e, o)
		if types := eventTypes(got); !slices.Equal(types, []string{ledger.EventLinkRevoked}) || got[0].LinkID != l.ID {
			t.Fatalf("events of the decision = %s, want the used-up link's link.revoked", describe(got))
		}
		e.clock.Add(ledger.DeletionBackoff(1))
		e.wantDeletions(t, "after the backoff", obj)
		got = drain(t, e, o)
		if types := eventTypes(got); !slices.Equal(types, []string{ledger.EventObjectDeleted}) || got[0].LinkID != "" {
			t.Fatalf("events of the deletion = %s, want one object.deleted about no link", describe(got))
		}
		ev := decodeEvents(t, got)[0]
		if x := ev.Data.Object; x == nil || x.Bucket != obj.Bucket || x.Key != obj.Key || x.VersionID != obj.VersionID ||
			x.Size != obj.Size || x.ETag != obj.ETag || !ev.Timestamp.Equal(e.clock.Now()) {
			t.Fatalf("object.deleted = %+v (object %+v), want version %+v at %v", ev, ev.Data.Object, obj, e.clock.Now())
		}
		// A late second report changes nothing and announces nothing.
		if err := e.l.DeletionFinish(e.ctx, d, nil); err != nil {
			t.Fatal(err)
		}
		if got := drain(t, e, o); len(got) != 0 {
			t.Fatalf("a repeated report wrote %s", describe(got))
		}
	})
}
