// Package access is who may use the gateway's admin side, in the SQL
// ledger: operators' API keys (SPEC §6) and the console's sessions (SPEC
// §11), both kept by Keys, which ledger/sqlcore's DB embeds.
package access

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/audit"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// Operators' API keys (SPEC §6, migration 00011). The ledger holds a key's
// SHA-256, never its text; the text exists only in the answer that made it.

// Keys keeps API keys and console sessions (ledger.Keys,
// ledger.ConsoleSessions). Their changes write their audit entries in
// their own transactions (audit.Write).
type Keys struct{ *engine.DB }

var _ ledger.Keys = (*Keys)(nil)

// touchEvery is how old last_used_at must be before KeyTouch writes it.
const touchEvery = time.Minute

const keyColumns = `id, name, scopes, created_at, expires_at, revoked_at, last_used_at`

func scanKey(r engine.RowScanner) (*ledger.Key, error) {
	var (
		k                              ledger.Key
		scopes                         string
		created, expires, revoked, use engine.TimeCol
	)
	if err := r.Scan(&k.ID, &k.Name, &scopes, &created, &expires, &revoked, &use); err != nil {
		if engine.IsNoRows(err) {
			return nil, ledger.ErrNotFound
		}
		return nil, err
	}
	k.Scopes, k.CreatedAt = storedScopes(scopes), created.T
	k.ExpiresAt, k.RevokedAt, k.LastUsedAt = expires.Ptr(), revoked.Ptr(), use.Ptr()
	return &k, nil
}

// KeyCreate stores a new key and, with an actor, its key.created audit
// entry, in one transaction. An actor other than the bootstrap token must
// hold keys:write and every scope it gives, and be neither revoked nor
// expired, judged from its row read under lock (a current read, as a
// revocation that committed first is seen on every engine) by the
// database's clock. Errors: ErrInvalid, ErrConflict, ErrRefused,
// ErrForbidden, ErrUnavailable.
func (s *Keys) KeyCreate(ctx context.Context, p ledger.KeyCreateParams) (*ledger.Key, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if !p.ExpiresAt.IsZero() && !engine.Storable(p.ExpiresAt) {
		return nil, fmt.Errorf("%w: expiry outside %v..%v", ledger.ErrInvalid, engine.StorableMin, engine.StorableMax)
	}
	a, err := audit.ActorOf(ctx)
	if err != nil {
		return nil, err
	}
	k := &ledger.Key{ID: engine.NewID(), Name: p.Name, Scopes: p.Scopes, CreatedAt: s.Stamp()}
	var expires any
	if !p.ExpiresAt.IsZero() {
		at := ledger.Micro(p.ExpiresAt)
		k.ExpiresAt, expires = &at, s.TimeArg(at)
	}
	err = s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if a != nil && a.KeyID != ledger.BootstrapKeyID {
			if err := s.mayGive(ctx, tx, a.KeyID, p.Scopes); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO api_keys (id, name, secret_hash, scopes, created_at, expires_at)
VALUES (?, ?, ?, ?, ?, ?)`, k.ID, k.Name, p.SecretHash, k.Scopes.String(), s.TimeArg(k.CreatedAt), expires)
		if err != nil {
			if s.D.IsDuplicate(err) {
				return fmt.Errorf("%w: a key with that secret exists", ledger.ErrConflict)
			}
			return err
		}
		return audit.Write(ctx, tx, a, s.TimeArg(k.CreatedAt), ledger.ActionKeyCreated, ledger.AuditTarget{Type: ledger.TargetKey, ID: k.ID},
			audit.Key{Name: k.Name, Scopes: k.Scopes.Strings(), ExpiresAt: k.ExpiresAt})
	})
	if err != nil {
		return nil, err
	}
	return k, nil
}

// mayGive refuses, inside tx, a key creation by the key id that is not
// live at the database's now (ErrRefused) or does not hold keys:write and
// every scope of give (a *ledger.ScopeError naming the first it lacks).
// The row is read under lock, so a revocation committing at the same
// moment either came first and is seen, or waits for this transaction.
func (s *Keys) mayGive(ctx context.Context, tx *sql.Tx, id string, give apikey.Scopes) error {
	var (
		text             string
		expires, revoked engine.TimeCol
		now              engine.TimeCol
	)
	err := tx.QueryRowContext(ctx, s.Q(`SELECT scopes, expires_at, revoked_at, {now} FROM api_keys WHERE id = ?`)+s.D.LockRows,
		s.DBNow(), id).Scan(&text, &expires, &revoked, &now)
	if engine.IsNoRows(err) {
		return ledger.Refused(ledger.ReasonUnknown)
	}
	if err != nil {
		return err
	}
	held := storedScopes(text)
	k := ledger.Key{ExpiresAt: expires.Ptr(), RevokedAt: revoked.Ptr()}
	if r := k.Refusal(now.T); r != "" {
		return ledger.Refused(r)
	}
	if missing := held.Missing(give | apikey.Of(apikey.KeysWrite)); len(missing) > 0 {
		return &ledger.ScopeError{Missing: missing[0]}
	}
	return nil
}

// storedScopes reads a key's scopes column. A name this gateway does not
// know, which only a newer one could have written during a rolling
// upgrade, is left out: it grants nothing here, as no route here needs
// it, and the key's other scopes still work.
func storedScopes(text string) apikey.Scopes {
	var names []apikey.Scope
	for _, n := range strings.Fields(text) {
		names = append(names, apikey.Scope(n))
	}
	return apikey.Of(names...)
}

// KeyGet returns the key id. Errors: ErrNotFound, ErrUnavailable.
func (s *Keys) KeyGet(ctx context.Context, id string) (*ledger.Key, error) {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	k, err := scanKey(s.Pool.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE id = ?`, id))
	return k, s.Classify(err)
}

