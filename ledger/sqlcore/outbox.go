package sqlcore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

// The webhook outbox (SPEC §6, migrations 00005). The writing side is
// enqueue, called inside the transaction of each change; the delivery
// side is ledger.Outbox, used by package webhook.

var _ ledger.Outbox = (*DB)(nil)

// enqueue writes e to the outbox inside tx, the transaction of the change
// e announces, so the event exists exactly when the change does. It does
// nothing unless s.Webhooks is set. e.Timestamp defaults to the process
// clock's now; e.Data.LinkID, when set, orders e behind the link's earlier
// events. Call it after the transaction has updated the link's row (which
// holds the row lock): that makes a link's events follow commit order.
func (s *DB) enqueue(ctx context.Context, tx *sql.Tx, e ledger.Event) error {
	if !s.Webhooks {
		return nil
	}
	created := s.now()
	if e.Timestamp.IsZero() {
		e.Timestamp = created
	}
	e.Timestamp = ledger.Micro(e.Timestamp)
	body, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("sqlcore: event %s: %w", e.Type, err)
	}
	_, err = tx.ExecContext(ctx, s.q(`INSERT INTO webhook_outbox
  (event_id, link_id, event_type, payload, created_at, next_attempt_at)
VALUES (?, ?, ?, ?, ?, {now})`),
		newID(), orNull(e.Data.LinkID), e.Type, string(body), s.t(created), s.dbNow())
	return err
}

// linkEvent is the event typ about l, at.
func linkEvent(typ string, l *ledger.Link, at time.Time) ledger.Event {
	expires := l.ExpiresAt
	return ledger.Event{Type: typ, Timestamp: at, Data: ledger.EventData{
		LinkID: l.ID, AccountID: l.AccountID, Downloads: ptr(l.Allowance), Remaining: ptr(l.Remaining),
		Delivery: l.Delivery, Filename: l.Filename, ExpiresAt: &expires,
		Object: &ledger.EventObject{
			Bucket: l.Object.Bucket, Key: l.Object.Key, VersionID: l.Object.VersionID,
			Size: l.Object.Size, ETag: l.Object.ETag, ContentType: l.Object.ContentType,
		},
	}}
}

// enqueueRevoked announces the revocation of the link id inside its
// transaction, as the link row reads there.
func (s *DB) enqueueRevoked(ctx context.Context, tx *sql.Tx, id string) error {
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
	return s.enqueue(ctx, tx, linkEvent(ledger.EventLinkRevoked, l, at))
}

// enqueueClaim announces the claim g inside its transaction:
// grant.created, then session.created when the claim minted a session
// (mint != nil), then link.exhausted when it took the last download.
func (s *DB) enqueueClaim(ctx context.Context, tx *sql.Tx, g *ledger.Grant, mint *ledger.MintRequest) error {
	if !s.Webhooks {
		return nil
	}
	var (
		allowance, remaining int
		expires              timeCol
		account              nullStr
	)
	err := tx.QueryRowContext(ctx, `SELECT allowance, remaining, expires_at, account_id FROM links WHERE id = ?`,
		g.LinkID).Scan(&allowance, &remaining, &expires, &account)
	if err != nil {
		return err
	}
	err = s.enqueue(ctx, tx, ledger.Event{Type: ledger.EventGrantCreated, Timestamp: g.CreatedAt, Data: ledger.EventData{
		LinkID: g.LinkID, GrantID: g.ID, SessionID: g.SessionID, AccountID: g.AccountID, Client: g.Client,
		Kind: g.Kind, Downloads: ptr(allowance), Remaining: ptr(remaining), ExpiresAt: &expires.T,
	}})
	if err != nil {
		return err
	}
	if mint != nil {
		// The session is bound to the link's account, not the caller's
		// (SPEC §5), as the session row is.
		sessionExpires := ledger.Micro(mint.ExpiresAt)
		err := s.enqueue(ctx, tx, ledger.Event{Type: ledger.EventSessionCreated, Timestamp: g.CreatedAt, Data: ledger.EventData{
			LinkID: g.LinkID, GrantID: g.ID, SessionID: mint.SessionID, AccountID: string(account), Client: g.Client,
			ExpiresAt: &sessionExpires, ByteBudget: mint.ByteBudget, MaxConcurrency: mint.MaxConcurrency,
		}})
		if err != nil {
			return err
		}
	}
	if remaining > 0 {
		return nil
	}
	return s.enqueue(ctx, tx, ledger.Event{Type: ledger.EventLinkExhausted, Timestamp: g.CreatedAt, Data: ledger.EventData{
		LinkID: g.LinkID, AccountID: string(account), Downloads: ptr(allowance), Remaining: ptr(0), ExpiresAt: &expires.T,
	}})
}

