// Package mysql is the ledger on MySQL 8.4, MariaDB 10.11 (InnoDB) or
// TiDB 8.5: one SQL text for all three, with what differs between them
// (SKIP LOCKED) a capability of the dialect detected at Open from
// VERSION().
package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"syscall"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/dlgate/dlgate/ledger/sqlcore"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// MySQL and MariaDB error numbers the ledger reacts to.
const (
	erDupEntry        = 1062
	erLockWaitTimeout = 1205
	erLockDeadlock    = 1213
	erConCount        = 1040
	erServerShutdown  = 1053
	// The server ended the connection or the statement under it: a
	// restart, a KILL, max_execution_time (MariaDB 1927, 1317; MySQL's
	// 3024 is a timeout, which IsRetryable does not cover either).
	erConnectionKilled = 1927
	erQueryInterrupted = 1317
	erQueryTimeout     = 3024
)

// TiDB's answers that a transaction may be run again (docs.pingcap.com,
// "Error Codes and Troubleshooting", v8.4): 8002, a SELECT FOR UPDATE that
// met a write conflict and was rolled back; 8005, a write conflict
// ("txnStartTS is stale"); 8022, a commit that failed and was rolled back;
// 9007, a write conflict in TiKV — all of optimistic transactions. Its
// pessimistic lock waits answer MySQL's 1205 (since v3.0.6,
// pingcap/tidb#13103), but some paths answer the generic 1105 with the
// message instead: tidbLockWait.
const (
	tidbForUpdateConflict = 8002
	tidbWriteConflict     = 8005
	tidbCommitRolledBack  = 8022
	tidbKVWriteConflict   = 9007
	erUnknown             = 1105
)

// tidbLockWait are the messages of TiDB's 1105 that are a lock wait that
// ended (seen on v8.5.3: AllowanceAdd and LinkRevoke on rows another
// transaction held came back "lock wait timeout" after
// innodb_lock_wait_timeout), or pessimistic retries used up.
var tidbLockWait = []string{"lock wait timeout", "pessimistic lock retry limit reached"}

// isRetryable reports a transaction the server rolled back (its
// statement, for a lock-wait timeout) that may be run again: MySQL's and
// MariaDB's deadlock and lock-wait timeout, and TiDB's answers of the
// same kind.
func isRetryable(err error) bool {
	var me *gomysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case erLockDeadlock, erLockWaitTimeout, tidbForUpdateConflict, tidbWriteConflict, tidbCommitRolledBack, tidbKVWriteConflict:
		return true
	case erUnknown:
		msg := strings.ToLower(me.Message)
		for _, m := range tidbLockWait {
			if strings.Contains(msg, m) {
				return true
			}
		}
	}
	return false
}

// Dialect returns the dialect of the shared SQL core for MySQL 8.4 (and
// MariaDB 10.11, which honours the same); Open uses the one of the engine
// it finds (DialectFor).
func Dialect() engine.Dialect { return DialectFor(Engine{Kind: MySQL, Major: 8, Minor: 4}) }

// DialectFor returns the dialect of the shared SQL core for engine e: the
// same statements everywhere, e's capabilities set.
func DialectFor(e Engine) engine.Dialect {
	return engine.Dialect{
		Name:          "mysql",
		Time:          func(t time.Time) any { return t },
		IsDuplicate:   func(err error) bool { return errNumber(err) == erDupEntry },
		IsRetryable:   isRetryable,
		IsUnavailable: isUnavailable,
		Batch:         batch,
		JoinedUpdate:  true,
		// UTC_TIMESTAMP, not NOW: the columns hold UTC whatever time_zone
		// an operator's DSN sets. Like NOW it is one value for the whole
		// statement.
		NowSQL: "COALESCE(CAST(? AS DATETIME(6)), UTC_TIMESTAMP(6))",
		Plus:   func(expr string) string { return "DATE_ADD(" + expr + ", INTERVAL ? MICROSECOND)" },
		// LAST_INSERT_ID(expr) hands the granted amount back in the OK
		// packet of the same UPDATE: one round trip, no SELECT … FOR
		// UPDATE. Portable to MySQL 8.4 and MariaDB 10.11.
		DrawBytes: func(ctx context.Context, db *sql.DB, want int64, sessionID string, now any) (int64, error) {
			res, err := db.ExecContext(ctx, `UPDATE sessions
SET bytes_drawn = bytes_drawn + LAST_INSERT_ID(LEAST(?, byte_budget - bytes_drawn))
WHERE id = ? AND bytes_drawn < byte_budget AND revoked_at IS NULL AND ended_at IS NULL
  AND expires_at > COALESCE(CAST(? AS DATETIME(6)), UTC_TIMESTAMP(6))`,
				want, sessionID, now)
			if err != nil {
				return 0, err
			}
			if n, err := res.RowsAffected(); err != nil || n == 0 {
				return 0, err
			}
			return res.LastInsertId()
		},
		// UPDATE … ORDER BY … LIMIT 1 locks rows as it scans them; a
		// concurrent acquirer blocked on a row re-reads it after the lock
		// is released and moves on when it is no longer free.
		AcquireSQL: `UPDATE session_slots SET holder = ?, lease_until = {now+}
WHERE session_id = ? AND lease_until <= {now} ORDER BY slot LIMIT 1`,
		ExpiredSessionsSQL: `SELECT id FROM sessions
WHERE ended_at IS NULL AND (expires_at <= {now} OR revoked_at IS NOT NULL)
ORDER BY expires_at LIMIT ?`,
		ClearLapsedSQL: `UPDATE session_slots SET holder = NULL
WHERE holder IS NOT NULL AND lease_until <= {now} LIMIT ?`,
		// LAST_INSERT_ID(expr) again: the UPDATE that takes the link's row
		// lock reports the number it reserved in its own OK packet.
		LinkSeq: func(ctx context.Context, tx *sql.Tx, linkID string, n int) (int64, error) {
			res, err := tx.ExecContext(ctx, `UPDATE links SET event_seq = LAST_INSERT_ID(event_seq + ?) WHERE id = ?`, n, linkID)
			if err != nil {
				return 0, err
			}
			if k, err := res.RowsAffected(); err != nil || k != 1 {
				return 0, errors.Join(err, errors.New("no such link"))
			}
			return res.LastInsertId()
		},
		LockRows:   " FOR UPDATE",
		SkipLocked: e.SkipLocked(),
		SweepTx:    &sql.TxOptions{Isolation: sql.LevelReadCommitted},
	}
}

