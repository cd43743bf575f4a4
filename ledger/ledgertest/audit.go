package ledgertest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/ledger"
)

// Options are what a backend sets on a ledger for the sentences that need
// more than NewLedger gives.
type Options struct {
	// Webhooks makes changes write their webhook events (the ledger
	// implements ledger.Outbox).
	Webhooks bool
	// BeforeCommit runs in each of the ledger's own transactions after
	// its statements, just before COMMIT; an error rolls it back.
	BeforeCommit func(ctx context.Context, tx *sql.Tx) error
}

// NewLedgerWith returns a fresh, migrated, empty ledger set up as o says,
// whose decisions and records read the time from clock. It registers its
// own cleanup.
type NewLedgerWith func(t *testing.T, clock ledger.Clock, o Options) ledger.Ledger

// auditEnv is an env whose transactions fail at COMMIT while fail holds a
// function, with webhooks on.
type auditEnv struct {
	*env
	fail atomic.Pointer[func(ctx context.Context, tx *sql.Tx) error]
}

func setupAudit(t *testing.T, newLedger NewLedgerWith) *auditEnv {
	t.Helper()
	a := &auditEnv{}
	c := NewClock()
	l := newLedger(t, c.Now, Options{Webhooks: true, BeforeCommit: func(ctx context.Context, tx *sql.Tx) error {
		if f := a.fail.Load(); f != nil {
			return (*f)(ctx, tx)
		}
		return nil
	}})
	a.env = &env{l: l, clock: c, ctx: t.Context()}
	return a
}

// entries returns the audit entries q selects, all pages, newest first.
func (e *env) entries(tb testing.TB, q ledger.AuditQuery) []ledger.AuditEntry {
	tb.Helper()
	var out []ledger.AuditEntry
	for pages := 0; ; pages++ {
		if pages > 100 {
			tb.Fatal("AuditList never reached its last page")
		}
		p, err := e.l.AuditList(e.ctx, q)
		if err != nil {
			tb.Fatalf("AuditList(%+v) = %v", q, err)
		}
		out = append(out, p.Entries...)
		if q.Cursor = p.Next; q.Cursor == "" {
			return out
		}
	}
}

// details decodes an entry's details.
func details(tb testing.TB, x ledger.AuditEntry) map[string]any {
	tb.Helper()
	var m map[string]any
	if err := json.Unmarshal(x.Details, &m); err != nil || m == nil {
		tb.Fatalf("%s details %s: not a JSON object (%v)", x.Action, x.Details, err)
	}
	return m
}

var errInjected = errors.New("injected failure before COMMIT")

