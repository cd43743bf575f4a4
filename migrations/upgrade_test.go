package migrations

import (
	"context"
	"database/sql"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"github.com/pressly/goose/v3"
	_ "modernc.org/sqlite" // the SQLite database of the upgrade

	"github.com/dlgate/dlgate/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// TestUpgradeNumbersEachLinksEventsOnFromItsLastOne applies the migrations
// up to 00006, writes events as the ledger did then (ordered by seq alone),
// and applies the rest: each link's pending events keep their order
// (link_seq = seq) and the link's own sequence continues after its last
// one, so that no later event can be delivered before them.
func TestUpgradeNumbersEachLinksEventsOnFromItsLastOne(t *testing.T) {
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			ctx := context.Background()
			db := e.open(t)
			t.Cleanup(func() { db.Close() })
			p := e.provider(t, db)
			if _, err := p.UpTo(ctx, 6); err != nil {
				t.Fatal(err)
			}
			now := e.time(time.Now())
			for _, id := range []string{"link-a", "link-b", "link-c"} {
				if _, err := db.ExecContext(ctx, `INSERT INTO links (id, token_hash, bucket, object_key, version_id, size, etag,
  content_type, filename, allowance, remaining, expires_at, created_at, delivery)
VALUES (?, ?, 'b', 'k', 'v', 1, '"e"', 'text/plain', 'f', 1, 1, ?, ?, 'stream')`, id, []byte(id), now, now); err != nil {
					t.Fatal(err)
				}
			}
			for i, ev := range []struct{ link, status string }{
				{"link-a", "pending"}, {"link-b", "delivered"}, {"", "pending"}, {"link-a", "pending"}, {"link-b", "pending"},
			} {
				var link any
				if ev.link != "" {
					link = ev.link
				}
				if _, err := db.ExecContext(ctx, `INSERT INTO webhook_outbox (event_id, link_id, event_type, payload, status,
  created_at, next_attempt_at) VALUES (?, ?, 'link.created', '{}', ?, ?, ?)`, i, link, ev.status, now, now); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := p.Up(ctx); err != nil {
				t.Fatal(err)
			}

			rows, err := db.QueryContext(ctx, `SELECT seq, link_id, link_seq FROM webhook_outbox ORDER BY seq`)
			if err != nil {
				t.Fatal(err)
			}
			last := map[string]int64{}
			for rows.Next() {
				var (
					seq     int64
					link    sql.NullString
					linkSeq sql.NullInt64
				)
				if err := rows.Scan(&seq, &link, &linkSeq); err != nil {
					t.Fatal(err)
				}
				switch {
				case !link.Valid && linkSeq.Valid:
					t.Errorf("event %d of no link got link_seq %d", seq, linkSeq.Int64)
				case link.Valid && (!linkSeq.Valid || linkSeq.Int64 != seq):
					t.Errorf("event %d of %s got link_seq %v, want its seq", seq, link.String, linkSeq)
				case link.Valid:
					last[link.String] = seq
				}
			}
			rows.Close()
			for _, id := range []string{"link-a", "link-b", "link-c"} {
				var got int64
				if err := db.QueryRowContext(ctx, `SELECT event_seq FROM links WHERE id = ?`, id).Scan(&got); err != nil {
					t.Fatal(err)
				}
				if got != last[id] {
					t.Errorf("%s: event_seq %d after the upgrade, want %d (its last event)", id, got, last[id])
				}
			}
		})
	}
}

// engine is a database the migrations run on in these tests.
type engine struct {
	name    string
	dialect string
	gd      goose.Dialect
	open    func(t *testing.T) *sql.DB
	time    func(time.Time) any
}

// engines are a fresh SQLite file and a fresh MariaDB database.
func engines() []engine {
	return []engine{
		{"SQLite", SQLite, goose.DialectSQLite3, func(t *testing.T) *sql.DB {
			db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "gateway.db"))
			if err != nil {
				t.Fatal(err)
			}
			return db
		}, func(at time.Time) any { return at.UnixMicro() }},
		{"MySQL", MySQL, goose.DialectMySQL, func(t *testing.T) *sql.DB {
			db, err := sql.Open("mysql", testenv.SharedMariaDB(t).NewDatabase(t))
			if err != nil {
				t.Fatal(err)
			}
			return db
		}, func(at time.Time) any { return at.UTC() }},
	}
}

// provider is goose over e's migrations on db.
func (e engine) provider(t *testing.T, db *sql.DB) *goose.Provider {
	t.Helper()
	sub, err := fs.Sub(files, e.dialect)
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(e.gd, db, sub)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
