// Package outbox is the SQL ledger's webhook outbox (SPEC §6, migration
// 00005). The writing side is Queue.Enqueue, called inside the
// transaction of each change; the delivery side is ledger.Outbox, used by
// package webhook.
package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// Queue is the webhook outbox: events written by Enqueue inside the
// transactions of the changes they announce, handed to deliverers by
// ledger.Outbox. ledger/sqlcore's DB embeds it.
type Queue struct {
	*engine.DB
	// Webhooks makes each change write its webhook event to the outbox in
	// its own transaction (GATEWAY_WEBHOOK_URL is set); without it
	// Enqueue writes nothing.
	Webhooks bool
}

var _ ledger.Outbox = (*Queue)(nil)

// Enqueue writes e to the outbox inside tx, the transaction of the change
// e announces, so the event exists exactly when the change does. It does
// nothing unless s.Webhooks is set. e.Timestamp defaults to the process
// clock's now; e.Data.LinkID, when set, orders e behind the link's earlier
// events.
func (s *Queue) Enqueue(ctx context.Context, tx *sql.Tx, e ledger.Event) error {
	return s.EnqueueAll(ctx, tx, e)
}

// EnqueueAll writes evs, events about one link (or about none), in this
// order, in one INSERT. A link's events are numbered by the link's own
// sequence (Dialect.LinkSeq), reserved by an UPDATE of the link's row in
// this transaction: the row lock makes the numbers follow commit order on
// every engine, which the outbox's AUTO_INCREMENT seq does not on TiDB
// (each server allocates from a range of its own).
func (s *Queue) EnqueueAll(ctx context.Context, tx *sql.Tx, evs ...ledger.Event) error {
	if !s.Webhooks || len(evs) == 0 {
		return nil
	}
	link := evs[0].Data.LinkID
	var first int64
	if link != "" {
		last, err := s.D.LinkSeq(ctx, tx, link, len(evs))
		if err != nil {
			return fmt.Errorf("sqlcore: event sequence of link %s: %w", link, err)
		}
		first = last - int64(len(evs)) + 1
	}
	created := s.Stamp()
	var b strings.Builder
	b.WriteString(`INSERT INTO webhook_outbox
  (event_id, link_id, link_seq, event_type, payload, created_at, next_attempt_at) VALUES `)
	args := make([]any, 0, 8*len(evs))
	for i, e := range evs {
		if e.Data.LinkID != link {
			return fmt.Errorf("sqlcore: events of links %q and %q in one enqueue", link, e.Data.LinkID)
		}
		if e.Timestamp.IsZero() {
			e.Timestamp = created
		}
		e.Timestamp = ledger.Micro(e.Timestamp)
		body, err := json.Marshal(e)
		if err != nil {
			return fmt.Errorf("sqlcore: event %s: %w", e.Type, err)
		}
		var seq any
		if link != "" {
			seq = first + int64(i)
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString("(?, ?, ?, ?, ?, ?, {now})")
		args = append(args, engine.NewID(), engine.OrNull(link), seq, e.Type, string(body), s.TimeArg(created), s.DBNow())
	}
	_, err := tx.ExecContext(ctx, s.Q(b.String()), args...)
	return err
}

// LinkEvent is the event typ about l, at, caused by a (nil when the
// gateway made the change itself).
func LinkEvent(typ string, l *ledger.Link, at time.Time, a *ledger.Actor) ledger.Event {
	expires := l.ExpiresAt
	return ledger.Event{Type: typ, Timestamp: at, Data: ledger.EventData{
		Actor:  ledger.EventActorOf(a),
		LinkID: l.ID, AccountID: l.AccountID, Downloads: engine.Ptr(l.Allowance), Remaining: engine.Ptr(l.Remaining),
		Delivery: l.Delivery, Filename: l.Filename, ExpiresAt: &expires,
		Object: ledger.EventObjectOf(l.Object),
	}}
}

// EnqueueRefund announces the refund of grantID inside its transaction,
// after the link's allowance was given back.
func (s *Queue) EnqueueRefund(ctx context.Context, tx *sql.Tx, grantID string) error {
	if !s.Webhooks {
		return nil
	}
	var (
		d                     ledger.EventData
		account, session, sum engine.NullStr
		allowance, remaining  int
		expires, at           engine.TimeCol
	)
	err := tx.QueryRowContext(ctx, `SELECT g.link_id, g.account_id, g.client, g.kind, g.session_id,
  g.refunded_at, l.allowance, l.remaining, l.expires_at, l.sha256
FROM grants g JOIN links l ON l.id = g.link_id WHERE g.id = ?`, grantID).Scan(
		&d.LinkID, &account, &d.Client, &d.Kind, &session, &at, &allowance, &remaining, &expires, &sum)
	if err != nil {
		return err
	}
	d.GrantID, d.AccountID, d.SessionID, d.SHA256 = grantID, string(account), string(session), string(sum)
	d.Downloads, d.Remaining, d.ExpiresAt = engine.Ptr(allowance), engine.Ptr(remaining), &expires.T
	return s.Enqueue(ctx, tx, ledger.Event{Type: ledger.EventGrantRefunded, Timestamp: at.T, Data: d})
}

// DeliveryEvent is grant.delivered or grant.interrupted (typ) about g, a
// grant of an object version of size bytes as it reads after the change,
// at: the grant's Delivery as the grants listing shows it, and why it was
// interrupted.
func DeliveryEvent(typ string, g *ledger.Grant, size int64, reason string, at time.Time) ledger.Event {
	d := g.Delivery
	return ledger.Event{Type: typ, Timestamp: at, Data: ledger.EventData{
		LinkID: g.LinkID, GrantID: g.ID, SessionID: g.SessionID, AccountID: g.AccountID, Client: g.Client,
		Kind: g.Kind, Size: engine.Ptr(size), BytesAcked: engine.Ptr(d.BytesAcked), Coverage: engine.Ptr(d.Coverage),
		Attempts: engine.Ptr(d.Attempts), Measured: engine.Ptr(d.Measured), DeliveredAt: d.DeliveredAt, Reason: reason,
	}}
}

// outboxColumns are the columns of a ledger.OutboxEvent, in scan order.
const outboxColumns = `seq, event_id, link_id, event_type, payload, created_at, attempts`

// The candidates a deliverer may take now are pending, due (never tried,
// retry time reached, or lease lapsed, which is the same column), and
// first of their link among the pending ones by the link's own sequence,
// so a link's events go out one at a time in the order they committed.
// A head stays the head until it is delivered or given up (a later event
// gets a higher link_seq), so the conditional UPDATE that takes the
// candidates need not ask again. The reads that find them are plain
// reads, and see an earlier event another deliverer is holding as
// pending.
//
// dueEvents finds them in two looks. The first (dueWindowSQL) visits the
// earliest due events only, at most dueWindow of them, and says of each
// whether it heads its link: when the events waiting belong to many
// links, that is where the heads are. When it found too few heads in a
// full window, the window is one link's backlog (a busy link whose
// receiver is behind): the second look (dueHeadsSQL, dueUnlinkedSQL)
// reads the head of every link with events pending from the index
// outbox_pending_link, one entry per link, where a single look over the
// due events visited the whole backlog every round (261 ms a round with
// 28,000 events of one link pending: 4 deliveries a second). Then the
// candidates' rows are read in their order, locked where the engine
// skips locked rows (so that deliverers mostly take different ones).

// dueWindow is how many of the earliest due events the first look visits.
const dueWindow = 256

// dueWindowSQL is the first look: the earliest due events and whether
// each heads its link (an event of no link always does). An event heads
// its link when it is the first of the link's pending events in
// outbox_link_seq's order, a read of one index entry; asked as "no
// pending event of the link comes before it" (NOT EXISTS … link_seq <),
// MariaDB read the link's whole backlog for its head (ref on link_id and
// status, then a filter). Arguments: now, the window.
const dueWindowSQL = `SELECT o.seq, CASE WHEN o.link_id IS NULL OR o.link_seq = (SELECT p.link_seq FROM webhook_outbox p
    WHERE p.link_id = o.link_id AND p.status = 'pending' ORDER BY p.link_seq LIMIT 1) THEN 1 ELSE 0 END
FROM (SELECT seq FROM webhook_outbox WHERE status = 'pending' AND next_attempt_at <= {now}
  ORDER BY next_attempt_at, seq LIMIT ?) w
JOIN webhook_outbox o ON o.seq = w.seq`

// dueHeadsSQL is the second look: the head of every link with events
// pending, those of them due, in delivery order. Arguments: now, limit.
const dueHeadsSQL = `SELECT o.seq FROM (SELECT link_id, MIN(link_seq) AS head FROM webhook_outbox
  WHERE status = 'pending' AND link_id IS NOT NULL GROUP BY link_id) h
JOIN webhook_outbox o ON o.link_id = h.link_id AND o.status = 'pending' AND o.link_seq = h.head
WHERE o.next_attempt_at <= {now}
ORDER BY o.next_attempt_at, o.seq LIMIT ?`

// dueUnlinkedSQL completes the second look with the due events of no
// link (object.deleted), each its own head. Arguments: now, limit.
const dueUnlinkedSQL = `SELECT seq FROM webhook_outbox
WHERE status = 'pending' AND link_id IS NULL AND next_attempt_at <= {now}
ORDER BY next_attempt_at, seq LIMIT ?`

// outboxTx runs fn in one transaction for the deliverers' statements,
// bounded by Timeout, with the sweeper's options (Dialect.SweepTx: READ
// COMMITTED on MySQL, so no gap locks, and a claim's INSERT of a new
// event never waits for a deliverer). A deadlock or lock-wait timeout is
// run again like any transaction's (retry): deliverers that picked the
// same candidates meet in their UPDATEs, which InnoDB may lock in the
// order of different indexes. Any other failure is not retried, a failed
// COMMIT included; the deliverer comes back on its next round.
func (s *Queue) outboxTx(ctx context.Context, fn func(ctx context.Context, tx *sql.Tx) error) error {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	err := s.Retry(ctx, func() error { return s.TryTx(ctx, s.D.SweepTx, fn) })
	var ce *engine.CommitError
	if errors.As(err, &ce) {
		err = ce.Err
	}
	return s.Classify(err)
}

// EventClaim leases up to limit due events to holder until now+lease:
// it picks candidates, then leases those still due in one conditional
// UPDATE that stamps them with a lease id of this call, and returns the
// events that carry it. An event another deliverer leased first is due
// no more and is left out, whether or not the engine honours SKIP LOCKED
// (see sweep.go). Errors: ErrUnavailable.
func (s *Queue) EventClaim(ctx context.Context, holder string, limit int, lease time.Duration) ([]ledger.OutboxEvent, error) {
	if limit < 1 || holder == "" || lease <= 0 {
		return nil, fmt.Errorf("%w: a holder, a limit ≥ 1 and a lease are required", ledger.ErrInvalid)
	}
	var out []ledger.OutboxEvent
	err := s.outboxTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		out = out[:0]
		cands, err := s.dueEvents(ctx, tx, limit)
		if err != nil || len(cands) == 0 {
			return err
		}
		id := engine.NewID()
		in := engine.Placeholders(len(cands))
		seqs := make([]any, 0, len(cands))
		for _, e := range cands {
			seqs = append(seqs, e.Seq)
		}
		args := append([]any{holder, id, s.DBNow(), lease.Microseconds()}, seqs...)
		res, err := tx.ExecContext(ctx, s.Q(`UPDATE webhook_outbox
SET claimed_by = ?, lease_id = ?, next_attempt_at = {now+}, attempts = attempts + 1
WHERE seq IN `+in+` AND status = 'pending' AND next_attempt_at <= {now}`), append(args, s.DBNow())...)
		if err != nil {
			return err
		}
		if n, err := engine.Affected(res); err != nil || n == 0 {
			return err
		}
		// What this call leased, with the attempt it made: the count may
		// have moved since the candidates were read.
		rows, err := tx.QueryContext(ctx, `SELECT seq, attempts FROM webhook_outbox WHERE seq IN `+in+` AND lease_id = ?`,
			append(seqs, id)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		attempts := map[int64]int{}
		for rows.Next() {
			var seq int64
			var n int
			if err := rows.Scan(&seq, &n); err != nil {
				return err
			}
			attempts[seq] = n
		}
		if err := rows.Err(); err != nil {
			return err
		}
		for _, e := range cands {
			if n, ok := attempts[e.Seq]; ok {
				e.Attempts = n
				out = append(out, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, nil
}

// dueEvents reads at most limit candidates for EventClaim, in delivery
// order (see dueWindowSQL). It looks for four times as many as it takes,
// so that the rows another deliverer holds locked can be passed over.
func (s *Queue) dueEvents(ctx context.Context, tx *sql.Tx, limit int) ([]ledger.OutboxEvent, error) {
	want := 4 * limit
	window := max(dueWindow, want)
	var (
		seqs []any
		seen = map[int64]bool{}
	)
	add := func(seq int64) {
		if !seen[seq] && len(seqs) < want {
			seen[seq] = true
			seqs = append(seqs, seq)
		}
	}
	visited := 0
	err := readRows(ctx, tx, s.Q(dueWindowSQL), []any{s.DBNow(), window}, func(r engine.RowScanner) error {
		var (
			seq  int64
			head int
		)
		if err := r.Scan(&seq, &head); err != nil {
			return err
		}
		visited++
		if head == 1 {
			add(seq)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(seqs) < want && visited == window {
		for _, q := range []string{dueHeadsSQL, dueUnlinkedSQL} {
			err := readRows(ctx, tx, s.Q(q), []any{s.DBNow(), want}, func(r engine.RowScanner) error {
				var seq int64
				if err := r.Scan(&seq); err != nil {
					return err
				}
				add(seq)
				return nil
			})
			if err != nil {
				return nil, err
			}
		}
	}
	if len(seqs) == 0 {
		return nil, nil
	}
	var out []ledger.OutboxEvent
	err = readRows(ctx, tx, s.Q(`SELECT `+outboxColumns+` FROM webhook_outbox
WHERE seq IN `+engine.Placeholders(len(seqs))+` AND status = 'pending' AND next_attempt_at <= {now}
ORDER BY next_attempt_at, seq LIMIT ?`)+s.D.SkipLockedSQL(), append(seqs, s.DBNow(), limit), func(r engine.RowScanner) error {
		var (
			e    ledger.OutboxEvent
			link engine.NullStr
			at   engine.TimeCol
		)
		if err := r.Scan(&e.Seq, &e.ID, &link, &e.Type, &e.Body, &at, &e.Attempts); err != nil {
			return err
		}
		e.LinkID, e.CreatedAt = string(link), at.T
		out = append(out, e)
		return nil
	})
	return out, err
}

// readRows runs query in tx and hands each row to scan.
func readRows(ctx context.Context, tx *sql.Tx, query string, args []any, scan func(engine.RowScanner) error) error {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		if err := scan(rows); err != nil {
			return err
		}
	}
	return rows.Err()
}

// EventMarkDelivered marks the event delivered. Errors: ErrNotFound when
// holder lost its lease to another deliverer.
func (s *Queue) EventMarkDelivered(ctx context.Context, seq int64, holder string) error {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	res, err := s.Exec(ctx, `UPDATE webhook_outbox
SET status = 'delivered', finished_at = ?, claimed_by = NULL
WHERE seq = ? AND claimed_by = ? AND status = 'pending'`, s.TimeArg(s.Stamp()), seq, holder)
	return lostLease(res, err)
}

// EventMarkFailed records a failed attempt; the event is due again after
// retryIn. Errors: ErrNotFound when holder lost its lease.
func (s *Queue) EventMarkFailed(ctx context.Context, seq int64, holder, reason string, retryIn time.Duration) error {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	if len(reason) > 1024 {
		reason = reason[:1024]
	}
	res, err := s.Exec(ctx, s.Q(`UPDATE webhook_outbox
SET next_attempt_at = {now+}, claimed_by = NULL, last_error = ?
WHERE seq = ? AND claimed_by = ? AND status = 'pending'`),
		s.DBNow(), max(retryIn, 0).Microseconds(), reason, seq, holder)
	return lostLease(res, err)
}

func lostLease(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := engine.Affected(res)
	if err != nil {
		return err
	}
	if n == 0 {
		return fmt.Errorf("%w: the event's lease is held by another deliverer or it is finished", ledger.ErrNotFound)
	}
	return nil
}

// EventExpire marks dead up to limit pending events created maxAge or
// longer ago (by the database's clock) that are not being delivered: never
// claimed, waiting for a retry, or with a lapsed lease.
func (s *Queue) EventExpire(ctx context.Context, maxAge time.Duration, limit int) (int, error) {
	return s.finishBatch(ctx,
		`status = 'pending' AND created_at <= {now+} AND (claimed_by IS NULL OR next_attempt_at <= {now})`,
		[]any{s.DBNow(), -maxAge.Microseconds(), s.DBNow()}, max(limit, 1),
		`UPDATE webhook_outbox SET status = 'dead', finished_at = ?, claimed_by = NULL`, s.TimeArg(s.Stamp()))
}

// EventPurge deletes up to limit delivered or dead events created keep
// or longer ago.
func (s *Queue) EventPurge(ctx context.Context, keep time.Duration, limit int) (int, error) {
	return s.finishBatch(ctx, `status IN ('delivered', 'dead') AND created_at <= {now+}`,
		[]any{s.DBNow(), -keep.Microseconds()}, max(limit, 1), `DELETE FROM webhook_outbox`)
}

// finishBatch picks at most limit events that meet where (oldest first)
// and applies change to those of them that still meet it, in one
// transaction, and returns how many change reported: the condition is
// repeated in change's WHERE, so an event that another process took or
// finished meanwhile is neither changed nor counted, whether or not the
// engine honours SKIP LOCKED. change's placeholders come first, then the
// seqs', then where's.
func (s *Queue) finishBatch(ctx context.Context, where string, whereArgs []any, limit int, change string, changeArgs ...any) (int, error) {
	var n int
	err := s.outboxTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		n = 0
		rows, err := tx.QueryContext(ctx, s.Q(`SELECT seq FROM webhook_outbox WHERE `+where+
			` ORDER BY created_at LIMIT ?`)+s.D.SkipLockedSQL(), append(append([]any(nil), whereArgs...), limit)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		var seqs []any
		for rows.Next() {
			var seq int64
			if err := rows.Scan(&seq); err != nil {
				return err
			}
			seqs = append(seqs, seq)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows.Close()
		if len(seqs) == 0 {
			return nil
		}
		args := append(append(append([]any(nil), changeArgs...), seqs...), whereArgs...)
		res, err := tx.ExecContext(ctx, s.Q(change+` WHERE seq IN `+engine.Placeholders(len(seqs))+` AND `+where), args...)
		if err != nil {
			return err
		}
		k, err := engine.Affected(res)
		n = int(k)
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// OutboxAge returns how long the oldest pending event has waited, by the
// database's clock; 0 when none is pending.
func (s *Queue) OutboxAge(ctx context.Context) (time.Duration, error) {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	var oldest, now engine.TimeCol
	err := s.Pool.QueryRowContext(ctx, s.Q(`SELECT MIN(created_at), {now} FROM webhook_outbox WHERE status = 'pending'`),
		s.DBNow()).Scan(&oldest, &now)
	if err != nil {
		return 0, s.Classify(err)
	}
	if !oldest.Valid || !now.T.After(oldest.T) {
		return 0, nil
	}
	return now.T.Sub(oldest.T), nil
}