// KeyGetByHash returns the key whose secret hashes to hash, read with the
// database's clock, and ErrRefused beside a revoked or expired one. The
// unique index on secret_hash finds it: a SHA-256 of a secret nobody
// knows, so how long the lookup takes tells nothing of a key. Errors:
// ErrNotFound, ErrRefused, ErrUnavailable.
func (s *Keys) KeyGetByHash(ctx context.Context, hash []byte) (*ledger.Key, error) {
	if len(hash) != 32 {
		return nil, ledger.ErrNotFound
	}
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	var now engine.TimeCol
	k, err := scanKey(engine.WithNow(s.Pool.QueryRowContext(ctx, s.Q(`SELECT `+keyColumns+`, {now} FROM api_keys WHERE secret_hash = ?`),
		s.DBNow(), hash), &now))
	if err != nil {
		return nil, s.Classify(err)
	}
	k.ReadAt = now.T
	if r := k.Refusal(now.T); r != "" {
		return k, ledger.Refused(r)
	}
	return k, nil
}

// KeyList lists keys newest first, a page at a time. Errors: ErrInvalid,
// ErrUnavailable.
func (s *Keys) KeyList(ctx context.Context, cursor string, limit int) (ledger.KeyPage, error) {
	switch {
	case limit == 0:
		limit = ledger.DefaultListLimit
	case limit < 1 || limit > ledger.MaxListLimit:
		return ledger.KeyPage{}, fmt.Errorf("%w: limit must be between 1 and %d", ledger.ErrInvalid, ledger.MaxListLimit)
	}
	q := `SELECT ` + keyColumns + ` FROM api_keys`
	var args []any
	if cursor != "" {
		at, id, err := engine.DecodeCursor(cursor)
		if err != nil {
			return ledger.KeyPage{}, err
		}
		q += ` WHERE created_at < ? OR (created_at = ? AND id < ?)`
		args = append(args, s.TimeArg(at), s.TimeArg(at), id)
	}
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	rows, err := s.Pool.QueryContext(ctx, q+` ORDER BY created_at DESC, id DESC LIMIT ?`, append(args, limit+1)...)
	if err != nil {
		return ledger.KeyPage{}, s.Classify(err)
	}
	defer rows.Close()
	var page ledger.KeyPage
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return ledger.KeyPage{}, s.Classify(err)
		}
		page.Keys = append(page.Keys, *k)
	}
	if err := rows.Err(); err != nil {
		return ledger.KeyPage{}, s.Classify(err)
	}
	page.Keys, page.Next = engine.PageOf(page.Keys, limit, true, func(k *ledger.Key) (time.Time, string) { return k.CreatedAt, k.ID })
	return page, nil
}

