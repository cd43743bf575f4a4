package mysql_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore"
)

// onOneConnection opens a migrated ledger on a fresh database whose pool
// has a single connection, so that the session's status counters are
// those of the ledger's own statements, and returns it with a reader of
// one such counter (the SHOW itself not counted).
func onOneConnection(t *testing.T) (*sqlcore.DB, func(name string) int64) {
	t.Helper()
	db := MustOpen(t, testenv.SharedMariaDB(t).NewDatabase(t), time.Now).(*sqlcore.DB)
	db.DBClock = nil // the server's clock, as in production
	db.SQL().SetMaxOpenConns(1)
	return db, func(name string) int64 {
		t.Helper()
		var (
			n int64
			k string
		)
		if err := db.SQL().QueryRow(`SHOW SESSION STATUS LIKE ?`, name).Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		if name == "Questions" {
			n-- // this SHOW
		}
		return n
	}
}

// An audited change costs what the same change costs without an actor
// plus its audit INSERT: one statement (SPEC §6's "no more statements
// than today, except the audit insert"). A session's revocation, one
// autocommitted UPDATE without an actor, becomes a transaction with one
// (BEGIN, UPDATE, INSERT, COMMIT). Counted as MariaDB's Questions of the
// ledger's one connection.
func TestAnAuditedChangeCostsItsInsertOnly(t *testing.T) {
	db, status := onOneConnection(t)
	ctx := context.Background()
	k, err := db.KeyCreate(ctx, ledger.KeyCreateParams{Name: "ops", Scopes: apikey.All(), SecretHash: apikey.Hash(uuid.NewString())})
	if err != nil {
		t.Fatal(err)
	}
	actor := ledger.WithActor(ctx, ledger.Actor{KeyID: k.ID, KeyName: k.Name, RequestID: "r"})
	newLink := func(key string) *ledger.Link {
		h := apikey.Hash(uuid.NewString())
		return &ledger.Link{ID: uuid.Must(uuid.NewV7()).String(), TokenHash: h,
			Object:    ledger.Object{Bucket: "b", Key: key, VersionID: "v1", Size: 10, ETag: `"e"`},
			Allowance: 1, Remaining: 1, ExpiresAt: time.Now().Add(time.Hour), Delivery: ledger.DeliveryStream}
	}
	cost := func(f func() error) int64 {
		t.Helper()
		before := status("Questions")
		if err := f(); err != nil {
			t.Fatal(err)
		}
		return status("Questions") - before
	}
	type change struct {
		name  string
		extra int64 // statements the actor adds
		run   func(ctx context.Context) error
	}
	changes := func() []change {
		l, top, rev := newLink("a"), newLink("b"), newLink("c")
		var session string
		o := ledger.Object{Bucket: "b", Key: "o", VersionID: uuid.NewString(), Size: 1}
		gone := ledger.Object{Bucket: "b", Key: "d", VersionID: uuid.NewString(), Size: 1}
		for _, x := range []*ledger.Link{top, rev} {
			if _, _, err := db.LinkCreate(ctx, x); err != nil {
				t.Fatal(err)
			}
		}
		if err := db.ObjectRecord(ctx, gone); err != nil {
			t.Fatal(err)
		}
		rev2 := newLink("s")
		rev2.Delivery = ledger.DeliverySession
		if _, _, err := db.LinkCreate(ctx, rev2); err != nil {
			t.Fatal(err)
		}
		x, _, err := db.SessionMint(ctx, ledger.MintRequest{Claim: ledger.ClaimRequest{LinkID: rev2.ID, Client: "c"},
			SessionID: uuid.Must(uuid.NewV7()).String(), TokenHash: apikey.Hash(uuid.NewString()), ByteBudget: 10,
			MaxConcurrency: 1, ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		session = x.ID
		victim, err := db.KeyCreate(ctx, ledger.KeyCreateParams{Name: "v", Scopes: apikey.Of(apikey.LinksRead), SecretHash: apikey.Hash(uuid.NewString())})
		if err != nil {
			t.Fatal(err)
		}
		return []change{
			{"LinkCreate", 1, func(ctx context.Context) error { _, _, err := db.LinkCreate(ctx, l); return err }},
			{"AllowanceAdd", 1, func(ctx context.Context) error { return db.AllowanceAdd(ctx, top.ID, 1, "r") }},
			{"LinkRevoke", 1, func(ctx context.Context) error { return db.LinkRevoke(ctx, rev.ID) }},
			{"ObjectRecord", 1, func(ctx context.Context) error { return db.ObjectRecord(ctx, o) }},
			{"DeletionBegin", 1, func(ctx context.Context) error {
				_, err := db.DeletionBegin(ctx, gone.Bucket, gone.Key, gone.VersionID, false)
				return err
			}},
			// A transaction with or without an actor (it also marks the
			// session's grant interrupted): the actor adds its INSERT.
			{"SessionRevoke", 1, func(ctx context.Context) error { return db.SessionRevoke(ctx, session) }},
			// The actor's key row, read under lock; then the INSERT.
			{"KeyCreate", 2, func(ctx context.Context) error {
				_, err := db.KeyCreate(ctx, ledger.KeyCreateParams{Name: "n", Scopes: apikey.Of(apikey.LinksRead),
					SecretHash: apikey.Hash(uuid.NewString())})
				return err
			}},
			// The key's name and scopes for the details; then the INSERT.
			{"KeyRevoke", 2, func(ctx context.Context) error { return db.KeyRevoke(ctx, victim.ID) }},
		}
	}
	plain, audited := changes(), changes()
	for i := range plain {
		without, with := cost(func() error { return plain[i].run(ctx) }), cost(func() error { return audited[i].run(actor) })
		t.Logf("%s: %d statements without an actor, %d with", plain[i].name, without, with)
		if with-without != plain[i].extra {
			t.Errorf("%s: an actor adds %d statements, want %d", plain[i].name, with-without, plain[i].extra)
		}
	}
}

// A page of the audit trail reads about its own rows from the filter's
// index, however deep in the trail it is: no scan of the newer entries
// down to the cursor, no sort. Counted as the handler reads (index and
// row reads of every kind) of the ledger's one connection, per page of
// 20 from 3,000 entries.
func TestAuditPagesReadTheirRowsOnly(t *testing.T) {
	db, status := onOneConnection(t)
	ctx := context.Background()
	const n = 3000
	actors := []string{ledger.BootstrapKeyID, uuid.NewString(), uuid.NewString()}
	actions := ledger.Actions()
	target := uuid.NewString()
	t0 := time.Now().UTC().Truncate(time.Microsecond)
	var b strings.Builder
	var args []any
	flush := func() {
		if len(args) == 0 {
			return
		}
		if _, err := db.SQL().ExecContext(ctx, `INSERT INTO audit_entries (id, created_at, actor_key_id, actor_key_name,
  action, target_type, target_id, request_id, details) VALUES `+strings.TrimSuffix(b.String(), ","), args...); err != nil {
			t.Fatal(err)
		}
		b.Reset()
		args = args[:0]
	}
	for i := range n {
		tid := uuid.NewString()
		if i%5 == 0 {
			tid = target
		}
		b.WriteString("(?, ?, ?, 'k', ?, 'link', ?, 'r', '{}'),")
		args = append(args, uuid.Must(uuid.NewV7()).String(), t0.Add(time.Duration(i/2)*time.Millisecond),
			actors[i%len(actors)], actions[i%len(actions)], tid)
		if i%500 == 499 {
			flush()
		}
	}
	flush()
	rows, err := db.SQL().QueryContext(ctx, `ANALYZE TABLE audit_entries`)
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	reads := func() int64 {
		var sum int64
		for _, h := range []string{"Handler_read_first", "Handler_read_key", "Handler_read_last", "Handler_read_next",
			"Handler_read_prev", "Handler_read_rnd", "Handler_read_rnd_next"} {
			sum += status(h)
		}
		return sum
	}
	const limit = 20
	for _, c := range []struct {
		name string
		q    ledger.AuditQuery
	}{
		{"all", ledger.AuditQuery{}},
		{"actor", ledger.AuditQuery{ActorKeyID: actors[1]}},
		{"action", ledger.AuditQuery{Action: ledger.ActionObjectStored}},
		{"target", ledger.AuditQuery{TargetID: target}},
		{"actor and action", ledger.AuditQuery{ActorKeyID: actors[0], Action: ledger.ActionLinkCreated}},
		{"before", ledger.AuditQuery{Before: t0.Add(time.Second)}},
	} {
		q := c.q
		q.Limit = limit
		var worst int64
		pages := 0
		for {
			before := reads()
			p, err := db.AuditList(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if got := reads() - before; got > worst {
				worst = got
			}
			pages++
			if q.Cursor = p.Next; q.Cursor == "" {
				break
			}
		}
		t.Logf("%s: %d pages of %d, at most %d handler reads per page", c.name, pages, limit, worst)
		// The page's index range (limit+1 entries, plus what a second
		// filter skips within it) and a primary key lookup per entry.
		bound := int64(4*(limit+1) + 16)
		if c.name == "actor and action" {
			bound = int64(len(actions)) * 2 * (limit + 1) // one in len(actions) of the actor's entries match
		}
		if worst > bound {
			t.Errorf("%s: a page of %d cost up to %d handler reads over %d pages, want at most %d", c.name, limit, worst, pages, bound)
		}
		if pages < 2 {
			t.Errorf("%s: %d page(s); the filter should select several pages", c.name, pages)
		}
	}
}
