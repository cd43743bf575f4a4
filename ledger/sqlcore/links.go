package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

const linkColumns = `id, token_hash, bucket, object_key, version_id, size, etag, content_type,
  last_modified, filename, account_id, allowance, remaining, expires_at, revoked_at,
  created_at, delivery, confirm, session_ttl_ms, session_byte_budget,
  session_max_concurrency, idempotency_key, sha256`

type rowScanner interface{ Scan(dest ...any) error }

func scanLink(r rowScanner) (*ledger.Link, error) {
	var (
		l                             ledger.Link
		lastMod, expires, revoked, at timeCol
		account, idem, sum            nullStr
		confirm                       bool
		ttlMS                         int64
	)
	err := r.Scan(&l.ID, &l.TokenHash, &l.Object.Bucket, &l.Object.Key, &l.Object.VersionID,
		&l.Object.Size, &l.Object.ETag, &l.Object.ContentType, &lastMod, &l.Filename, &account,
		&l.Allowance, &l.Remaining, &expires, &revoked, &at, &l.Delivery, &confirm, &ttlMS,
		&l.Session.ByteBudget, &l.Session.MaxConcurrency, &idem, &sum)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ledger.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	l.Object.LastModified = lastMod.T
	l.AccountID, l.IdempotencyKey, l.Object.SHA256 = string(account), string(idem), string(sum)
	l.ExpiresAt, l.RevokedAt, l.CreatedAt = expires.T, revoked.ptr(), at.T
	l.Confirm = confirm
	l.Session.TTL = time.Duration(ttlMS) * time.Millisecond
	return &l, nil
}

