package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/dlgate/dlgate/migrations"
)

// migrateWait bounds how long Migrate waits for the migrations of other
// processes when its caller set no deadline.
const migrateWait = 2 * time.Minute

// Migrate applies pending migrations while holding the migration lock, so
// that gateways starting together migrate one after another: a row of
// dlgate_migration_lock, locked FOR UPDATE in a transaction on one
// connection until the migrations are done. A row lock is what every
// engine honours the same way; GET_LOCK is emulated on TiDB and fails
// under contention ("pessimistic lock retry limit reached"). Whatever
// fails while taking the lock and may pass on a second try (a lock-wait
// timeout, a deadlock, TiDB's schema-changed or write-conflict errors, a
// dropped connection) is tried again, with a jittered pause, until ctx
// ends (migrateWait when ctx has no deadline). Nothing correct rests on
// the lock itself: two migrations of one schema at once fail on their
// DDL rather than apply a change twice; the lock keeps them from failing.
func Migrate(ctx context.Context, db *sql.DB) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, migrateWait)
		defer cancel()
	}
	unlock, err := lockMigrations(ctx, db)
	if err != nil {
		return err
	}
	defer unlock()
	return migrations.Up(ctx, db, migrations.MySQL)
}

// The lock's table is not a migration: it has to exist before they run.
const (
	lockTableSQL = `CREATE TABLE IF NOT EXISTS dlgate_migration_lock (
  name VARCHAR(64) NOT NULL,
  PRIMARY KEY (name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin`
	lockRowSQL = `INSERT IGNORE INTO dlgate_migration_lock (name) VALUES ('migrate')`
	lockSQL    = `SELECT name FROM dlgate_migration_lock WHERE name = 'migrate' FOR UPDATE`
)

func lockMigrations(ctx context.Context, db *sql.DB) (unlock func(), err error) {
	for attempt := 1; ; attempt++ {
		unlock, err := tryLockMigrations(ctx, db)
		switch {
		case err == nil:
			return unlock, nil
		case ctx.Err() != nil:
			return nil, fmt.Errorf("mysql: migration lock: waited until %v: %w", ctx.Err(), err)
		case !transient(err):
			return nil, fmt.Errorf("mysql: migration lock: %w", err)
		}
		pause := time.Duration(min(attempt, 20)) * 25 * time.Millisecond * time.Duration(1+rand.IntN(4))
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("mysql: migration lock: waited until %v: %w", ctx.Err(), err)
		case <-time.After(pause):
		}
	}
}

func tryLockMigrations(ctx context.Context, db *sql.DB) (func(), error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	for _, q := range []string{lockTableSQL, lockRowSQL} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			conn.Close()
			return nil, err
		}
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	var name string
	if err := tx.QueryRowContext(ctx, lockSQL).Scan(&name); err != nil {
		tx.Rollback() //nolint:errcheck // the connection goes too
		conn.Close()
		return nil, err
	}
	return func() {
		tx.Rollback() //nolint:errcheck // closing the connection rolls back too
		conn.Close()
	}, nil
}

// Errors that taking the migration lock may not meet a second time:
// MySQL's lock-wait timeout and deadlock, and TiDB's generic 1105 (which
// carries "pessimistic lock retry limit reached"), 8002, 8022 and 9007
// (write conflicts and exhausted retries) and 8028 (the schema changed
// under the statement, as another process's CREATE TABLE does).
var transientNumbers = map[uint16]bool{
	erLockWaitTimeout: true, erLockDeadlock: true,
	1105: true, 8002: true, 8022: true, 8028: true, 9007: true,
}

func transient(err error) bool {
	return transientNumbers[errNumber(err)] || isUnavailable(err) && !errors.Is(err, context.DeadlineExceeded)
}