// Option changes the dialect Open derives from the server it finds.
type Option func(*engine.Dialect)

// WithoutSkipLocked sends no SKIP LOCKED even to an engine that honours
// it, as on TiDB. The conformance suite runs so on MariaDB to show that
// every hand-out is exact without it.
func WithoutSkipLocked() Option { return func(d *engine.Dialect) { d.SkipLocked = false } }

func errNumber(err error) uint16 {
	var me *gomysql.MySQLError
	if errors.As(err, &me) {
		return me.Number
	}
	return 0
}

func isUnavailable(err error) bool {
	var ne net.Error
	switch n := errNumber(err); {
	case n == erConCount, n == erServerShutdown, n == erConnectionKilled, n == erQueryInterrupted, n == erQueryTimeout:
		return true
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, gomysql.ErrInvalidConn), errors.As(err, &ne):
		return true
	case errors.Is(err, sql.ErrConnDone), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		// A connection the server closed under a statement (a restart
		// while a request ran): the database is unavailable, not the
		// request wrong.
		return true
	}
	return false
}

// Config turns an operator's go-sql-driver DSN into the one the ledger
// needs, keeping every parameter the operator set (SPEC §7).
func Config(dsn string) (*gomysql.Config, error) {
	c, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("mysql: GATEWAY_DB_DSN: %w", err)
	}
	// Timestamps are DATETIME(6) in UTC on both sides of the wire.
	c.ParseTime = true
	c.Loc = time.UTC
	if c.Params == nil {
		c.Params = map[string]string{}
	}
	if _, ok := c.Params["time_zone"]; !ok {
		c.Params["time_zone"] = "'+00:00'"
	}
	// One round trip per statement instead of prepare/execute/close; and
	// a claim's transaction sent as one query (claim.go). Every statement
	// is a fixed text with bound parameters, escaped by the driver.
	c.InterpolateParams = true
	c.MultiStatements = true
	// RowsAffected counts matched rows: a renewal that lands in the same
	// microsecond still reports its row.
	c.ClientFoundRows = true
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Second
	}
	if c.ReadTimeout == 0 {
		c.ReadTimeout = 30 * time.Second
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = 30 * time.Second
	}
	if _, ok := c.Params["sql_mode"]; !ok {
		c.Params["sql_mode"] = "'STRICT_ALL_TABLES,NO_ZERO_DATE,NO_ZERO_IN_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION'"
	}
	return c, nil
}

// Open connects to the database named by dsn and detects the engine
// behind it (Detect), whose dialect the ledger speaks. Errors: a bad DSN,
// an unreachable server (after the pool's first ping), or a server whose
// VERSION() it does not recognise.
func Open(ctx context.Context, dsn string, opts ...Option) (*sqlcore.DB, error) {
	c, err := Config(dsn)
	if err != nil {
		return nil, err
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	db, err := pool(pctx, c)
	if err != nil {
		return nil, err
	}
	e, err := Detect(pctx, db)
	if err != nil {
		db.Close()
		return nil, err
	}
	if engineParams(e, c) {
		db.Close()
		if db, err = pool(pctx, c); err != nil {
			return nil, err
		}
	}
	d := DialectFor(e)
	for _, o := range opts {
		o(&d)
	}
	return sqlcore.New(db, d), nil
}

// pool opens the connection pool of c and pings it.
func pool(ctx context.Context, c *gomysql.Config) (*sql.DB, error) {
	conn, err := gomysql.NewConnector(c)
	if err != nil {
		return nil, fmt.Errorf("mysql: %w", err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(64)
	db.SetMaxIdleConns(64)
	db.SetConnMaxLifetime(5 * time.Minute)
	db.SetConnMaxIdleTime(time.Minute)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("mysql: cannot reach %s: %w", c.Addr, err)
	}
	return db, nil
}

// engineParams adds to c the session settings engine e needs and the
// operator did not set, and reports whether it added any. On TiDB that is
// pessimistic transactions (tidb_txn_mode): the default of clusters
// created since v3.0.8, but not of older ones upgraded, and the ledger's
// transactions wait for each other's row locks (an idempotency key's
// duplicate waits for the first mint's outcome) where optimistic ones
// would fail at COMMIT.
func engineParams(e Engine, c *gomysql.Config) bool {
	if e.Kind != TiDB {
		return false
	}
	if _, ok := c.Params["tidb_txn_mode"]; ok {
		return false
	}
	c.Params["tidb_txn_mode"] = "'pessimistic'"
	return true
}