// LinkCreate inserts l. A link with the same idempotency key is returned
// instead (created=false) when it names the same object, allowance,
// delivery and account; otherwise ErrConflict. A version the gateway
// stored and is deleting cannot be pinned: ErrObjectDeleted.
func (s *DB) LinkCreate(ctx context.Context, l *ledger.Link) (*ledger.Link, bool, error) {
	if err := l.Validate(); err != nil {
		return nil, false, err
	}
	if !storable(l.ExpiresAt) {
		// SQLite would store it; MySQL's DATETIME would refuse it with a
		// server error. Both refuse it the same way instead.
		return nil, false, fmt.Errorf("%w: expiry outside %v..%v", ledger.ErrInvalid, storableMin, storableMax)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	in := *l
	in.ExpiresAt = ledger.Micro(in.ExpiresAt)
	in.CreatedAt = s.now()
	if !in.Object.LastModified.IsZero() {
		in.Object.LastModified = ledger.Micro(in.Object.LastModified)
	}
	var lastMod any
	if !in.Object.LastModified.IsZero() {
		lastMod = s.t(in.Object.LastModified)
	}
	// One transaction, so that link.created exists exactly when the link does.
	err := s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		recorded, err := s.pinStored(ctx, tx, in.Object, s.t(in.CreatedAt))
		if err != nil {
			return err
		}
		if recorded != "" {
			in.Object.SHA256 = recorded
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO links (`+linkColumns+`)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?)`,
			in.ID, in.TokenHash, in.Object.Bucket, in.Object.Key, in.Object.VersionID, in.Object.Size,
			in.Object.ETag, in.Object.ContentType, lastMod, in.Filename, orNull(in.AccountID),
			in.Allowance, in.Remaining, s.t(in.ExpiresAt), s.t(in.CreatedAt), in.Delivery, in.Confirm,
			in.Session.TTL.Milliseconds(), in.Session.ByteBudget, in.Session.MaxConcurrency,
			orNull(in.IdempotencyKey), orNull(in.Object.SHA256))
		if err != nil {
			return err
		}
		return s.enqueue(ctx, tx, linkEvent(ledger.EventLinkCreated, &in, in.CreatedAt))
	})
	if err == nil {
		return &in, true, nil
	}
	if in.IdempotencyKey == "" || !s.d.IsDuplicate(err) {
		return nil, false, err
	}
	prev, err := scanLink(s.db.QueryRowContext(ctx,
		`SELECT `+linkColumns+` FROM links WHERE idempotency_key = ?`, in.IdempotencyKey))
	if err != nil {
		return nil, false, s.classify(err)
	}
	if prev.Object.Bucket != in.Object.Bucket || prev.Object.Key != in.Object.Key ||
		prev.Allowance != in.Allowance || prev.Delivery != in.Delivery || prev.AccountID != in.AccountID {
		return nil, false, fmt.Errorf("%w: idempotency key already used for another link", ledger.ErrConflict)
	}
	return prev, false, nil
}

// LinkGetByTokenHash returns the link whatever its state. Errors: ErrNotFound.
func (s *DB) LinkGetByTokenHash(ctx context.Context, hash []byte) (*ledger.Link, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var now timeCol
	l, err := scanLink(withNow(s.db.QueryRowContext(ctx,
		s.q(`SELECT `+linkColumns+`, {now} FROM links WHERE token_hash = ?`), s.dbNow(), hash), &now))
	if err == nil {
		l.ReadAt = now.T
	}
	return l, s.classify(err)
}

func (s *DB) linkByID(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, id string) (*ledger.Link, error) {
	return scanLink(q.QueryRowContext(ctx, `SELECT `+linkColumns+` FROM links WHERE id = ?`, id))
}

// LinkGet returns the link with its grant counts and live sessions.
// Errors: ErrNotFound.
func (s *DB) LinkGet(ctx context.Context, id string) (*ledger.LinkStatus, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	l, err := s.linkByID(ctx, s.db, id)
	if err != nil {
		return nil, s.classify(err)
	}
	st := &ledger.LinkStatus{Link: *l, Grants: map[string]int{ledger.StatusGranted: 0, ledger.StatusRefunded: 0}}
	rows, err := s.db.QueryContext(ctx, `SELECT status, COUNT(*) FROM grants WHERE link_id = ? GROUP BY status`, id)
	if err != nil {
		return nil, s.classify(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			status string
			n      int
		)
		if err := rows.Scan(&status, &n); err != nil {
			return nil, s.classify(err)
		}
		st.Grants[status] = n
	}
	if err := rows.Err(); err != nil {
		return nil, s.classify(err)
	}
	err = s.db.QueryRowContext(ctx, s.q(`SELECT COUNT(*) FROM sessions
WHERE link_id = ? AND revoked_at IS NULL AND ended_at IS NULL AND expires_at > {now}`),
		id, s.dbNow()).Scan(&st.ActiveSessions)
	if err != nil {
		return nil, s.classify(err)
	}
	return st, nil
}

// LinkRevoke revokes the link and, in the same transaction, its sessions.
// Revoking twice keeps the first time. This process's refusal cache
// forgets the link, so that its next claim reads the revocation. Errors:
// ErrNotFound.
func (s *DB) LinkRevoke(ctx context.Context, id string) error {
	now := s.t(s.now())
	defer s.forgetRefusal(id)
	return s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE links SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, now, id)
		if err != nil {
			return err
		}
		if n, err := affected(res); err != nil {
			return err
		} else if n == 0 {
			var one int
			if err := tx.QueryRowContext(ctx, `SELECT 1 FROM links WHERE id = ?`, id).Scan(&one); errors.Is(err, sql.ErrNoRows) {
				return ledger.ErrNotFound
			} else if err != nil {
				return err
			}
		} else if err := s.enqueueRevoked(ctx, tx, id); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE sessions SET revoked_at = ? WHERE link_id = ? AND revoked_at IS NULL`, now, id)
		return err
	})
}

// The instants both backends can store: MySQL's DATETIME(6) ends with
// the year 9999, and nothing the gateway records predates the epoch (a
// released slot's lease is the epoch itself).
var (
	storableMin = time.Unix(0, 0).UTC()
	storableMax = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

// storable reports whether t lies between storableMin and storableMax.
func storable(t time.Time) bool { return !t.Before(storableMin) && !t.After(storableMax) }
