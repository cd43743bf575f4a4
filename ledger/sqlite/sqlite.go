// Package sqlite is the ledger on an embedded SQLite file (the gateway's
// zero-configuration default), through the cgo-free modernc.org/sqlite.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"syscall"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/dlgate/dlgate/ledger/sqlcore"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
	"github.com/dlgate/dlgate/migrations"
)

// Dialect returns the SQLite dialect of the shared SQL core.
func Dialect() engine.Dialect {
	return engine.Dialect{
		Name: "sqlite",
		// Microseconds since the epoch: exact, ordered comparisons.
		Time: func(t time.Time) any { return t.UnixMicro() },
		IsDuplicate: func(err error) bool {
			c := errCode(err)
			return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
		},
		IsRetryable: func(err error) bool {
			c := errCode(err) & 0xff
			return c == sqlite3.SQLITE_BUSY || c == sqlite3.SQLITE_LOCKED
		},
		IsUnavailable: func(err error) bool {
			c := errCode(err) & 0xff
			return c == sqlite3.SQLITE_CANTOPEN || c == sqlite3.SQLITE_IOERR || c == sqlite3.SQLITE_FULL
		},
		NowSQL: "COALESCE(?, " + clock + ")",
		Plus:   func(expr string) string { return "(" + expr + " + ?)" },
		// SET sees the old row on every right-hand side, so last_draw and
		// bytes_drawn both use the pre-update bytes_drawn; RETURNING hands
		// the grant back in the same statement.
		DrawBytes: func(ctx context.Context, db *sql.DB, want int64, sessionID string, now any) (int64, error) {
			var got int64
			err := db.QueryRowContext(ctx, `UPDATE sessions
SET last_draw = MIN(?1, byte_budget - bytes_drawn), bytes_drawn = bytes_drawn + MIN(?1, byte_budget - bytes_drawn)
WHERE id = ?2 AND bytes_drawn < byte_budget AND revoked_at IS NULL AND ended_at IS NULL
  AND expires_at > COALESCE(?3, `+clock+`)
RETURNING last_draw`, want, sessionID, now).Scan(&got)
			if errors.Is(err, sql.ErrNoRows) {
				return 0, nil
			}
			return got, err
		},
		AcquireSQL: `UPDATE session_slots SET holder = ?, lease_until = {now+}
WHERE rowid = (SELECT rowid FROM session_slots WHERE session_id = ? AND lease_until <= {now} ORDER BY slot LIMIT 1)`,
		ExpiredSessionsSQL: `SELECT id FROM sessions
WHERE ended_at IS NULL AND (expires_at <= {now} OR revoked_at IS NOT NULL)
ORDER BY expires_at LIMIT ?`,
		ClearLapsedSQL: `UPDATE session_slots SET holder = NULL
WHERE rowid IN (SELECT rowid FROM session_slots WHERE holder IS NOT NULL AND lease_until <= {now} LIMIT ?)`,
		LinkSeq: func(ctx context.Context, tx *sql.Tx, linkID string, n int) (int64, error) {
			var last int64
			err := tx.QueryRowContext(ctx, `UPDATE links SET event_seq = event_seq + ? WHERE id = ? RETURNING event_seq`,
				n, linkID).Scan(&last)
			if errors.Is(err, sql.ErrNoRows) {
				return 0, errors.New("no such link")
			}
			return last, err
		},
		// Transactions hold the write lock from BEGIN (IMMEDIATE), so a
		// write never waits for a lock that a locking read would take,
		// and SKIP LOCKED has nothing to skip.
		SkipLocked: false,
	}
}

// clock is SQLite's current time in the columns' unit, microseconds
// since the epoch. SQLite keeps the time to the millisecond, and 'now'
// is one value for the whole of a statement. unixepoch('subsec') needs
// SQLite 3.42; modernc.org/sqlite bundles a newer one.
const clock = `CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER) * 1000`

func errCode(err error) int {
	var e *msqlite.Error
	if errors.As(err, &e) {
		return e.Code()
	}
	return 0
}

// Open opens (creating if needed) the SQLite database file at path, in WAL
// mode with a busy timeout, foreign keys on, and IMMEDIATE transactions so
// that concurrent writers queue on the write lock instead of failing to
// upgrade a read lock. The file, its -wal and its -shm are readable by
// their owner only (0600).
func Open(ctx context.Context, path string) (*sqlcore.DB, error) {
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("sqlite: %w", err)
		}
	}
	if err := ownerOnly(path); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	q.Set("_txlock", "immediate")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	// One file, one writer at a time: a few connections let reads run
	// beside the writer without queueing writers deeper than useful.
	db.SetMaxOpenConns(8)
	db.SetMaxIdleConns(8)
	if err := ping(ctx, db); err != nil {
		db.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	return sqlcore.New(db, Dialect()), nil
}

// ping opens the first connection. Processes that open a new file at the
// same moment race to turn it to WAL, and SQLite answers that race
// SQLITE_BUSY without calling the busy handler: the connection is
// dropped and opened again, for as long as busy_timeout would wait.
func ping(ctx context.Context, db *sql.DB) error {
	deadline := time.Now().Add(10 * time.Second)
	for pause := 5 * time.Millisecond; ; pause = min(2*pause, 200*time.Millisecond) {
		err := db.PingContext(ctx)
		if err == nil || errCode(err)&0xff != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return err
		}
	}
}

// fileMode is the mode of the database files: links and grants name
// accounts and client addresses, and nobody else on the machine needs them.
const fileMode = 0o600

// ownerOnly creates the database file with fileMode before SQLite opens
// it, since SQLite creates files 0644 (less the umask) but gives the -wal
// and -shm files it creates later the mode of the database file. Files
// left wider by an earlier version are narrowed.
func ownerOnly(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, fileMode)
	if err != nil {
		return err
	}
	f.Close()
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&^fileMode != 0 {
			if err := os.Chmod(p, fileMode); err != nil {
				return err
			}
		}
	}
	return nil
}

// Migrate applies pending migrations under an exclusive lock file beside
// the database, so processes sharing the file migrate one at a time.
func Migrate(ctx context.Context, db *sql.DB, path string) error {
	f, err := os.OpenFile(path+".migrate-lock", os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("sqlite: migrate lock: %w", err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("sqlite: migrate lock: %w", err)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file unlocks too
	return migrations.Up(ctx, db, migrations.SQLite)
}
