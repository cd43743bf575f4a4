package access

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// Console sessions (SPEC §11, migration 00011): rows every process reads,
// so a signed-in console works behind a balancer and a sign-out, a DELETE,
// ends it everywhere at once. Every judgement of time is the database's
// clock's.

var _ ledger.ConsoleSessions = (*Keys)(nil)

// consoleSelect reads a session with its key (NULLs for the bootstrap
// token, which has no row), then the database's now. It is followed by
// the WHERE clause.
const consoleSelect = `SELECT c.id, c.key_id, c.created_at, c.expires_at, c.last_seen_at,
  k.name, k.scopes, k.created_at, k.expires_at, k.revoked_at, k.last_used_at, {now}
FROM console_sessions c LEFT JOIN api_keys k ON k.id = c.key_id`

// consoleLive is the condition of a usable session, judged at {now}: not
// past its end, not idle for ledger.ConsoleIdle ({now+} is now minus the
// idle timeout), and its key the bootstrap token's or one not revoked nor
// expired. The ledger cannot tell whether a bootstrap session was opened
// with the token configured now (it keeps nothing derived from the
// token): the console checks that on every request, from the cookie's
// secret (admin.Auth.ConsoleSessionBound). Arguments: now, now, -idle,
// the bootstrap key id, now.
const consoleLive = ` c.expires_at > {now} AND c.last_seen_at > {now+}
  AND (c.key_id = ? OR (k.id IS NOT NULL AND k.revoked_at IS NULL AND (k.expires_at IS NULL OR k.expires_at > {now})))`

func (s *Keys) consoleLiveArgs() []any {
	return []any{s.DBNow(), s.DBNow(), -ledger.ConsoleIdle.Microseconds(), ledger.BootstrapKeyID, s.DBNow()}
}

// scanConsole scans a row of consoleSelect into a session and the
// database's now.
func scanConsole(r engine.RowScanner) (*ledger.ConsoleSession, engine.TimeCol, error) {
	var (
		c                              ledger.ConsoleSession
		created, expires, seen, now    engine.TimeCol
		name, scopes                   engine.NullStr
		kCreated, kExp, kRevoked, kUse engine.TimeCol
	)
	err := r.Scan(&c.ID, &c.Key.ID, &created, &expires, &seen, &name, &scopes, &kCreated, &kExp, &kRevoked, &kUse, &now)
	if engine.IsNoRows(err) {
		return nil, now, ledger.ErrNotFound
	}
	if err != nil {
		return nil, now, err
	}
	c.CreatedAt, c.ExpiresAt, c.LastSeenAt = created.T, expires.T, seen.T
	if c.Key.ID == ledger.BootstrapKeyID {
		c.Key.Name, c.Key.Scopes = ledger.BootstrapKeyID, apikey.All()
	} else {
		c.Key.Name, c.Key.Scopes, c.Key.CreatedAt = string(name), storedScopes(string(scopes)), kCreated.T
		c.Key.ExpiresAt, c.Key.RevokedAt, c.Key.LastUsedAt = kExp.Ptr(), kRevoked.Ptr(), kUse.Ptr()
	}
	c.Key.ReadAt = now.T
	return &c, now, nil
}

// ConsoleSessionCreate opens a session for keyID in one INSERT that
// copies the key's id from its row only while the key is live at the
// database's now, so a key revoked or expired by then opens nothing; the
// bootstrap token's session needs no row. Errors: ErrInvalid, ErrNotFound,
// ErrRefused, ErrConflict, ErrUnavailable.
func (s *Keys) ConsoleSessionCreate(ctx context.Context, keyID string, secretHash []byte) (*ledger.ConsoleSession, error) {
	if len(secretHash) != 32 || keyID == "" || len(keyID) > 36 || !engine.ValidCursorID(keyID) {
		return nil, fmt.Errorf("%w: a console session needs a key id and the SHA-256 of its secret", ledger.ErrInvalid)
	}
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	id := engine.NewID()
	args := []any{id, secretHash, s.TimeArg(s.Stamp()), s.DBNow(), ledger.ConsoleLifetime.Microseconds(), s.DBNow()}
	var q string
	if keyID == ledger.BootstrapKeyID {
		q = `INSERT INTO console_sessions (id, secret_hash, created_at, expires_at, last_seen_at, key_id)
VALUES (?, ?, ?, {now+}, {now}, ?)`
		args = append(args, keyID)
	} else {
		q = `INSERT INTO console_sessions (id, secret_hash, created_at, expires_at, last_seen_at, key_id)
SELECT ?, ?, ?, {now+}, {now}, id FROM api_keys
WHERE id = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > {now})`
		args = append(args, keyID, s.DBNow())
	}
	res, err := s.Exec(ctx, s.Q(q), args...)
	if err != nil {
		if s.D.IsDuplicate(err) {
			return nil, fmt.Errorf("%w: a console session with that secret exists", ledger.ErrConflict)
		}
		return nil, err
	}
	if n, err := engine.Affected(res); err != nil {
		return nil, s.Classify(err)
	} else if n == 0 {
		r, err := s.keyRefusal(ctx, keyID)
		if err != nil {
			return nil, err
		}
		if r == "" {
			r = ledger.ReasonUnknown // live again now: a retry would open it
		}
		return nil, ledger.Refused(r)
	}
	c, _, err := scanConsole(s.Pool.QueryRowContext(ctx, s.Q(consoleSelect+` WHERE c.id = ?`), s.DBNow(), id))
	return c, s.Classify(err)
}