// enqueueRefund announces the refund of grantID inside its transaction,
// after the link's allowance was given back.
func (s *DB) enqueueRefund(ctx context.Context, tx *sql.Tx, grantID string) error {
	if !s.Webhooks {
		return nil
	}
	var (
		d                    ledger.EventData
		account, session     nullStr
		allowance, remaining int
		expires, at          timeCol
	)
	err := tx.QueryRowContext(ctx, `SELECT g.link_id, g.account_id, g.client, g.kind, g.session_id,
  g.refunded_at, l.allowance, l.remaining, l.expires_at
FROM grants g JOIN links l ON l.id = g.link_id WHERE g.id = ?`, grantID).Scan(
		&d.LinkID, &account, &d.Client, &d.Kind, &session, &at, &allowance, &remaining, &expires)
	if err != nil {
		return err
	}
	d.GrantID, d.AccountID, d.SessionID = grantID, string(account), string(session)
	d.Downloads, d.Remaining, d.ExpiresAt = ptr(allowance), ptr(remaining), &expires.T
	return s.enqueue(ctx, tx, ledger.Event{Type: ledger.EventGrantRefunded, Timestamp: at.T, Data: d})
}

func ptr[T any](v T) *T { return &v }

// outboxColumns are the columns of a ledger.OutboxEvent, in scan order.
const outboxColumns = `seq, event_id, link_id, event_type, payload, created_at, attempts`

// dueSQL selects events a deliverer may take now: pending, due (never
// tried, retry time reached, or lease lapsed, which is the same column),
// and first of their link among the pending ones, so a link's events go
// out one at a time in seq order. The NOT EXISTS is a plain read even
// inside a locking SELECT, and sees an earlier event another deliverer is
// holding as pending. Arguments: now, limit.
const dueSQL = `SELECT ` + outboxColumns + ` FROM webhook_outbox o
WHERE o.status = 'pending' AND o.next_attempt_at <= {now}
  AND NOT EXISTS (SELECT 1 FROM webhook_outbox p
    WHERE p.link_id = o.link_id AND p.status = 'pending' AND p.seq < o.seq)
ORDER BY o.next_attempt_at, o.seq LIMIT ?`

// lockSkip is what a deliverer's or sweeper's SELECT adds to lock the rows
// it takes and pass over those another process holds: FOR UPDATE SKIP
// LOCKED on MySQL (8.0, MariaDB 10.6); nothing on SQLite, whose
// transactions are IMMEDIATE and so run one writer at a time.
func (s *DB) lockSkip() string {
	if s.d.Name == "mysql" {
		return ` FOR UPDATE SKIP LOCKED`
	}
	return ""
}

// outboxTx runs fn in one transaction for the deliverers' statements,
// bounded by Timeout. On MySQL it is READ COMMITTED, so its locking reads
// take no gap locks: a claim's INSERT of a new event never waits for a
// deliverer. A failure is not retried; the deliverer comes back on its
// next round.
func (s *DB) outboxTx(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var opts *sql.TxOptions
	if s.d.Name == "mysql" {
		opts = &sql.TxOptions{Isolation: sql.LevelReadCommitted}
	}
	tx, err := s.db.BeginTx(ctx, opts)
	if err != nil {
		return s.classify(err)
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	if err := fn(ctx, tx); err != nil {
		return s.classify(err)
	}
	return s.classify(tx.Commit())
}

// ClaimEvents leases up to limit due events to holder until now+lease.
// Errors: ErrUnavailable.
func (s *DB) ClaimEvents(ctx context.Context, holder string, limit int, lease time.Duration) ([]ledger.OutboxEvent, error) {
	if limit < 1 || holder == "" || lease <= 0 {
		return nil, fmt.Errorf("%w: a holder, a limit ≥ 1 and a lease are required", ledger.ErrInvalid)
	}
	var out []ledger.OutboxEvent
	err := s.outboxTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		out = out[:0]
		rows, err := tx.QueryContext(ctx, s.q(dueSQL)+s.lockSkip(), s.dbNow(), limit)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var (
				e    ledger.OutboxEvent
				link nullStr
				at   timeCol
			)
			if err := rows.Scan(&e.Seq, &e.ID, &link, &e.Type, &e.Body, &at, &e.Attempts); err != nil {
				return err
			}
			e.LinkID, e.CreatedAt = string(link), at.T
			e.Attempts++
			out = append(out, e)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		if len(out) == 0 {
			return nil
		}
		args := []any{holder, s.dbNow(), lease.Microseconds()}
		for _, e := range out {
			args = append(args, e.Seq)
		}
		_, err = tx.ExecContext(ctx, s.q(`UPDATE webhook_outbox
SET claimed_by = ?, next_attempt_at = {now+}, attempts = attempts + 1
WHERE seq IN `+placeholders(len(out))), args...)
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, nil
}

// EventDelivered marks the event delivered. Errors: ErrNotFound when
// holder lost its lease to another deliverer.
func (s *DB) EventDelivered(ctx context.Context, seq int64, holder string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	res, err := s.exec(ctx, `UPDATE webhook_outbox
SET status = 'delivered', finished_at = ?, claimed_by = NULL
WHERE seq = ? AND claimed_by = ? AND status = 'pending'`, s.t(s.now()), seq, holder)
	return lostLease(res, err)
}

// EventFailed records a failed attempt; the event is due again after
// retryIn. Errors: ErrNotFound when holder lost its lease.
func (s *DB) EventFailed(ctx context.Context, seq int64, holder, reason string, retryIn time.Duration) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	res, err := s.exec(ctx, s.q(`UPDATE webhook_outbox
SET next_attempt_at = {now+}, claimed_by = NULL, last_error = ?
WHERE seq = ? AND claimed_by = ? AND status = 'pending'`),
		s.dbNow(), max(retryIn, 0).Microseconds(), reason, seq, holder)
	return lostLease(res, err)
}