// KeyRevoke revokes the key, deletes its console sessions and, with an
// actor, writes the key.revoked audit entry, in one transaction; only the
// first revocation changes anything. Errors: ErrNotFound, ErrUnavailable.
func (s *Keys) KeyRevoke(ctx context.Context, id string) error {
	a, err := audit.ActorOf(ctx)
	if err != nil {
		return err
	}
	now := s.Stamp()
	return s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, s.TimeArg(now), id)
		if err != nil {
			return err
		}
		if n, err := engine.Affected(res); err != nil {
			return err
		} else if n == 0 {
			// A locking read, as whyNotUpdated's: a snapshot taken at
			// BEGIN (TiDB) might not hold a key made and revoked since.
			var one int
			if err := tx.QueryRowContext(ctx, `SELECT 1 FROM api_keys WHERE id = ?`+s.D.LockRows, id).Scan(&one); engine.IsNoRows(err) {
				return ledger.ErrNotFound
			} else if err != nil {
				return err
			}
			return nil // revoked before
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM console_sessions WHERE key_id = ?`, id); err != nil {
			return err
		}
		if a == nil {
			return nil
		}
		k, err := scanKey(tx.QueryRowContext(ctx, `SELECT `+keyColumns+` FROM api_keys WHERE id = ?`, id))
		if err != nil {
			return err
		}
		return audit.Write(ctx, tx, a, s.TimeArg(now), ledger.ActionKeyRevoked, ledger.AuditTarget{Type: ledger.TargetKey, ID: id},
			audit.Key{Name: k.Name, Scopes: k.Scopes.Strings(), ExpiresAt: k.ExpiresAt})
	})
}

// KeyTouch moves the key's last_used_at to the database's now when it is
// touchEvery or more behind, in one conditional UPDATE whose WHERE decides
// (two processes touching at once: the second finds the first's time and
// matches nothing), and reports whether it wrote. Errors: ErrUnavailable.
func (s *Keys) KeyTouch(ctx context.Context, id string) (bool, error) {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	res, err := s.Exec(ctx, s.Q(`UPDATE api_keys SET last_used_at = {now}
WHERE id = ? AND (last_used_at IS NULL OR last_used_at <= {now+})`), s.DBNow(), id, s.DBNow(), -touchEvery.Microseconds())
	if err != nil {
		return false, err
	}
	n, err := engine.Affected(res)
	return n > 0, s.Classify(err)
}

// keyRefusal explains why the key id cannot be used at the database's
// now: ErrNotFound when there is no such key, else its refusal ("" when
// it can be used).
func (s *Keys) keyRefusal(ctx context.Context, id string) (ledger.Reason, error) {
	var expires, revoked, now engine.TimeCol
	err := s.Pool.QueryRowContext(ctx, s.Q(`SELECT expires_at, revoked_at, {now} FROM api_keys WHERE id = ?`), s.DBNow(), id).
		Scan(&expires, &revoked, &now)
	if engine.IsNoRows(err) {
		return "", ledger.ErrNotFound
	}
	if err != nil {
		return "", s.Classify(err)
	}
	k := ledger.Key{ExpiresAt: expires.Ptr(), RevokedAt: revoked.Ptr()}
	return k.Refusal(now.T), nil
}