func exerciseAudit(t *testing.T, newLedger NewLedgerWith) {
	t.Run("EveryAuditedChangeWritesOneEntryWithItsActorTargetAndDetails", func(t *testing.T) {
		t.Parallel()
		e := setupAudit(t, newLedger)
		alice, _ := e.mustKey(t, "alice", apikey.All().List()...)
		bob, _ := e.mustKey(t, "bob", apikey.LinksWrite)
		carol, _ := e.mustKey(t, "carol", apikey.LinksWrite, apikey.SessionsWrite)
		seen := 0
		// step runs change as actor and checks that it wrote exactly one
		// entry, the newest, with action, the target target returns once
		// the change ran, and the current time; it returns the details.
		step := func(actor ledger.Actor, action string, target func() ledger.AuditTarget, change func(ctx context.Context) error) map[string]any {
			t.Helper()
			e.clock.Add(time.Millisecond)
			at := e.clock.Now()
			if err := change(ledger.WithActor(e.ctx, actor)); err != nil {
				t.Fatalf("%s: %v", action, err)
			}
			all := e.entries(t, ledger.AuditQuery{})
			if len(all) != seen+1 {
				t.Fatalf("%s wrote %d entries, want 1", action, len(all)-seen)
			}
			seen++
			x := all[0]
			if id, err := uuid.Parse(x.ID); err != nil || id.Version() != 7 {
				t.Errorf("%s: entry id %q is not a UUIDv7", action, x.ID)
			}
			if x.Action != action || x.Target != target() || x.Actor != actor || !x.At.Equal(at) {
				t.Fatalf("entry = %+v, want %s on %+v by %+v at %v", x, action, target(), actor, at)
			}
			return details(t, x)
		}
		actor := func(k *ledger.Key, req string) ledger.Actor {
			return ledger.Actor{KeyID: k.ID, KeyName: k.Name, RequestID: req}
		}
		on := func(typ, id string) func() ledger.AuditTarget {
			return func() ledger.AuditTarget { return ledger.AuditTarget{Type: typ, ID: id} }
		}

		// A link created, topped up and revoked by three keys.
		l := e.newLink()
		l.AccountID = "acct-7"
		d := step(actor(alice, "req-1"), ledger.ActionLinkCreated, on(ledger.TargetLink, l.ID), func(ctx context.Context) error {
			_, created, err := e.l.LinkCreate(ctx, l)
			if err == nil && !created {
				err = errors.New("not created")
			}
			return err
		})
		obj := d["object"].(map[string]any)
		if d["downloads"] != float64(l.Allowance) || d["delivery"] != l.Delivery || d["account_id"] != "acct-7" ||
			d["filename"] != l.Filename || obj["bucket"] != l.Object.Bucket || obj["key"] != l.Object.Key ||
			obj["version_id"] != l.Object.VersionID || d["expires_at"] != ledger.Micro(l.ExpiresAt).Format(time.RFC3339Nano) {
			t.Errorf("link.created details %v", d)
		}
		linkTarget := on(ledger.TargetLink, l.ID)
		d = step(actor(bob, "req-2"), ledger.ActionLinkAllowanceAdded, linkTarget, func(ctx context.Context) error {
			return e.l.AllowanceAdd(ctx, l.ID, 3, "customer asked")
		})
		if d["add"] != float64(3) || d["reason"] != "customer asked" {
			t.Errorf("link.allowance_added details %v", d)
		}
		x := e.MustSessionFor(t, l, "acct-7") // a claim: the public side, no actor
		d = step(actor(carol, "req-3"), ledger.ActionSessionRevoked, on(ledger.TargetSession, x.ID),
			func(ctx context.Context) error { return e.l.SessionRevoke(ctx, x.ID) })
		if len(d) != 0 {
			t.Errorf("session.revoked details %v, want {}", d)
		}
		e.MustSessionFor(t, l, "acct-7")
		d = step(actor(carol, "req-4"), ledger.ActionLinkRevoked, linkTarget, func(ctx context.Context) error {
			return e.l.LinkRevoke(ctx, l.ID)
		})
		if d["sessions_revoked"] != float64(1) || d["object_deleted"] != false {
			t.Errorf("link.revoked details %v, want the one live session revoked", d)
		}

		o := ledger.Object{Bucket: "b", Key: "releases/v1.2.tar.gz", VersionID: "v-" + uuid.NewString(), Size: 4096,
			ETag: `"e1"`, ContentType: "application/gzip", SHA256: strings.Repeat("ab", 32)}
		objTarget := on(ledger.TargetObject, o.Key)
		d = step(ledger.Bootstrap("req-5"), ledger.ActionObjectStored, objTarget, func(ctx context.Context) error {
			return e.l.ObjectRecord(ctx, o)
		})
		if d["bucket"] != o.Bucket || d["key"] != o.Key || d["version_id"] != o.VersionID || d["size"] != float64(o.Size) ||
			d["sha256"] != o.SHA256 || d["etag"] != o.ETag {
			t.Errorf("object.stored details %v", d)
		}
		d = step(actor(alice, "req-6"), ledger.ActionObjectDeleted, objTarget, func(ctx context.Context) error {
			del, err := e.l.DeletionBegin(ctx, o.Bucket, o.Key, o.VersionID, false)
			if err != nil {
				return err
			}
			if del.DecidedBy == nil || del.DecidedBy.KeyID != alice.ID {
				return fmt.Errorf("deletion decided by %+v, want alice", del.DecidedBy)
			}
			return e.l.DeletionFinish(ctx, *del, nil)
		})
		if d["version_id"] != o.VersionID || d["force"] != false || d["sha256"] != o.SHA256 {
			t.Errorf("object.deleted details %v", d)
		}

		var made *ledger.Key
		d = step(actor(alice, "req-7"), ledger.ActionKeyCreated, func() ledger.AuditTarget {
			return ledger.AuditTarget{Type: ledger.TargetKey, ID: made.ID}
		}, func(ctx context.Context) error {
			k, secret := mustKeyOn(t, ctx, e.l, "ci", e.clock.Now().Add(time.Hour), apikey.LinksRead, apikey.ObjectsWrite)
			made = k
			if strings.Contains(string(e.entries(t, ledger.AuditQuery{Limit: 1})[0].Details), strings.TrimPrefix(secret, apikey.Prefix)) {
				return errors.New("key.created details carry the secret")
			}
			return nil
		})
		if d["name"] != "ci" || fmt.Sprint(d["scopes"]) != "[links:read objects:write]" || d["expires_at"] == nil {
			t.Errorf("key.created details %v", d)
		}
		d = step(actor(alice, "req-8"), ledger.ActionKeyRevoked, on(ledger.TargetKey, made.ID),
			func(ctx context.Context) error { return e.l.KeyRevoke(ctx, made.ID) })
		if d["name"] != "ci" {
			t.Errorf("key.revoked details %v", d)
		}

		// The link's own entries, by target: three keys, three actions.
		var byWhom []string
		for _, x := range e.entries(t, ledger.AuditQuery{TargetID: l.ID}) {
			byWhom = append(byWhom, x.Action+" by "+x.Actor.KeyName)
		}
		if want := []string{"link.revoked by carol", "link.allowance_added by bob", "link.created by alice"}; !slices.Equal(byWhom, want) {
			t.Fatalf("the link's entries %v, want %v", byWhom, want)
		}
	})
	t.Run("RepeatsAndReplaysWriteNoEntry", func(t *testing.T) {
		t.Parallel()
		e := setupAudit(t, newLedger)
		k, _ := e.mustKey(t, "ops", apikey.All().List()...)
		ctx := e.as(k, "req")
		l := e.newLink()
		l.IdempotencyKey = "once"
		if _, _, err := e.l.LinkCreate(ctx, l); err != nil {
			t.Fatal(err)
		}
		replay := *l
		replay.ID, replay.TokenHash = uuid.Must(uuid.NewV7()).String(), randomHash(t)
		if _, created, err := e.l.LinkCreate(ctx, &replay); err != nil || created {
			t.Fatalf("replay = %v, %v", created, err)
		}
		x := e.MustSession(t, l, 1000, 1)
		o := e.mustRecord(t, "k")
		made, _ := e.mustKey(t, "made", apikey.LinksRead)
		for range 2 {
			for _, change := range []func() error{
				func() error { return e.l.LinkRevoke(ctx, l.ID) },
				func() error { return e.l.SessionRevoke(ctx, x.ID) },
				func() error { return e.l.KeyRevoke(ctx, made.ID) },
				func() error { _, err := e.l.DeletionBegin(ctx, o.Bucket, o.Key, o.VersionID, false); return err },
			} {
				if err := change(); err != nil {
					t.Fatal(err)
				}
			}
		}
		var actions []string
		for _, x := range e.entries(t, ledger.AuditQuery{}) {
			actions = append(actions, x.Action)
		}
		want := []string{ledger.ActionObjectDeleted, ledger.ActionKeyRevoked, ledger.ActionLinkRevoked, ledger.ActionLinkCreated}
		if !slices.Equal(actions, want) {
			t.Fatalf("entries %v, want one per change, %v (a session revoked with its link is not revoked again)", actions, want)
		}
	})
	t.Run("ChangesWithoutAnActorWriteNoEntry", func(t *testing.T) {
		t.Parallel()
		e := setupAudit(t, newLedger)
		l := e.MustLink(t, 2)
		if err := e.l.AllowanceAdd(e.ctx, l.ID, 1, "sweeper"); err != nil {
			t.Fatal(err)
		}
		x := e.MustSession(t, l, 1000, 1)
		if err := e.l.SessionRevoke(e.ctx, x.ID); err != nil {
			t.Fatal(err)
		}
		o := e.mustRecord(t, "k")
		spent := e.linkTo(t, o, 1, func(l *ledger.Link) { l.ExpiresAt = e.clock.Now().Add(48 * time.Hour) })
		e.mustClaim(t, spent)
		made, _ := e.mustKey(t, "made", apikey.LinksRead)
		if err := e.l.KeyRevoke(e.ctx, made.ID); err != nil {
			t.Fatal(err)
		}
		if err := e.l.LinkRevoke(e.ctx, l.ID); err != nil {
			t.Fatal(err)
		}
		// Retention decides the version's deletion and revokes its
		// exhausted link: the gateway's own change, whatever the context
		// carries.
		e.clock.Add(retention + time.Second)
		k, _ := e.mustKey(t, "ops", apikey.All().List()...)
		ds, err := e.l.DeletionClaim(e.as(k, "req"), retention, 10)
		if err != nil || len(ds) != 1 || ds[0].DecidedBy != nil {
			t.Fatalf("DeletionClaim = %+v, %v; want the version, decided by no one", ds, err)
		}
		if err := e.l.DeletionFinish(e.ctx, ds[0], nil); err != nil {
			t.Fatal(err)
		}
		if got := e.entries(t, ledger.AuditQuery{}); len(got) != 0 {
			t.Fatalf("changes without an actor wrote %d entries, first %+v", len(got), got[0])
		}
		if st := e.mustStatus(t, spent.ID); st.RevokedAt == nil {
			t.Fatal("retention did not revoke the exhausted link")
		}
	})
	t.Run("AnInvalidActorChangesNothing", func(t *testing.T) {
		t.Parallel()
		e := setupAudit(t, newLedger)
		for _, a := range []ledger.Actor{
			{KeyID: "", KeyName: "x"},
			{KeyID: strings.Repeat("k", 37), KeyName: "x"},
			{KeyID: "has space", KeyName: "x"},
			{KeyID: "k", KeyName: strings.Repeat("n", ledger.MaxKeyName+1)},
			{KeyID: "k", KeyName: "x", RequestID: strings.Repeat("r", 65)},
			{KeyID: "k", KeyName: "x", RequestID: "line\nbreak"},
		} {
			l := e.newLink()
			if _, _, err := e.l.LinkCreate(ledger.WithActor(e.ctx, a), l); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("LinkCreate as %+v = %v, want ErrInvalid", a, err)
			}
			if _, err := e.l.LinkGet(e.ctx, l.ID); !errors.Is(err, ledger.ErrNotFound) {
				t.Errorf("LinkCreate as %+v created the link", a)
			}
		}
	})
	t.Run("AnInjectedFailureAfterTheChangeLeavesNeitherChangeNorEntry", func(t *testing.T) {
		t.Parallel()
		e := setupAudit(t, newLedger)
		k, _ := e.mustKey(t, "ops", apikey.All().List()...)
		ctx := e.as(k, "req")
		live := e.MustLink(t, 1)
		x := e.MustSession(t, e.MustLink(t, 1), 1000, 1)
		o := e.mustRecord(t, "stored")
		victim, _ := e.mustKey(t, "victim", apikey.LinksRead)
		fresh := e.newLink()
		newObj := ledger.Object{Bucket: "b", Key: "new", VersionID: "v9", Size: 1, ETag: `"x"`}
		var made []byte
		for _, c := range []struct {
			action string
			change func() error
			// unchanged fails unless nothing of the change remains.
			unchanged func() error
		}{
			{ledger.ActionLinkCreated, func() error { _, _, err := e.l.LinkCreate(ctx, fresh); return err },
				func() error {
					if _, err := e.l.LinkGet(e.ctx, fresh.ID); !errors.Is(err, ledger.ErrNotFound) {
						return fmt.Errorf("the link exists (%v)", err)
					}
					return nil
				}},
			{ledger.ActionLinkAllowanceAdded, func() error { return e.l.AllowanceAdd(ctx, live.ID, 5, "r") },
				func() error {
					if st := e.mustStatus(t, live.ID); st.Allowance != 1 {
						return fmt.Errorf("allowance %d", st.Allowance)
					}
					if ch, err := e.l.AllowanceList(e.ctx, live.ID); err != nil || len(ch) != 0 {
						return fmt.Errorf("allowance changes %v, %v", ch, err)
					}
					return nil
				}},
			{ledger.ActionLinkRevoked, func() error { return e.l.LinkRevoke(ctx, live.ID) },
				func() error {
					if st := e.mustStatus(t, live.ID); st.RevokedAt != nil {
						return errors.New("the link is revoked")
					}
					return nil
				}},
			{ledger.ActionSessionRevoked, func() error { return e.l.SessionRevoke(ctx, x.ID) },
				func() error {
					if s, err := e.l.SessionGet(e.ctx, x.ID); err != nil || s.RevokedAt != nil {
						return fmt.Errorf("the session is revoked (%v)", err)
					}
					return nil
				}},
			{ledger.ActionObjectStored, func() error { return e.l.ObjectRecord(ctx, newObj) },
				func() error {
					if _, err := e.l.ObjectGet(e.ctx, newObj.Bucket, newObj.Key, newObj.VersionID); !errors.Is(err, ledger.ErrNotFound) {
						return fmt.Errorf("the object is recorded (%v)", err)
					}
					return nil
				}},
			{ledger.ActionObjectDeleted, func() error {
				_, err := e.l.DeletionBegin(ctx, o.Bucket, o.Key, o.VersionID, false)
				return err
			}, func() error {
				if st := e.wantState(t, o, ledger.ObjectStored); st.State != ledger.ObjectStored {
					return errors.New("the deletion was decided")
				}
				return nil
			}},
			{ledger.ActionKeyCreated, func() error {
				_, hash := apikey.New()
				made = hash
				_, err := e.l.KeyCreate(ctx, ledger.KeyCreateParams{Name: "n", Scopes: apikey.Of(apikey.LinksRead), SecretHash: hash})
				return err
			}, func() error {
				if _, err := e.l.KeyGetByHash(e.ctx, made); !errors.Is(err, ledger.ErrNotFound) {
					return fmt.Errorf("the key exists (%v)", err)
				}
				return nil
			}},
			{ledger.ActionKeyRevoked, func() error { return e.l.KeyRevoke(ctx, victim.ID) },
				func() error {
					if got, err := e.l.KeyGet(e.ctx, victim.ID); err != nil || got.RevokedAt != nil {
						return fmt.Errorf("the key is revoked (%v)", err)
					}
					return nil
				}},
		} {
			// Inside the change's own transaction, just before COMMIT,
			// its entry is there; then the transaction fails.
			var inTx int
			f := func(ctx context.Context, tx *sql.Tx) error {
				if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_entries WHERE action = ?`, c.action).Scan(&inTx); err != nil {
					return err
				}
				return errInjected
			}
			e.fail.Store(&f)
			err := c.change()
			e.fail.Store(nil)
			if !errors.Is(err, errInjected) {
				t.Errorf("%s with a failing COMMIT = %v, want the injected failure", c.action, err)
				continue
			}
			if inTx != 1 {
				t.Errorf("%s: its transaction held %d entries before COMMIT, want its own", c.action, inTx)
			}
			if err := c.unchanged(); err != nil {
				t.Errorf("%s rolled back, yet %v", c.action, err)
			}
			if got := e.entries(t, ledger.AuditQuery{}); len(got) != 0 {
				t.Errorf("%s rolled back, yet %d entries remain", c.action, len(got))
			}
		}
		// Without the failure, each change goes through.
		if err := e.l.LinkRevoke(ctx, live.ID); err != nil {
			t.Fatal(err)
		}
		if got := e.entries(t, ledger.AuditQuery{}); len(got) != 1 {
			t.Fatalf("after a change that committed: %d entries, want 1", len(got))
		}
	})
	t.Run("FiltersAndCursorPages", func(t *testing.T) {
		t.Parallel()
		e := setupAudit(t, newLedger)
		alice, _ := e.mustKey(t, "alice", apikey.All().List()...)
		bob, _ := e.mustKey(t, "bob", apikey.All().List()...)
		var links []*ledger.Link
		t0 := e.clock.Now()
		for i := range 6 {
			k := alice
			if i%2 == 1 {
				k = bob
			}
			l := e.newLink()
			if _, _, err := e.l.LinkCreate(e.as(k, fmt.Sprint("create-", i)), l); err != nil {
				t.Fatal(err)
			}
			links = append(links, l)
			if i%3 == 0 {
				e.clock.Add(time.Millisecond) // several entries share a microsecond
			}
			if err := e.l.AllowanceAdd(e.as(alice, fmt.Sprint("top-up-", i)), l.ID, 1, "more"); err != nil {
				t.Fatal(err)
			}
			if i < 2 {
				if err := e.l.LinkRevoke(ledger.WithActor(e.ctx, ledger.Bootstrap("revoke")), l.ID); err != nil {
					t.Fatal(err)
				}
			}
		}
		all := e.entries(t, ledger.AuditQuery{})
		if len(all) != 14 {
			t.Fatalf("%d entries, want 14", len(all))
		}
		for i := 1; i < len(all); i++ {
			if c := all[i-1].At.Compare(all[i].At); c < 0 || c == 0 && all[i-1].ID < all[i].ID {
				t.Fatalf("entries not newest first (at, then id, descending) at %d", i)
			}
		}
		// Every filter, alone and together, paged by 2 and by 500, gives
		// exactly the entries it selects, in the same order.
		mid := all[7].At
		for _, c := range []struct {
			name string
			q    ledger.AuditQuery
			keep func(ledger.AuditEntry) bool
		}{
			{"all", ledger.AuditQuery{}, func(ledger.AuditEntry) bool { return true }},
			{"actor", ledger.AuditQuery{ActorKeyID: bob.ID}, func(x ledger.AuditEntry) bool { return x.Actor.KeyID == bob.ID }},
			{"bootstrap", ledger.AuditQuery{ActorKeyID: ledger.BootstrapKeyID},
				func(x ledger.AuditEntry) bool { return x.Actor.KeyID == ledger.BootstrapKeyID }},
			{"action", ledger.AuditQuery{Action: ledger.ActionLinkAllowanceAdded},
				func(x ledger.AuditEntry) bool { return x.Action == ledger.ActionLinkAllowanceAdded }},
			{"target", ledger.AuditQuery{TargetID: links[1].ID}, func(x ledger.AuditEntry) bool { return x.Target.ID == links[1].ID }},
			{"actor and action", ledger.AuditQuery{ActorKeyID: alice.ID, Action: ledger.ActionLinkCreated},
				func(x ledger.AuditEntry) bool {
					return x.Actor.KeyID == alice.ID && x.Action == ledger.ActionLinkCreated
				}},
			{"target and actor", ledger.AuditQuery{TargetID: links[0].ID, ActorKeyID: alice.ID},
				func(x ledger.AuditEntry) bool { return x.Target.ID == links[0].ID && x.Actor.KeyID == alice.ID }},
			{"after", ledger.AuditQuery{After: mid}, func(x ledger.AuditEntry) bool { return x.At.After(mid) }},
			{"before", ledger.AuditQuery{Before: mid}, func(x ledger.AuditEntry) bool { return x.At.Before(mid) }},
			{"between, by action", ledger.AuditQuery{After: t0, Before: mid.Add(time.Nanosecond), Action: ledger.ActionLinkCreated},
				func(x ledger.AuditEntry) bool {
					return x.At.After(t0) && !x.At.After(mid) && x.Action == ledger.ActionLinkCreated
				}},
			{"no such actor", ledger.AuditQuery{ActorKeyID: "nobody"}, func(ledger.AuditEntry) bool { return false }},
		} {
			var want []string
			for _, x := range all {
				if c.keep(x) {
					want = append(want, x.ID)
				}
			}
			for _, limit := range []int{2, 500} {
				q := c.q
				q.Limit = limit
				var got []string
				for _, x := range e.entries(t, q) {
					got = append(got, x.ID)
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s, pages of %d: %d entries %v, want %d %v", c.name, limit, len(got), got, len(want), want)
				}
			}
		}
		first, err := e.l.AuditList(e.ctx, ledger.AuditQuery{Limit: 14})
		if err != nil || len(first.Entries) != 14 || first.Next != "" {
			t.Fatalf("a page holding every entry = %d entries, next %q, %v; want no next page", len(first.Entries), first.Next, err)
		}
		for _, q := range []ledger.AuditQuery{{Cursor: "%%%"}, {Limit: -1}, {Limit: ledger.MaxListLimit + 1},
			{Action: "link.deleted"}, {Cursor: "MTIzNDU2Nzg5MDEyMzQ1Njc4OTAvaWQ"}} {
			if _, err := e.l.AuditList(e.ctx, q); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("AuditList(%+v) = %v, want ErrInvalid", q, err)
			}
		}
	})
	t.Run("RetentionPurgesOldEntriesAndDeadKeysInBoundedBatches", func(t *testing.T) {
		t.Parallel()
		e := setupAudit(t, newLedger)
		const keep = 24 * time.Hour
		ops, _ := e.mustKey(t, "ops", apikey.All().List()...)
		gone, _ := e.mustKey(t, "gone", apikey.LinksRead)
		expired, _ := mustKeyOn(t, e.ctx, e.l, "expired", e.clock.Now().Add(time.Hour), apikey.LinksRead)
		_, sessionOfExpired := e.mustConsole(t, expired.ID)
		for range 5 {
			if err := e.l.ObjectRecord(e.as(ops, "old"), ledger.Object{Key: "old", VersionID: uuid.NewString(), Size: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.l.KeyRevoke(e.as(ops, "old"), gone.ID); err != nil {
			t.Fatal(err)
		}
		t0 := e.clock.Now()
		e.clock.Add(time.Hour)
		for range 2 {
			if err := e.l.ObjectRecord(e.as(ops, "new"), ledger.Object{Key: "new", VersionID: uuid.NewString(), Size: 1}); err != nil {
				t.Fatal(err)
			}
		}
		if res, err := e.l.LinkPurge(e.ctx, 0, 10); err != nil || res.Audit != 0 || res.Keys != 0 {
			t.Fatalf("retention 0 purged %+v, %v; want nothing", res, err)
		}
		e.clock.Set(t0.Add(keep - time.Microsecond))
		if res, err := e.l.LinkPurge(e.ctx, keep, 10); err != nil || res.Audit != 0 || res.Keys != 0 {
			t.Fatalf("1µs early LinkPurge = %+v, %v; want nothing", res, err)
		}
		e.clock.Set(t0.Add(keep))
		var audit, keys []int
		for range 4 {
			res, err := e.l.LinkPurge(e.ctx, keep, 2)
			if err != nil {
				t.Fatal(err)
			}
			audit, keys = append(audit, res.Audit), append(keys, res.Keys)
		}
		if want := []int{2, 2, 2, 0}; !slices.Equal(audit, want) { // 5 object.stored + 1 key.revoked
			t.Errorf("batches of 2 purged %v audit entries, want %v", audit, want)
		}
		if want := []int{1, 0, 0, 0}; !slices.Equal(keys, want) { // gone; expired died 1 h later
			t.Errorf("batches of 2 purged %v keys, want %v", keys, want)
		}
		left := e.entries(t, ledger.AuditQuery{})
		if len(left) != 2 || left[0].Actor.RequestID != "new" || left[1].Actor.RequestID != "new" {
			t.Fatalf("entries left %+v, want the two new ones", left)
		}
		if _, err := e.l.KeyGet(e.ctx, gone.ID); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("the key revoked a retention ago = %v, want purged", err)
		}
		if _, err := e.l.KeyGet(e.ctx, expired.ID); err != nil {
			t.Fatalf("the key expired less than a retention ago = %v, want kept", err)
		}
		e.clock.Set(t0.Add(keep + time.Hour))
		if res, err := e.l.LinkPurge(e.ctx, keep, 10); err != nil || res.Keys != 1 {
			t.Fatalf("a retention after its expiry LinkPurge = %+v, %v; want the expired key", res, err)
		}
		var n int
		if err := sqlOf(t, e.l).QueryRowContext(e.ctx, `SELECT COUNT(*) FROM console_sessions WHERE secret_hash = ?`,
			sessionOfExpired).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%d console sessions of the purged key left, %v", n, err)
		}
		if _, err := e.l.KeyGet(e.ctx, ops.ID); err != nil {
			t.Fatalf("a live key = %v, want kept", err)
		}
	})
	t.Run("WebhookEventsOfAuditedChangesCarryTheActor", func(t *testing.T) {
		t.Parallel()
		e := setupAudit(t, newLedger)
		o, ok := e.l.(ledger.Outbox)
		if !ok {
			t.Fatalf("%T does not implement ledger.Outbox", e.l)
		}
		alice, _ := e.mustKey(t, "alice", apikey.All().List()...)
		bob, _ := e.mustKey(t, "bob", apikey.All().List()...)
		gw := e.MustLink(t, 1) // by the gateway itself: no actor
		l := e.newLink()
		if _, _, err := e.l.LinkCreate(e.as(alice, "r1"), l); err != nil {
			t.Fatal(err)
		}
		if _, err := e.claim(l, ""); err != nil {
			t.Fatal(err)
		}
		if err := e.l.LinkRevoke(e.as(bob, "r2"), l.ID); err != nil {
			t.Fatal(err)
		}
		// A forced deletion by alice revokes the live link; the store
		// deletion is finished later by the sweeper, without an actor.
		obj := e.mustRecord(t, "forced")
		pinned := e.linkTo(t, obj, 1)
		d, err := e.l.DeletionBegin(e.as(alice, "r3"), obj.Bucket, obj.Key, obj.VersionID, true)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.l.DeletionFinish(e.ctx, *d, nil); err != nil {
			t.Fatal(err)
		}
		type actorJSON struct {
			KeyID   string `json:"key_id"`
			KeyName string `json:"key_name"`
		}
		got := map[string][]string{}
		for _, ev := range drain(t, e.env, o) {
			var body struct {
				Data map[string]json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal(ev.Body, &body); err != nil {
				t.Fatal(err)
			}
			raw, has := body.Data["actor"]
			if want := slices.Contains(ledger.EventFields(ev.Type), "actor"); has != want {
				t.Errorf("%s: actor present %v, want %v: %s", ev.Type, has, want, ev.Body)
				continue
			}
			if !has {
				continue
			}
			who := "null"
			if string(raw) != "null" {
				var a actorJSON
				if err := json.Unmarshal(raw, &a); err != nil || a.KeyID == "" {
					t.Fatalf("%s: actor %s", ev.Type, raw)
				}
				who = a.KeyName
				if (a.KeyName == "alice") != (a.KeyID == alice.ID) {
					t.Errorf("%s: actor %s names the wrong key", ev.Type, raw)
				}
			}
			key := ev.Type + " " + ev.LinkID
			if ev.LinkID == "" {
				key = ev.Type
			}
			got[key] = append(got[key], who)
		}
		want := map[string][]string{
			ledger.EventLinkCreated + " " + gw.ID:     {"null"},
			ledger.EventLinkCreated + " " + l.ID:      {"alice"},
			ledger.EventLinkRevoked + " " + l.ID:      {"bob"},
			ledger.EventLinkCreated + " " + pinned.ID: {"null"},
			ledger.EventLinkRevoked + " " + pinned.ID: {"alice"},
			ledger.EventObjectDeleted:                 {"alice"},
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("event actors %v, want %v", got, want)
		}
		// Their audit entries name the same keys.
		var entries []string
		for _, x := range e.entries(t, ledger.AuditQuery{}) {
			entries = append(entries, x.Action+" "+x.Actor.KeyName)
		}
		if want := []string{"object.deleted alice", "link.revoked alice", "link.revoked bob", "link.created alice"}; !slices.Equal(entries, want) {
			t.Fatalf("entries %v, want %v", entries, want)
		}
	})
}

// ExerciseAudit runs the audit trail's sentences (SPEC §6, "Audit"): every
// change made with an actor writes exactly its entry in its own
// transaction, nothing else writes one, the listing filters and pages by
// index, retention purges, and webhook events name the same actor.
func ExerciseAudit(t *testing.T, newLedger NewLedgerWith) {
	exerciseAudit(t, newLedger)
}
