package migrations

import (
	"context"
	"testing"
	"time"
)

// Migration 00011 adds keys, the audit trail and console sessions to a
// database that already holds object versions, which keep their rows and
// have no decider; it goes down (its tables and columns gone) and up
// again.
func TestKeysAuditMigrationAppliesOverDataAndGoesDownAndUp(t *testing.T) {
	for _, e := range engines() {
		t.Run(e.name, func(t *testing.T) {
			ctx := context.Background()
			db := e.open(t)
			t.Cleanup(func() { db.Close() })
			p := e.provider(t, db)
			if _, err := p.UpTo(ctx, 8); err != nil {
				t.Fatal(err)
			}
			now := e.time(time.Now())
			if _, err := db.ExecContext(ctx, `INSERT INTO objects (version_hash, bucket, object_key, version_id, size, etag,
  content_type, stored_at, state, check_at) VALUES (?, 'b', 'k', 'v', 1, '"e"', '', ?, 'deleting', ?)`,
				make([]byte, 32), now, now); err != nil {
				t.Fatal(err)
			}
			up := func() {
				t.Helper()
				if _, err := p.Up(ctx); err != nil {
					t.Fatal(err)
				}
				if v, err := p.GetDBVersion(ctx); err != nil || v < 11 {
					t.Fatalf("version %d after Up, %v", v, err)
				}
				var by *string
				var state string
				if err := db.QueryRowContext(ctx, `SELECT state, decided_by_key_id FROM objects`).Scan(&state, &by); err != nil ||
					state != "deleting" || by != nil {
					t.Fatalf("the object after 00011 = %q decided by %v, %v; want it as it was, decided by no one", state, by, err)
				}
				hash := make([]byte, 32)
				for _, ins := range []struct {
					q    string
					args []any
				}{
					{`INSERT INTO api_keys (id, name, secret_hash, scopes, created_at) VALUES ('k1', 'ci', ?, 'links:read', ?)`,
						[]any{hash, now}},
					{`INSERT INTO console_sessions (id, secret_hash, key_id, created_at, expires_at, last_seen_at)
VALUES ('c1', ?, 'k1', ?, ?, ?)`, []any{hash, now, now, now}},
					{`INSERT INTO audit_entries (id, created_at, actor_key_id, actor_key_name, action, target_type, target_id, details)
VALUES ('a1', ?, 'bootstrap', 'bootstrap', 'key.created', 'key', 'k1', '{}')`, []any{now}},
				} {
					if _, err := db.ExecContext(ctx, ins.q, ins.args...); err != nil {
						t.Fatalf("%.40s: %v", ins.q, err)
					}
				}
			}
			up()
			if _, err := p.DownTo(ctx, 8); err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{`SELECT COUNT(*) FROM api_keys`, `SELECT COUNT(*) FROM audit_entries`,
				`SELECT COUNT(*) FROM console_sessions`, `SELECT COUNT(decided_by_key_id) FROM objects`} {
				var n int
				if err := db.QueryRowContext(ctx, q).Scan(&n); err == nil {
					t.Errorf("after going down %q still answers", q)
				}
			}
			up()
		})
	}
}
