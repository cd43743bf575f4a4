package ledgertest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"slices"
	"testing"

	"github.com/dlgate/dlgate/ledger"
)

// digestOf is a SHA-256 as the ledger records one, of s.
func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func digests(tb testing.TB, e *env) ledger.Digests {
	tb.Helper()
	d, ok := e.l.(ledger.Digests)
	if !ok {
		tb.Fatalf("%T does not implement ledger.Digests", e.l)
	}
	return d
}

// exerciseDigests: the SHA-256 of a version travels from its upload's
// record to the links and sessions that pin it, so that a download reads
// it from the row it reads anyway (SPEC §10); a backfill fills in the
// versions stored without one.
func exerciseDigests(t *testing.T, newLedger NewLedger) {
	t.Run("TheUploadsDigestIsRecordedAndCopiedToLinksAndSessions", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		o := e.mustRecord(t, "up.bin")
		o.SHA256 = digestOf("up")
		if err := e.l.ObjectRecord(e.ctx, o); err != nil { // recorded again, now with its digest
			t.Fatal(err)
		}
		if got, err := e.l.ObjectGet(e.ctx, o.Bucket, o.Key, o.VersionID); err != nil || got.SHA256 != o.SHA256 {
			t.Fatalf("StoredObject = %+v, %v, want SHA256 %s", got, err, o.SHA256)
		}
		pin := o
		pin.SHA256 = "" // as a store that keeps no full-object digest reports it
		l := e.linkTo(t, pin, 2, func(l *ledger.Link) { l.Delivery = ledger.DeliverySession })
		if l.Object.SHA256 != o.SHA256 {
			t.Errorf("LinkCreate's link SHA256 = %q, want the upload's %s", l.Object.SHA256, o.SHA256)
		}
		if got, err := e.l.LinkGetByTokenHash(e.ctx, l.TokenHash); err != nil || got.Object.SHA256 != o.SHA256 {
			t.Errorf("LinkGetByTokenHash SHA256 = %+v, %v, want %s", got, err, o.SHA256)
		}
		out, err := e.l.LinkClaim(e.ctx, l.TokenHash, ledger.ClaimRequest{Kind: ledger.KindStream, Client: "test"}, true)
		if err != nil || out.Link == nil || out.Link.Object.SHA256 != o.SHA256 {
			t.Errorf("LinkClaim = %+v, %v, want the link with SHA256 %s", out.Link, err, o.SHA256)
		}
		x := e.MustSession(t, l, 1000, 1)
		if x.Object.SHA256 != o.SHA256 {
			t.Errorf("SessionMint's session SHA256 = %q, want %s", x.Object.SHA256, o.SHA256)
		}
		if got, err := e.l.SessionGetByTokenHash(e.ctx, x.TokenHash); err != nil || got.Object.SHA256 != o.SHA256 {
			t.Errorf("SessionGetByTokenHash SHA256 = %+v, %v, want %s", got, err, o.SHA256)
		}
		page, err := e.l.LinkList(e.ctx, ledger.ListQuery{Limit: 10})
		if err != nil || len(page.Links) != 1 || page.Links[0].Object.SHA256 != o.SHA256 {
			t.Errorf("LinkList = %+v, %v, want the link with SHA256 %s", page.Links, err, o.SHA256)
		}
	})

	t.Run("AForeignVersionKeepsTheStoresDigestOrNone", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		with := e.MustLink(t, 1, func(l *ledger.Link) { l.Object.SHA256 = digestOf("s3's own") })
		without := e.MustLink(t, 1)
		for _, tt := range []struct {
			l    *ledger.Link
			want string
		}{{with, digestOf("s3's own")}, {without, ""}} {
			got, err := e.l.LinkGetByTokenHash(e.ctx, tt.l.TokenHash)
			if err != nil || got.Object.SHA256 != tt.want {
				t.Errorf("LinkGetByTokenHash SHA256 = %q, %v, want %q", got.Object.SHA256, err, tt.want)
			}
		}
	})

	t.Run("AVersionWrittenOverSinceItWasRecordedHasNoRecordedDigest", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		// S3's "null" version of a bucket without versioning: recorded
		// with one ETag, another writer's object there now.
		o := ledger.Object{Bucket: "b", Key: "null.bin", VersionID: "null", Size: 10, ETag: `"ours"`, SHA256: digestOf("ours")}
		if err := e.l.ObjectRecord(e.ctx, o); err != nil {
			t.Fatal(err)
		}
		theirs := o
		theirs.ETag, theirs.SHA256 = `"theirs"`, ""
		if l := e.linkTo(t, theirs, 1); l.Object.SHA256 != "" {
			t.Errorf("link to the object written over ours has SHA256 %q, want none", l.Object.SHA256)
		}
	})

	t.Run("AnInvalidDigestIsRefused", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		o := e.mustRecord(t, "k")
		for _, bad := range []string{"abc", digestOf("x")[:63] + "G", "ABCDEF" + digestOf("x")[6:], digestOf("x") + "0"} {
			o.SHA256 = bad
			if err := e.l.ObjectRecord(e.ctx, o); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("ObjectRecord(sha256 %q) = %v, want ErrInvalid", bad, err)
			}
			if err := digests(t, e).DigestRecord(e.ctx, o, bad); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("DigestRecord(%q) = %v, want ErrInvalid", bad, err)
			}
		}
	})

	t.Run("TheBackfillFindsEachVersionWithoutADigestOnceAndRecordsItEverywhere", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		d := digests(t, e)
		var old []ledger.Object
		for _, k := range []string{"a", "b", "c"} {
			old = append(old, e.mustRecord(t, k))
		}
		done := e.mustRecord(t, "done")
		done.SHA256 = digestOf("done")
		if err := e.l.ObjectRecord(e.ctx, done); err != nil {
			t.Fatal(err)
		}
		l := e.linkTo(t, old[1], 3)
		x := e.MustSession(t, l, 1000, 1)
		if n, bytes, err := d.DigestCountMissing(e.ctx); err != nil || n != 3 || bytes != 3000 {
			t.Fatalf("DigestCountMissing = %d, %d, %v, want 3 versions of 3000 bytes", n, bytes, err)
		}

		var seen []string
		cursor := ""
		for range 10 {
			page, next, err := d.ObjectListWithoutDigest(e.ctx, cursor, 2)
			if err != nil {
				t.Fatalf("ObjectListWithoutDigest(%q, 2) = %v", cursor, err)
			}
			if len(page) == 0 {
				if next != "" {
					t.Errorf("an empty page has cursor %q", next)
				}
				break
			}
			if len(page) > 2 {
				t.Fatalf("a page of %d, limit 2", len(page))
			}
			for _, so := range page {
				seen = append(seen, so.Key)
				if err := d.DigestRecord(e.ctx, so.Object, digestOf(so.Key)); err != nil {
					t.Fatalf("DigestRecord(%s) = %v", so.Key, err)
				}
			}
			cursor = next
		}
		slices.Sort(seen)
		if !slices.Equal(seen, []string{"a", "b", "c"}) {
			t.Errorf("the backfill saw %v, want a, b and c once each", seen)
		}
		if n, _, err := d.DigestCountMissing(e.ctx); err != nil || n != 0 {
			t.Errorf("DigestCountMissing after the backfill = %d, %v, want 0", n, err)
		}
		if got, err := e.l.LinkGetByTokenHash(e.ctx, l.TokenHash); err != nil || got.Object.SHA256 != digestOf("b") {
			t.Errorf("the link to b has SHA256 %q, %v, want the backfilled %s", got.Object.SHA256, err, digestOf("b"))
		}
		if got, err := e.l.SessionGetByTokenHash(e.ctx, x.TokenHash); err != nil || got.Object.SHA256 != digestOf("b") {
			t.Errorf("the session of b has SHA256 %q, %v, want the backfilled %s", got.Object.SHA256, err, digestOf("b"))
		}
		if got := e.linkTo(t, old[1], 1); got.Object.SHA256 != digestOf("b") {
			t.Errorf("a new link to b has SHA256 %q, want %s", got.Object.SHA256, digestOf("b"))
		}

		if err := d.DigestRecord(e.ctx, old[0], digestOf("a")); err != nil {
			t.Errorf("DigestRecord of the same digest again = %v, want nil", err)
		}
		if err := d.DigestRecord(e.ctx, old[0], digestOf("other bytes")); !errors.Is(err, ledger.ErrConflict) {
			t.Errorf("DigestRecord of another digest = %v, want ErrConflict", err)
		}
		changed := old[2]
		changed.ETag = `"changed"`
		if err := d.DigestRecord(e.ctx, changed, digestOf("c")); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("DigestRecord of a version with another ETag = %v, want ErrNotFound", err)
		}
		if _, _, err := d.ObjectListWithoutDigest(e.ctx, "not a cursor", 2); !errors.Is(err, ledger.ErrInvalid) {
			t.Errorf("ObjectListWithoutDigest(bad cursor) = %v, want ErrInvalid", err)
		}
	})
}