// ConsoleSessionGet returns the live session whose secret hashes to
// secretHash: the SELECT's WHERE judges it at the database's now, the
// same now it returns. When its last-seen time is ledger.ConsoleSeenEvery
// or more behind that now, a conditional UPDATE moves it (concurrent
// requests: the first moves it, the others match nothing), so a session
// costs one write a minute at most. Errors: ErrNotFound, ErrUnavailable.
func (s *Keys) ConsoleSessionGet(ctx context.Context, secretHash []byte) (*ledger.ConsoleSession, error) {
	if len(secretHash) != 32 {
		return nil, ledger.ErrNotFound
	}
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	args := append([]any{s.DBNow(), secretHash}, s.consoleLiveArgs()...)
	c, now, err := scanConsole(s.Pool.QueryRowContext(ctx, s.Q(consoleSelect+`
WHERE c.secret_hash = ? AND`+consoleLive), args...))
	if err != nil {
		return nil, s.Classify(err)
	}
	if now.T.Sub(c.LastSeenAt) < ledger.ConsoleSeenEvery {
		return c, nil
	}
	res, err := s.Exec(ctx, s.Q(`UPDATE console_sessions SET last_seen_at = ?
WHERE id = ? AND last_seen_at <= {now+}`), s.TimeArg(now.T), c.ID, s.DBNow(), -ledger.ConsoleSeenEvery.Microseconds())
	if err != nil {
		return nil, err
	}
	if n, _ := engine.Affected(res); n > 0 {
		c.LastSeenAt = now.T
	}
	return c, nil
}

// ConsoleSessionDelete deletes the session (sign-out). Errors:
// ErrUnavailable.
func (s *Keys) ConsoleSessionDelete(ctx context.Context, secretHash []byte) error {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	_, err := s.Exec(ctx, `DELETE FROM console_sessions WHERE secret_hash = ?`, secretHash)
	return err
}

// PurgeConsoleSessions deletes, inside tx, at most limit console sessions
// dead at the database's now (past their end, or idle), and returns how
// many its DELETE, which repeats the condition, removed: a session
// another sweeper deleted first is not counted twice.
func (s *Keys) PurgeConsoleSessions(ctx context.Context, tx *sql.Tx, limit int) (int, error) {
	const dead = `expires_at <= {now} OR last_seen_at <= {now+}`
	deadArgs := []any{s.DBNow(), s.DBNow(), -ledger.ConsoleIdle.Microseconds()}
	found, err := engine.ReadIDs(ctx, tx, limit,
		engine.Read(s.Q(`SELECT id FROM console_sessions WHERE expires_at <= {now} ORDER BY expires_at LIMIT ?`)+s.D.SkipLockedSQL(), s.DBNow(), limit),
		engine.Read(s.Q(`SELECT id FROM console_sessions WHERE last_seen_at <= {now+} ORDER BY last_seen_at LIMIT ?`)+s.D.SkipLockedSQL(),
			s.DBNow(), -ledger.ConsoleIdle.Microseconds(), limit))
	if err != nil {
		return 0, err
	}
	ids := engine.Anys(found)
	if len(ids) == 0 {
		return 0, nil
	}
	res, err := tx.ExecContext(ctx, s.Q(`DELETE FROM console_sessions WHERE id IN `+engine.Placeholders(len(ids))+` AND (`+dead+`)`),
		append(ids, deadArgs...)...)
	if err != nil {
		return 0, err
	}
	n, err := engine.Affected(res)
	return int(n), err
}