func lostLease(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := affected(res)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: the event's lease is held by another deliverer or it is finished", ledger.ErrNotFound)
	}
	return nil
}

// ExpireEvents marks dead up to limit pending events created maxAge or
// longer ago (by the database's clock) that are not being delivered: never
// claimed, waiting for a retry, or with a lapsed lease.
func (s *DB) ExpireEvents(ctx context.Context, maxAge time.Duration, limit int) (int, error) {
	limit = max(limit, 1)
	return s.finishBatch(ctx, `SELECT seq FROM webhook_outbox
WHERE status = 'pending' AND created_at <= {now+} AND (claimed_by IS NULL OR next_attempt_at <= {now})
ORDER BY created_at LIMIT ?`, []any{s.dbNow(), -maxAge.Microseconds(), s.dbNow(), limit},
		`UPDATE webhook_outbox SET status = 'dead', finished_at = ?, claimed_by = NULL WHERE seq IN `,
		s.t(s.now()))
}

// PurgeEvents deletes up to limit delivered or dead events created keep
// or longer ago.
func (s *DB) PurgeEvents(ctx context.Context, keep time.Duration, limit int) (int, error) {
	limit = max(limit, 1)
	return s.finishBatch(ctx, `SELECT seq FROM webhook_outbox
WHERE status IN ('delivered', 'dead') AND created_at <= {now+}
ORDER BY created_at LIMIT ?`, []any{s.dbNow(), -keep.Microseconds(), limit},
		`DELETE FROM webhook_outbox WHERE seq IN `)
}

// finishBatch selects a batch of seqs with sel (locking them, skipping
// rows another process holds) and applies change to them, whose
// placeholders come before the seqs', in one transaction.
func (s *DB) finishBatch(ctx context.Context, sel string, selArgs []any, change string, changeArgs ...any) (int, error) {
	var n int
	err := s.outboxTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, s.q(sel)+s.lockSkip(), selArgs...)
		if err != nil {
			return err
		}
		defer rows.Close()
		args := append([]any(nil), changeArgs...)
		for rows.Next() {
			var seq int64
			if err := rows.Scan(&seq); err != nil {
				return err
			}
			args = append(args, seq)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		n = len(args) - len(changeArgs)
		if n == 0 {
			return nil
		}
		_, err = tx.ExecContext(ctx, change+placeholders(n), args...)
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// OutboxAge returns how long the oldest pending event has waited, by the
// database's clock; 0 when none is pending.
func (s *DB) OutboxAge(ctx context.Context) (time.Duration, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var oldest, now timeCol
	err := s.db.QueryRowContext(ctx, s.q(`SELECT MIN(created_at), {now} FROM webhook_outbox WHERE status = 'pending'`),
		s.dbNow()).Scan(&oldest, &now)
	if err != nil {
		return 0, s.classify(err)
	}
	if !oldest.Valid || !now.T.After(oldest.T) {
		return 0, nil
	}
	return now.T.Sub(oldest.T), nil
}

// placeholders is "(?, ?, …)" with n placeholders.
func placeholders(n int) string {
	return "(" + strings.TrimSuffix(strings.Repeat("?, ", n), ", ") + ")"
}