// ExerciseDigestEvents: grant.created and grant.refunded carry the
// SHA-256 of the link's version, and link and object events carry it
// with the object (docs/api.md, "Webhooks"); null when unknown.
func ExerciseDigestEvents(t *testing.T, newLedger NewOutboxLedger) {
	t.Run("GrantEventsCarryTheVersionsSHA256", func(t *testing.T) {
		t.Parallel()
		c := NewClock()
		l := newLedger(t, c.Now, true)
		o, ok := l.(ledger.Outbox)
		if !ok {
			t.Fatalf("%T does not implement ledger.Outbox", l)
		}
		e := &env{l: l, clock: c, ctx: t.Context()}
		with := e.MustLink(t, 2, func(l *ledger.Link) { l.Object.SHA256 = digestOf("with") })
		without := e.MustLink(t, 1)
		g, err := e.claim(with, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := e.l.GrantRefund(e.ctx, g.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.claim(without, ""); err != nil {
			t.Fatal(err)
		}
		evs := decodeEvents(t, drain(t, e, o))
		var checked int
		for _, ev := range evs {
			want := ""
			if ev.Data.LinkID == with.ID {
				want = digestOf("with")
			}
			switch ev.Type {
			case ledger.EventGrantCreated, ledger.EventGrantRefunded:
				checked++
				if ev.Data.SHA256 != want {
					t.Errorf("%s of link %s: sha256 %q, want %q", ev.Type, ev.Data.LinkID, ev.Data.SHA256, want)
				}
			case ledger.EventLinkCreated:
				checked++
				if got := ev.Data.Object.SHA256; (got == nil) != (want == "") || got != nil && *got != want {
					t.Errorf("link.created of %s: object sha256 %v, want %q", ev.Data.LinkID, got, want)
				}
			}
		}
		if checked != 5 {
			t.Errorf("checked %d link.created, grant.created and grant.refunded events, want 5 (%d events)", checked, len(evs))
		}
	})
}
