package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/audit"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
	"github.com/dlgate/dlgate/ledger/sqlcore/outbox"
)

const linkColumns = `id, token_hash, bucket, object_key, version_id, size, etag, content_type,
  last_modified, filename, account_id, allowance, remaining, expires_at, revoked_at,
  created_at, delivery, confirm, session_ttl_ms, session_byte_budget,
  session_max_concurrency, idempotency_key, sha256, retries`

func scanLink(r engine.RowScanner) (*ledger.Link, error) {
	var (
		l                             ledger.Link
		lastMod, expires, revoked, at engine.TimeCol
		account, idem, sum            engine.NullStr
		confirm                       bool
		ttlMS                         int64
	)
	err := r.Scan(&l.ID, &l.TokenHash, &l.Object.Bucket, &l.Object.Key, &l.Object.VersionID,
		&l.Object.Size, &l.Object.ETag, &l.Object.ContentType, &lastMod, &l.Filename, &account,
		&l.Allowance, &l.Remaining, &expires, &revoked, &at, &l.Delivery, &confirm, &ttlMS,
		&l.Session.ByteBudget, &l.Session.MaxConcurrency, &idem, &sum, &l.Retries)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ledger.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	l.Object.LastModified = lastMod.T
	l.AccountID, l.IdempotencyKey, l.Object.SHA256 = string(account), string(idem), string(sum)
	l.ExpiresAt, l.RevokedAt, l.CreatedAt = expires.T, revoked.Ptr(), at.T
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
	if !engine.Storable(l.ExpiresAt) {
		// SQLite would store it; MySQL's DATETIME would refuse it with a
		// server error. Both refuse it the same way instead.
		return nil, false, fmt.Errorf("%w: expiry outside %v..%v", ledger.ErrInvalid, engine.StorableMin, engine.StorableMax)
	}
	a, err := audit.ActorOf(ctx)
	if err != nil {
		return nil, false, err
	}
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	in := *l
	in.ExpiresAt = ledger.Micro(in.ExpiresAt)
	in.CreatedAt = s.Stamp()
	if !in.Object.LastModified.IsZero() {
		in.Object.LastModified = ledger.Micro(in.Object.LastModified)
	}
	var lastMod any
	if !in.Object.LastModified.IsZero() {
		lastMod = s.TimeArg(in.Object.LastModified)
	}
	// One transaction, so that link.created, the event and the audit
	// entry, exists exactly when the link does.
	err = s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		recorded, err := s.pinStored(ctx, tx, in.Object, s.TimeArg(in.CreatedAt))
		if err != nil {
			return err
		}
		if recorded != "" {
			in.Object.SHA256 = recorded
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO links (`+linkColumns+`)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			in.ID, in.TokenHash, in.Object.Bucket, in.Object.Key, in.Object.VersionID, in.Object.Size,
			in.Object.ETag, in.Object.ContentType, lastMod, in.Filename, engine.OrNull(in.AccountID),
			in.Allowance, in.Remaining, s.TimeArg(in.ExpiresAt), s.TimeArg(in.CreatedAt), in.Delivery, in.Confirm,
			in.Session.TTL.Milliseconds(), in.Session.ByteBudget, in.Session.MaxConcurrency,
			engine.OrNull(in.IdempotencyKey), engine.OrNull(in.Object.SHA256), in.Retries)
		if err != nil {
			return err
		}
		if err := s.Enqueue(ctx, tx, outbox.LinkEvent(ledger.EventLinkCreated, &in, in.CreatedAt, a)); err != nil {
			return err
		}
		return audit.Write(ctx, tx, a, s.TimeArg(in.CreatedAt), ledger.ActionLinkCreated, ledger.AuditTarget{Type: ledger.TargetLink, ID: in.ID},
			audit.LinkCreated{Downloads: in.Allowance, ExpiresAt: in.ExpiresAt, Delivery: in.Delivery,
				AccountID: ledger.OrNull(in.AccountID), Filename: in.Filename,
				Object: audit.Version{Bucket: in.Object.Bucket, Key: in.Object.Key, VersionID: in.Object.VersionID}})
	})
	if err == nil {
		return &in, true, nil
	}
	if in.IdempotencyKey == "" || !s.D.IsDuplicate(err) {
		return nil, false, err
	}
	prev, err := scanLink(s.Pool.QueryRowContext(ctx,
		`SELECT `+linkColumns+` FROM links WHERE idempotency_key = ?`, in.IdempotencyKey))
	if err != nil {
		return nil, false, s.Classify(err)
	}
	if prev.Object.Bucket != in.Object.Bucket || prev.Object.Key != in.Object.Key ||
		prev.Allowance != in.Allowance || prev.Delivery != in.Delivery || prev.AccountID != in.AccountID ||
		prev.Retries != in.Retries {
		return nil, false, fmt.Errorf("%w: idempotency key already used for another link", ledger.ErrConflict)
	}
	return prev, false, nil
}

// LinkGetByTokenHash returns the link whatever its state. Errors: ErrNotFound.
func (s *DB) LinkGetByTokenHash(ctx context.Context, hash []byte) (*ledger.Link, error) {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	var now engine.TimeCol
	l, err := scanLink(engine.WithNow(s.Pool.QueryRowContext(ctx,
		s.Q(`SELECT `+linkColumns+`, {now} FROM links WHERE token_hash = ?`), s.DBNow(), hash), &now))
	if err == nil {
		l.ReadAt = now.T
	}
	return l, s.Classify(err)
}

