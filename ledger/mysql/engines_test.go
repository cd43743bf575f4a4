package mysql_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/google/uuid"

	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/ledgertest"
	"github.com/dlgate/dlgate/ledger/mysql"
	"github.com/dlgate/dlgate/ledger/sqlcore"
)

func TestParseVersion(t *testing.T) {
	cases := []struct {
		version    string
		want       mysql.Engine
		skipLocked bool
	}{
		{"8.4.3", mysql.Engine{Kind: mysql.MySQL, Major: 8, Minor: 4, Patch: 3}, true},
		{"8.0.0", mysql.Engine{Kind: mysql.MySQL, Major: 8}, false},
		{"8.0.36-0ubuntu0.22.04.1", mysql.Engine{Kind: mysql.MySQL, Major: 8, Patch: 36}, true},
		{"10.11.6-MariaDB-0+deb12u1", mysql.Engine{Kind: mysql.MariaDB, Major: 10, Minor: 11, Patch: 6}, true},
		{"10.5.23-MariaDB", mysql.Engine{Kind: mysql.MariaDB, Major: 10, Minor: 5, Patch: 23}, false},
		{"11.4.2-MariaDB-ubu2404-log", mysql.Engine{Kind: mysql.MariaDB, Major: 11, Minor: 4, Patch: 2}, true},
		{"8.0.11-TiDB-v8.5.3", mysql.Engine{Kind: mysql.TiDB, Major: 8, Minor: 5, Patch: 3}, false},
		{"8.0.11-TiDB-v9.0.0-beta.1.pre-640-g24903d6b24-dirty", mysql.Engine{Kind: mysql.TiDB, Major: 9}, false},
	}
	for _, c := range cases {
		got, err := mysql.ParseVersion(c.version)
		c.want.Version = c.version
		if err != nil || got != c.want || got.SkipLocked() != c.skipLocked {
			t.Errorf("ParseVersion(%q) = %+v (SkipLocked %v), %v; want %+v (SkipLocked %v)",
				c.version, got, got.SkipLocked(), err, c.want, c.skipLocked)
		}
		if d := mysql.DialectFor(got); d.SkipLocked != c.skipLocked {
			t.Errorf("DialectFor(%q).SkipLocked = %v, want %v", c.version, d.SkipLocked, c.skipLocked)
		}
	}
	for _, bad := range []string{"", "TiDB", "-TiDB-vx.y", "unknown"} {
		if got, err := mysql.ParseVersion(bad); err == nil {
			t.Errorf("ParseVersion(%q) = %+v, want an error", bad, got)
		}
	}
}

func TestDetectReadsTheServersVersion(t *testing.T) {
	db, err := sql.Open("mysql", testenv.SharedMariaDB(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	e, err := mysql.Detect(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("server: %s (VERSION() %q), SKIP LOCKED honoured: %v", e, e.Version, e.SkipLocked())
}

// TestConformanceAsOnTiDB runs the suites on the server the tests use as
// TiDB would differ from MariaDB, to show that nothing rests on what TiDB
// does not give: no SKIP LOCKED (mysql.WithoutSkipLocked); CHECK
// constraints not enforced (dropped after the migrations); a transaction's
// snapshot taken at BEGIN rather than at its first plain read
// (snapshotAtBegin), so that a read after a blocked UPDATE sees the old
// row unless it locks; and lock waits that no innodb_lock_wait_timeout
// cuts short (an hour here), so that only the call's own deadline does.
// On TiDB itself (DLGATE_TEST_MYSQL_DSN) it runs the same way.
func TestConformanceAsOnTiDB(t *testing.T) {
	server := testenv.SharedMariaDB(t)
	open := func(t *testing.T, clock ledger.Clock) *sqlcore.DB {
		db := openAsOnTiDB(t, server.NewDatabase(t))
		db.Now, db.DBClock = clock, clock
		return db
	}
	t.Run("Ledger", func(t *testing.T) {
		ledgertest.Exercise(t, func(t *testing.T, clock ledger.Clock) ledger.Ledger { return open(t, clock) })
	})
	t.Run("ClaimsWithWebhooks", func(t *testing.T) {
		ledgertest.ExerciseClaims(t, func(t *testing.T, clock ledger.Clock) ledger.Ledger {
			db := open(t, clock)
			db.Webhooks = true
			return db
		})
	})
	t.Run("Outbox", func(t *testing.T) {
		ledgertest.ExerciseOutbox(t, func(t *testing.T, clock ledger.Clock, events bool) ledger.Ledger {
			db := open(t, clock)
			db.Webhooks = events
			return db
		})
	})
	t.Run("Audit", func(t *testing.T) {
		ledgertest.ExerciseAudit(t, func(t *testing.T, clock ledger.Clock, o ledgertest.Options) ledger.Ledger {
			db := open(t, clock)
			db.Webhooks, db.BeforeCommit = o.Webhooks, o.BeforeCommit
			return db
		})
	})
	shared := processesWith(server, func(tb testing.TB, dsn string) *sqlcore.DB {
		db := openAsOnTiDB(tb, dsn)
		db.Webhooks = true
		return db
	})
	t.Run("Delivery", func(t *testing.T) {
		ledgertest.ExerciseDelivery(t, func(t *testing.T, clock ledger.Clock, events bool) ledger.Ledger {
			db := open(t, clock)
			db.Webhooks = events
			return db
		}, shared)
	})
	t.Run("AcrossProcesses", func(t *testing.T) { ledgertest.ExerciseAcrossProcesses(t, shared) })
	t.Run("ClaimsAcrossProcesses", func(t *testing.T) { ledgertest.ExerciseClaimsAcrossProcesses(t, shared) })
	t.Run("ObjectsAcrossProcesses", func(t *testing.T) { ledgertest.ExerciseObjectsAcrossProcesses(t, shared) })
	t.Run("ClockSkew", func(t *testing.T) { ledgertest.ExerciseClockSkew(t, shared) })
	t.Run("ConsoleAcrossProcesses", func(t *testing.T) { ledgertest.ExerciseConsoleAcrossProcesses(t, shared) })
}

// openAsOnTiDB opens a migrated ledger on dsn the way TestConformanceAsOnTiDB
// describes.
func openAsOnTiDB(tb testing.TB, dsn string) *sqlcore.DB {
	tb.Helper()
	ctx := context.Background()
	c, err := mysql.Config(withParam(dsn, "innodb_lock_wait_timeout", "3600"))
	if err != nil {
		tb.Fatal(err)
	}
	conn, err := gomysql.NewConnector(c)
	if err != nil {
		tb.Fatal(err)
	}
	pool := sql.OpenDB(snapshotAtBegin{conn})
	pool.SetMaxOpenConns(64)
	pool.SetMaxIdleConns(64)
	tb.Cleanup(func() { pool.Close() })
	e, err := mysql.Detect(ctx, pool)
	if err != nil {
		tb.Fatal(err)
	}
	d := mysql.DialectFor(e)
	mysql.WithoutSkipLocked()(&d)
	if err := mysql.Migrate(ctx, pool); err != nil {
		tb.Fatal(err)
	}
	dropChecks(tb, pool)
	return sqlcore.New(pool, d)
}

// dropChecks drops the schema's CHECK constraints, which TiDB parses and,
// by default, does not enforce (tidb_enable_check_constraint is OFF). MySQL
// and MariaDB list them in TABLE_CONSTRAINTS, a TiDB that keeps them in
// TIDB_CHECK_CONSTRAINTS; a catalog the server lacks is passed over.
func dropChecks(tb testing.TB, db *sql.DB) {
	tb.Helper()
	drops := map[string]bool{}
	for _, q := range []string{
		`SELECT TABLE_NAME, CONSTRAINT_NAME FROM information_schema.TABLE_CONSTRAINTS
WHERE CONSTRAINT_SCHEMA = DATABASE() AND CONSTRAINT_TYPE = 'CHECK'`,
		`SELECT TABLE_NAME, CONSTRAINT_NAME FROM information_schema.TIDB_CHECK_CONSTRAINTS
WHERE CONSTRAINT_SCHEMA = DATABASE()`,
	} {
		rows, err := db.Query(q)
		if err != nil {
			continue
		}
		for rows.Next() {
			var table, name string
			if err := rows.Scan(&table, &name); err != nil {
				tb.Fatal(err)
			}
			drops["ALTER TABLE `"+table+"` DROP CONSTRAINT `"+name+"`"] = true
		}
		rows.Close()
	}
	for q := range drops {
		if _, err := db.Exec(q); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
}

func withParam(dsn, key, value string) string {
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	return dsn + sep + key + "=" + value
}

// snapshotAtBegin makes each REPEATABLE READ transaction take its snapshot
// at BEGIN, as TiDB's does (its start_ts), where InnoDB takes it at the
// transaction's first plain read: a plain read right after BEGIN fixes
// InnoDB's read view there. A statement that follows an UPDATE which
// waited for another transaction's lock then reads the rows as they were
// before that transaction committed, as on TiDB.
type snapshotAtBegin struct{ driver.Connector }

func (c snapshotAtBegin) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return snapshotConn{conn}, nil
}

// snapshotConn passes everything on to the driver's connection, which
// implements every one of these interfaces.
type snapshotConn struct{ driver.Conn }

func (c snapshotConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.(driver.ConnBeginTx).BeginTx(ctx, opts)
	if err != nil || opts.Isolation != driver.IsolationLevel(sql.LevelDefault) || opts.ReadOnly {
		return tx, err
	}
	// Before the migrations there is no links table to read; the error
	// leaves the transaction as it was.
	if rows, err := c.QueryContext(ctx, `SELECT 1 FROM links LIMIT 1`, nil); err == nil {
		rows.Close()
	}
	return tx, nil
}

func (c snapshotConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	return c.Conn.(driver.ExecerContext).ExecContext(ctx, q, args)
}

func (c snapshotConn) QueryContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Rows, error) {
	return c.Conn.(driver.QueryerContext).QueryContext(ctx, q, args)
}

func (c snapshotConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	return c.Conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
}

func (c snapshotConn) Ping(ctx context.Context) error { return c.Conn.(driver.Pinger).Ping(ctx) }

func (c snapshotConn) ResetSession(ctx context.Context) error {
	return c.Conn.(driver.SessionResetter).ResetSession(ctx)
}

func (c snapshotConn) IsValid() bool { return c.Conn.(driver.Validator).IsValid() }

func (c snapshotConn) CheckNamedValue(v *driver.NamedValue) error {
	return c.Conn.(driver.NamedValueChecker).CheckNamedValue(v)
}

// TestLockWaitsEndWithTheCallsDeadline holds the rows of a link, its
// session and the session's slots in another transaction and shows that
// every call that waits for them ends with ErrUnavailable at the ledger's
// Timeout, whether innodb_lock_wait_timeout is shorter (its 1205 retried
// within the deadline) or far longer (TiDB ignores it for autocommitted
// statements altogether), and that the pool serves again once the rows
// are free.
func TestLockWaitsEndWithTheCallsDeadline(t *testing.T) {
	server := testenv.SharedMariaDB(t)
	for _, wait := range []string{"1", "3600"} {
		t.Run("innodb_lock_wait_timeout="+wait, func(t *testing.T) {
			t.Parallel()
			dsn := server.NewDatabase(t)
			ctx := context.Background()
			db, err := mysql.Open(ctx, withParam(dsn, "innodb_lock_wait_timeout", wait))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			if err := mysql.Migrate(ctx, db.SQL()); err != nil {
				t.Fatal(err)
			}
			const timeout = 2 * time.Second
			db.Timeout = timeout
			link := &ledger.Link{
				ID: uuid.Must(uuid.NewV7()).String(), TokenHash: make([]byte, 32),
				Object:    ledger.Object{Key: "k", VersionID: "v", Size: 1},
				Allowance: 5, Remaining: 5, ExpiresAt: time.Now().Add(time.Hour), Delivery: ledger.DeliverySession,
			}
			if _, _, err := db.LinkCreate(ctx, link); err != nil {
				t.Fatal(err)
			}
			x, _, err := db.SessionMint(ctx, ledger.MintRequest{
				Claim:     ledger.ClaimRequest{LinkID: link.ID, Kind: ledger.KindSession},
				SessionID: uuid.Must(uuid.NewV7()).String(), TokenHash: []byte(strings.Repeat("s", 32)),
				ByteBudget: 1000, MaxConcurrency: 1, ExpiresAt: time.Now().Add(time.Hour),
			})
			if err != nil {
				t.Fatal(err)
			}

			holder, err := sql.Open("mysql", dsn)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { holder.Close() })
			tx, err := holder.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, q := range []string{
				`UPDATE links SET filename = 'held' WHERE id = ?`,
				`UPDATE sessions SET filename = 'held' WHERE id = ?`,
				`UPDATE session_slots SET holder = NULL WHERE session_id = ?`,
			} {
				id := link.ID
				if !strings.Contains(q, "links") {
					id = x.ID
				}
				if _, err := tx.ExecContext(ctx, q, id); err != nil {
					t.Fatal(err)
				}
			}
			calls := []struct {
				name string
				call func(context.Context) error
			}{
				{"LinkClaim", func(ctx context.Context) error {
					_, err := db.LinkClaim(ctx, link.TokenHash, ledger.ClaimRequest{Kind: ledger.KindStream}, false)
					return err
				}},
				{"SessionMint", func(ctx context.Context) error {
					_, _, err := db.SessionMint(ctx, ledger.MintRequest{
						Claim:     ledger.ClaimRequest{LinkID: link.ID, Kind: ledger.KindSession},
						SessionID: uuid.Must(uuid.NewV7()).String(), TokenHash: []byte(strings.Repeat("t", 32)),
						ByteBudget: 1000, MaxConcurrency: 1, ExpiresAt: time.Now().Add(time.Hour),
					})
					return err
				}},
				{"AllowanceAdd", func(ctx context.Context) error { return db.AllowanceAdd(ctx, link.ID, 1, "held") }},
				{"LinkRevoke", func(ctx context.Context) error { return db.LinkRevoke(ctx, link.ID) }},
				{"BudgetDraw", func(ctx context.Context) error { _, err := db.BudgetDraw(ctx, x.ID, 10); return err }},
				{"SlotAcquire", func(ctx context.Context) error { return db.SlotAcquire(ctx, x.ID, "h", time.Minute) }},
			}
			// With the short server timeout a call may give up at its
			// 1205 before the deadline; never after it.
			earliest := time.Duration(0)
			if wait != "1" {
				earliest = timeout - 100*time.Millisecond
			}
			var wg sync.WaitGroup
			for _, c := range calls {
				wg.Add(1)
				go func() {
					defer wg.Done()
					start := time.Now()
					err := c.call(ctx)
					took := time.Since(start)
					if !errors.Is(err, ledger.ErrUnavailable) || took < earliest || took > timeout+time.Second {
						t.Errorf("%s on held rows = %v after %v; want ErrUnavailable by the %v deadline", c.name, err, took.Round(time.Millisecond), timeout)
					} else {
						t.Logf("%s on held rows: ErrUnavailable after %v", c.name, took.Round(time.Millisecond))
					}
				}()
			}
			wg.Wait()
			if err := tx.Rollback(); err != nil {
				t.Fatal(err)
			}
			if err := db.AllowanceAdd(ctx, link.ID, 1, "free"); err != nil {
				t.Fatalf("AllowanceAdd once the rows are free = %v", err)
			}
		})
	}
}