func (s *DB) linkByID(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, id string) (*ledger.Link, error) {
	return scanLink(q.QueryRowContext(ctx, `SELECT `+linkColumns+` FROM links WHERE id = ?`, id))
}

// LinkGet returns the link with its grant counts (by status and by
// delivery status) and live sessions. Errors: ErrNotFound.
func (s *DB) LinkGet(ctx context.Context, id string) (*ledger.LinkStatus, error) {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	l, err := s.linkByID(ctx, s.Pool, id)
	if err != nil {
		return nil, s.Classify(err)
	}
	st := newLinkStatus(l)
	rows, err := s.Pool.QueryContext(ctx, `SELECT status, delivery_status, COUNT(*) FROM grants WHERE link_id = ?
GROUP BY status, delivery_status`, id)
	if err != nil {
		return nil, s.Classify(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			status   string
			delivery ledger.DeliveryStatus
			n        int
		)
		if err := rows.Scan(&status, &delivery, &n); err != nil {
			return nil, s.Classify(err)
		}
		countGrants(st, status, delivery, n)
	}
	if err := rows.Err(); err != nil {
		return nil, s.Classify(err)
	}
	err = s.Pool.QueryRowContext(ctx, s.Q(`SELECT COUNT(*) FROM sessions
WHERE link_id = ? AND revoked_at IS NULL AND ended_at IS NULL AND expires_at > {now}`),
		id, s.DBNow()).Scan(&st.ActiveSessions)
	if err != nil {
		return nil, s.Classify(err)
	}
	return st, nil
}

// LinkRevoke revokes the link and, in the same transaction, its sessions
// (the grant of each session that was live and is not complete gets
// grant.interrupted, reason revoked), with the link.revoked event and,
// with an actor, audit entry. Revoking twice keeps the first time and
// announces and audits nothing. This process's refusal cache forgets the
// link, so that its next claim reads the revocation. Errors: ErrNotFound.
func (s *DB) LinkRevoke(ctx context.Context, id string) error {
	a, err := audit.ActorOf(ctx)
	if err != nil {
		return err
	}
	defer s.forgetRefusal(id)
	stamp := s.Stamp()
	now := s.TimeArg(stamp)
	return s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE links SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, now, id)
		if err != nil {
			return err
		}
		revoked, err := engine.Affected(res)
		if err != nil {
			return err
		} else if revoked == 0 {
			var one int
			if err := tx.QueryRowContext(ctx, `SELECT 1 FROM links WHERE id = ?`, id).Scan(&one); errors.Is(err, sql.ErrNoRows) {
				return ledger.ErrNotFound
			} else if err != nil {
				return err
			}
		} else if err := s.enqueueRevoked(ctx, tx, id, a); err != nil {
			return err
		}
		// The sessions this revocation ends: those still live. One that
		// expired before is the sweeper's to end, as expired.
		err = s.interrupt(ctx, tx, stamp, `s.link_id = ? AND s.revoked_at IS NULL AND s.ended_at IS NULL AND s.expires_at > {now}`,
			[]any{id, s.DBNow()}, func(endedSession) string { return ledger.InterruptedRevoked })
		if err != nil {
			return err
		}
		res, err = tx.ExecContext(ctx, `UPDATE sessions SET revoked_at = ? WHERE link_id = ? AND revoked_at IS NULL`, now, id)
		if err != nil || revoked == 0 {
			return err
		}
		sessions, err := engine.Affected(res)
		if err != nil {
			return err
		}
		return audit.Write(ctx, tx, a, s.TimeArg(stamp), ledger.ActionLinkRevoked, ledger.AuditTarget{Type: ledger.TargetLink, ID: id},
			audit.LinkRevoked{SessionsRevoked: sessions})
	})
}

// countGrants adds n grants of status and delivery status delivery to
// st's counts.
func countGrants(st *ledger.LinkStatus, status string, delivery ledger.DeliveryStatus, n int) {
	st.Grants[status] += n
	st.Deliveries[delivery] += n
}

// newLinkStatus is l with every count at zero.
func newLinkStatus(l *ledger.Link) *ledger.LinkStatus {
	return &ledger.LinkStatus{Link: *l,
		Grants: map[string]int{ledger.StatusGranted: 0, ledger.StatusRefunded: 0},
		Deliveries: map[ledger.DeliveryStatus]int{
			ledger.DeliveryNone: 0, ledger.DeliveryPartial: 0, ledger.DeliveryComplete: 0,
		},
	}
}

// enqueueRevoked announces the revocation of the link id by a (nil for
// the gateway's own) inside its transaction, as the link row reads there.
func (s *DB) enqueueRevoked(ctx context.Context, tx *sql.Tx, id string, a *ledger.Actor) error {
	if !s.Webhooks {
		return nil
	}
	l, err := s.linkByID(ctx, tx, id)
	if err != nil {
		return err
	}
	var at time.Time
	if l.RevokedAt != nil {
		at = *l.RevokedAt
	}
	return s.Enqueue(ctx, tx, outbox.LinkEvent(ledger.EventLinkRevoked, l, at, a))
}
