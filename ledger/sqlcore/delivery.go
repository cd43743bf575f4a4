package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
	"github.com/dlgate/dlgate/ledger/sqlcore/outbox"
	"github.com/dlgate/dlgate/sessions"
)

// Delivery evidence (SPEC §1, docs/design.md "Delivery evidence"): what
// each grant's client acknowledged, recorded when a stream response ends
// and when a process reports on a session, and the retries of an
// interrupted stream download it allows.

var _ ledger.Deliveries = (*DB)(nil)

// recordStreamSQL records the end of attempt k of a stream grant, when k
// has begun (attempts ≥ k) and is not recorded yet (attempts_ended < k):
// so each attempt lands once, and the row count says whether this one
// did. The most bytes acknowledged over the attempts stay (each attempt
// sends from byte 0), at most the version's size; the status follows
// them and never leaves complete; delivered_at is stamped when it first
// becomes complete, interrupted_at whenever an attempt ends short; the
// lease of a retry ends with the attempt it leased; the first record's
// client keys stay.
//
// The version's size is an argument (StreamDelivery.Size), not a
// subquery on links: an UPDATE's subquery reads its rows with a shared
// lock on InnoDB under REPEATABLE READ (for the binlog's sake), so a
// record would wait for the claim transaction holding a hot link's row,
// and a transaction of records would hold that row from the claims
// until its COMMIT (TestAStreamRecordNeverLocksItsLinksRow).
//
// MySQL assigns a SET list left to right, each expression seeing the
// columns assigned before it, where SQLite (and the standard) see the row
// as it was: no expression here reads a column assigned before it.
//
// Arguments: acked, size, at, acked, size, at, acked, size, acked, acked,
// acked, size, size, acked, measured, keys, k, k, id, k, k.
const recordStreamSQL = `UPDATE grants SET
  delivered_at = CASE WHEN delivered_at IS NULL AND ? >= ? THEN ? ELSE delivered_at END,
  interrupted_at = CASE WHEN ? < ? THEN ? ELSE interrupted_at END,
  delivery_status = CASE WHEN delivery_status = 'complete' OR ? >= ? THEN 'complete'
    WHEN bytes_acked > 0 OR ? > 0 THEN 'partial' ELSE 'none' END,
  bytes_acked = CASE WHEN bytes_acked >= ? THEN bytes_acked WHEN ? >= ? THEN ? ELSE ? END,
  delivery_written = CASE WHEN ? THEN delivery_written ELSE 1 END,
  client_keys = COALESCE(client_keys, ?),
  attempt_until = CASE WHEN attempts = ? THEN NULL ELSE attempt_until END,
  attempts_ended = ?
WHERE id = ? AND kind = 'stream' AND status = 'granted' AND attempts >= ? AND attempts_ended < ?`

// GrantDeliveryRecord records the end of one response of a stream grant
// (recordStreamSQL). With webhooks off it is that one UPDATE, autocommitted,
// which locks the grant's row and no other. With webhooks on it runs in
// a transaction that first locks the grant's row, so that it knows the
// status the UPDATE changed, and writes grant.delivered when the grant
// became complete and grant.interrupted when the response ended short:
// each at most once per attempt, because an attempt's record lands once
// (the events' sequence takes the link's row, as every event does). With
// RecordWindow the records of the window go together (records.go); one
// alone in its window is written as here. A record of an attempt already
// recorded (or of a refunded grant) changes nothing and returns nil.
// Errors: ErrNotFound, ErrInvalid (a session's grant, an attempt not
// begun, bad keys), ErrUnavailable.
func (s *DB) GrantDeliveryRecord(ctx context.Context, d ledger.StreamDelivery) error {
	r, err := s.streamRecord(ctx, d)
	if err != nil {
		return err
	}
	if s.RecordWindow > 0 {
		return s.records.add(ctx, s, r)
	}
	return s.recordAlone(ctx, r)
}

// recordAlone writes one record: with webhooks off its UPDATE alone, in
// autocommit; with webhooks on a transaction of its own (recordInTx).
func (s *DB) recordAlone(ctx context.Context, r streamRecord) error {
	if s.Webhooks {
		return s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error { return s.recordInTx(ctx, tx, r) })
	}
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	res, err := s.Exec(ctx, recordStreamSQL, r.args...)
	if err != nil {
		return err
	}
	if n, err := engine.Affected(res); err != nil || n == 1 {
		return s.Classify(err)
	}
	return s.Classify(s.unrecorded(ctx, s.Pool, r.d))
}

// streamRecord is one stream delivery record, checked, with the
// arguments of recordStreamSQL.
type streamRecord struct {
	d    ledger.StreamDelivery
	at   time.Time
	keys any // grants.client_keys as the record writes it
	args []any
}

// streamRecord checks d and makes its record; without d.Size it reads
// the size of the grant's version with a plain read (no lock: a link's
// version never changes). Errors: ErrInvalid, ErrNotFound, ErrUnavailable.
func (s *DB) streamRecord(ctx context.Context, d ledger.StreamDelivery) (streamRecord, error) {
	if d.GrantID == "" || d.Attempt < 1 || d.BytesAcked < 0 || d.Size < 0 {
		return streamRecord{}, fmt.Errorf("%w: a grant id, an attempt ≥ 1 and bytes and size ≥ 0 are required", ledger.ErrInvalid)
	}
	keys, err := joinClientKeys(d.ClientKeys)
	if err != nil {
		return streamRecord{}, err
	}
	if d.Size == 0 {
		bctx, cancel := s.Bound(ctx)
		err := s.Pool.QueryRowContext(bctx, `SELECT l.size FROM grants g JOIN links l ON l.id = g.link_id WHERE g.id = ?`, d.GrantID).Scan(&d.Size)
		cancel()
		if engine.IsNoRows(err) {
			return streamRecord{}, ledger.ErrNotFound
		} else if err != nil {
			return streamRecord{}, s.Classify(err)
		}
	}
	at := s.Stamp()
	a, z, k := d.BytesAcked, d.Size, d.Attempt
	return streamRecord{d: d, at: at, keys: keys, args: []any{a, z, s.TimeArg(at), a, z, s.TimeArg(at), a, z, a, a, a, z, z, a, d.Measured, keys, k, k, d.GrantID, k, k}}, nil
}

// recordInTx writes r inside tx: the UPDATE and, with webhooks on, first
// the grant's row locked (to know the status the UPDATE changed) and then
// the events it calls for. What explains a record that changed nothing
// (unrecorded) is its outcome, not the transaction's failure.
func (s *DB) recordInTx(ctx context.Context, tx *sql.Tx, r streamRecord) error {
	d := r.d
	var before ledger.DeliveryStatus
	if s.Webhooks {
		err := tx.QueryRowContext(ctx, `SELECT delivery_status FROM grants WHERE id = ?`+s.D.LockRows, d.GrantID).Scan(&before)
		if engine.IsNoRows(err) {
			return ledger.ErrNotFound
		} else if err != nil {
			return err
		}
	}
	res, err := tx.ExecContext(ctx, recordStreamSQL, r.args...)
	if err != nil {
		return err
	}
	if n, err := engine.Affected(res); err != nil || n == 0 {
		if err == nil {
			err = s.unrecorded(ctx, tx, d)
		}
		return err
	}
	if !s.Webhooks {
		return nil
	}
	g, size, err := s.grantInTx(ctx, tx, d.GrantID)
	if err != nil {
		return err
	}
	var evs []ledger.Event
	if before != ledger.DeliveryComplete && g.Delivery.Status == ledger.DeliveryComplete {
		evs = append(evs, outbox.DeliveryEvent(ledger.EventGrantDelivered, g, size, "", r.at))
	}
	if d.BytesAcked < size {
		evs = append(evs, outbox.DeliveryEvent(ledger.EventGrantInterrupted, g, size, ledger.InterruptedEndedShort, r.at))
	}
	return s.EnqueueAll(ctx, tx, evs...)
}

// unrecorded explains a stream record that changed no row: an unknown
// grant (ErrNotFound), one of a session or an attempt that has not begun
// (ErrInvalid), else an attempt recorded before or a refunded grant,
// which is nothing to do (nil).
func (s *DB) unrecorded(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, d ledger.StreamDelivery) error {
	var g recordedGrant
	err := q.QueryRowContext(ctx, `SELECT kind, attempts FROM grants WHERE id = ?`, d.GrantID).Scan(&g.kind, &g.attempts)
	switch {
	case engine.IsNoRows(err):
		return ledger.ErrNotFound
	case err != nil:
		return err
	}
	return g.unrecorded(d)
}

// recordedGrant is what explains a stream record that changed no row of
// its grant.
type recordedGrant struct {
	kind     string
	attempts int
}

// unrecorded is why d changed nothing of g, nil when there was nothing
// to change.
func (g recordedGrant) unrecorded(d ledger.StreamDelivery) error {
	switch {
	case g.kind != ledger.KindStream:
		return fmt.Errorf("%w: grant %s is a session's: its session reports its delivery", ledger.ErrInvalid, d.GrantID)
	case d.Attempt > g.attempts:
		return fmt.Errorf("%w: attempt %d of grant %s has not begun", ledger.ErrInvalid, d.Attempt, d.GrantID)
	}
	return nil
}

// joinClientKeys is keys as grants.client_keys holds them, " k1 k2 ", so
// that a key matches as the substring " key " (keys hold no space); nil
// (NULL) for none. Errors: ErrInvalid.
func joinClientKeys(keys []string) (any, error) {
	if len(keys) > ledger.MaxClientKeys {
		return nil, fmt.Errorf("%w: at most %d client keys", ledger.ErrInvalid, ledger.MaxClientKeys)
	}
	if err := validAffinityKeys(keys); err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		return nil, nil
	}
	return " " + strings.Join(keys, " ") + " ", nil
}

// SessionDeliveryRecord gives back d.Return unsent bytes and merges d.Acked
// into the session's coverage. With ranges to merge it is one transaction
// that locks the session's row and its grant's (so processes merging at
// once each see the other's union), writes the union and the return in
// one UPDATE, and writes the grant only when its status moves (none →
// partial → complete: at most twice in a session's life), with
// grant.delivered in the same transaction when it became complete.
// Without ranges it is one UPDATE, as BudgetReturn. Either way it notes
// the report (reported_at). Errors: ErrNotFound, ErrInvalid,
// ErrUnavailable.
func (s *DB) SessionDeliveryRecord(ctx context.Context, d ledger.SessionDelivery) error {
	if d.SessionID == "" || d.Return < 0 {
		return fmt.Errorf("%w: a session id and a return ≥ 0 are required", ledger.ErrInvalid)
	}
	if d.Acked.IsEmpty() {
		ctx, cancel := s.Bound(ctx)
		defer cancel()
		res, err := s.Exec(ctx, s.Q(returnSQL), d.Return, d.Return, s.DBNow(), d.SessionID)
		if err != nil {
			return err
		}
		return s.matched(res, ledger.ErrNotFound)
	}
	at := s.Stamp()
	return s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var (
			stored  engine.NullStr
			size    int64
			grantID string
			before  ledger.DeliveryStatus
		)
		err := tx.QueryRowContext(ctx, `SELECT s.coverage, s.size, s.grant_id, g.delivery_status
FROM sessions s JOIN grants g ON g.id = s.grant_id WHERE s.id = ?`+s.D.LockRows, d.SessionID).Scan(&stored, &size, &grantID, &before)
		if engine.IsNoRows(err) {
			return ledger.ErrNotFound
		} else if err != nil {
			return err
		}
		c, err := sessions.DecodeCoverage(string(stored))
		if err != nil {
			return fmt.Errorf("sqlcore: coverage of session %s: %w", d.SessionID, err)
		}
		c.Union(d.Acked)
		_, err = tx.ExecContext(ctx, s.Q(`UPDATE sessions SET coverage = ?, delivery_written = CASE WHEN ? THEN delivery_written ELSE 1 END,
  bytes_drawn = CASE WHEN bytes_drawn > ? THEN bytes_drawn - ? ELSE 0 END, reported_at = {now} WHERE id = ?`),
			engine.OrNull(c.Encode()), d.Measured, d.Return, d.Return, s.DBNow(), d.SessionID)
		if err != nil {
			return err
		}
		after := ledger.DeliveryPartial
		if c.Complete(size) {
			after = ledger.DeliveryComplete
		}
		if after == before || before == ledger.DeliveryComplete {
			return nil
		}
		var done any
		if after == ledger.DeliveryComplete {
			done = s.TimeArg(at)
		}
		res, err := tx.ExecContext(ctx, `UPDATE grants SET delivery_status = ?, bytes_acked = ?, delivered_at = COALESCE(delivered_at, ?)
WHERE id = ? AND delivery_status = ?`, string(after), c.Bytes(size), done, grantID, string(before))
		if err != nil {
			return err
		}
		if n, err := engine.Affected(res); err != nil || n == 0 || after != ledger.DeliveryComplete || !s.Webhooks {
			return err
		}
		g, size, err := s.grantInTx(ctx, tx, grantID)
		if err != nil {
			return err
		}
		return s.Enqueue(ctx, tx, outbox.DeliveryEvent(ledger.EventGrantDelivered, g, size, "", at))
	})
}

// endedSession is a session whose end interrupt announces: why it ended
// is told from its row and the database's clock of the end.
type endedSession struct {
	revoked bool
	expired bool
}

// interrupt marks the grants of the sessions that where selects (a
// condition on sessions s, with its arguments) as interrupted at at,
// those neither complete nor marked before, inside tx, the transaction
// that ends those sessions, and — with webhooks on — writes their
// grant.interrupted with the reason reason gives. The grants are read
// with a locking read (a current read on every engine), so two
// transactions ending one session, or a revocation racing the sweeper,
// mark its grant once: the second finds it marked.
func (s *DB) interrupt(ctx context.Context, tx *sql.Tx, at time.Time, where string, args []any, reason func(endedSession) string) error {
	rows, err := tx.QueryContext(ctx, s.Q(`SELECT g.id, g.link_id, s.revoked_at, s.expires_at, {now}
FROM sessions s JOIN grants g ON g.id = s.grant_id
WHERE `+where+` AND g.delivery_status <> 'complete' AND g.interrupted_at IS NULL`)+s.D.LockRows,
		append([]any{s.DBNow()}, args...)...)
	if err != nil {
		return err
	}
	type marked struct {
		id, link string
		why      string
	}
	var all []marked
	for rows.Next() {
		var (
			m                     marked
			revoked, expires, now engine.TimeCol
		)
		if err := rows.Scan(&m.id, &m.link, &revoked, &expires, &now); err != nil {
			rows.Close()
			return err
		}
		m.why = reason(endedSession{revoked: revoked.Valid, expired: !expires.T.After(now.T)})
		all = append(all, m)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(all) == 0 {
		return err
	}
	ids := make([]any, 0, len(all)+1)
	ids = append(ids, s.TimeArg(at))
	for _, m := range all {
		ids = append(ids, m.id)
	}
	_, err = tx.ExecContext(ctx, `UPDATE grants SET interrupted_at = ? WHERE id IN `+engine.Placeholders(len(all))+`
  AND delivery_status <> 'complete' AND interrupted_at IS NULL`, ids...)
	if err != nil || !s.Webhooks {
		return err
	}
	// A link's events go in one enqueue, in the order read.
	byLink := map[string][]ledger.Event{}
	var links []string
	for _, m := range all {
		g, size, err := s.grantInTx(ctx, tx, m.id)
		if err != nil {
			return err
		}
		if _, ok := byLink[m.link]; !ok {
			links = append(links, m.link)
		}
		byLink[m.link] = append(byLink[m.link], outbox.DeliveryEvent(ledger.EventGrantInterrupted, g, size, m.why, at))
	}
	for _, link := range links {
		if err := s.EnqueueAll(ctx, tx, byLink[link]...); err != nil {
			return err
		}
	}
	return nil
}

// sweepReason is why the sweeper ended a session: revoked, expired, or
// else its budget was spent.
func sweepReason(e endedSession) string {
	switch {
	case e.revoked:
		return ledger.InterruptedRevoked
	case e.expired:
		return ledger.InterruptedExpired
	}
	return ledger.InterruptedBudgetSpent
}

// retryableSQL is what makes a stream grant one a retry may serve again:
// granted (not refunded), not complete, and no attempt in flight — its
// last attempt's end recorded, or the lease of the retry in flight
// lapsed by the database's clock. Argument: now.
const retryableSQL = `kind = 'stream' AND status = 'granted' AND delivery_status <> 'complete'
  AND (attempts_ended >= attempts OR attempt_until <= {now})`

// retryCandidateSQL selects what GrantRetryBegin reads of the caller's
// grants of a link: those a retry may serve (retryableSQL) and those
// with a retry in flight (a lease not recorded as ended), the newest
// first, while the link lives by the database's clock. A first attempt
// still streaming has no lease and is neither. A plain read: no lock, on
// the grants or on the link's row. Arguments: now, link id, now, then
// the client's.
const retryCandidateSQL = `SELECT id, attempts, attempts_ended, attempt_until, {now} FROM grants
WHERE link_id = ? AND kind = 'stream' AND status = 'granted' AND delivery_status <> 'complete'
  AND (attempts_ended >= attempts OR attempt_until IS NOT NULL)
  AND EXISTS (SELECT 1 FROM links l WHERE l.id = grants.link_id AND l.revoked_at IS NULL AND l.expires_at > {now})
  AND `

// retryRead is a grant as GrantRetryBegin reads it.
type retryRead struct {
	id             string
	attempts, done int
	until, now     engine.TimeCol
}

// inFlight is the refusal of a retry while another attempt of the grant
// is in flight (its lease not lapsed), nil when none is.
func (r retryRead) inFlight() error {
	if r.done >= r.attempts || !r.until.Valid || !r.until.T.After(r.now.T) {
		return nil
	}
	return &ledger.RetryInFlightError{GrantID: r.id, Left: r.until.T.Sub(r.now.T)}
}

// GrantRetryBegin picks the caller's newest stream grant of the link
// that is retryable or has a retry in flight, with a plain read. One in
// flight refuses the caller (ErrRetryInFlight): it is the same client's
// download under way, and a claim would spend another. Otherwise one
// conditional UPDATE starts its next attempt and decides: the attempts it
// read (so of two concurrent retries exactly one matches), still
// retryable, still the caller's, and its link live by the database's
// clock (not revoked, not expired, the account it is bound to) with
// attempts below 1 + retries. The loser reads the grant again to tell
// another retry in flight (ErrRetryInFlight) from a grant no longer
// retryable (ErrNotFound). The attempt is in flight until its record or
// the lease's end. Nothing is claimed. Errors: ErrNotFound,
// ErrRetryInFlight, ErrInvalid, ErrUnavailable.
func (s *DB) GrantRetryBegin(ctx context.Context, req ledger.RetryRequest) (*ledger.Grant, error) {
	who, whoArgs, err := retryClient(req)
	if err != nil {
		return nil, err
	}
	lease := req.Lease
	if lease == 0 {
		lease = ledger.DefaultRetryLease
	}
	if req.LinkID == "" || lease < 0 {
		return nil, fmt.Errorf("%w: a link id and a lease ≥ 0 are required", ledger.ErrInvalid)
	}
	// A retry is served only while its link lives: a link the refusal
	// cache holds revoked or expired (for good, refusals.go) has none to
	// serve, and its GETs cost no statement here either.
	if e, ok := s.keptByID(req.LinkID); ok {
		if o, ok := s.refuses(e, req.AccountID); ok && (o.Refusal == ledger.ReasonRevoked || o.Refusal == ledger.ReasonExpired) {
			return nil, ledger.ErrNotFound
		}
	}
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	read := func(where string, args ...any) (retryRead, error) {
		var r retryRead
		err := s.Pool.QueryRowContext(ctx, s.Q(retryCandidateSQL+where), append([]any{s.DBNow(), req.LinkID, s.DBNow()}, args...)...).
			Scan(&r.id, &r.attempts, &r.done, &r.until, &r.now)
		if engine.IsNoRows(err) {
			return r, ledger.ErrNotFound
		}
		return r, s.Classify(err)
	}
	seen, err := read(who+`
ORDER BY created_at DESC, id DESC LIMIT 1`, whoArgs...)
	if err != nil {
		return nil, err
	}
	if err := seen.inFlight(); err != nil {
		return nil, err
	}
	args := []any{s.DBNow(), lease.Microseconds(), seen.id, seen.attempts, s.DBNow()}
	args = append(args, whoArgs...)
	args = append(args, s.DBNow(), req.AccountID)
	res, err := s.Exec(ctx, s.Q(`UPDATE grants SET attempts = attempts + 1, attempt_until = {now+}
WHERE id = ? AND attempts = ? AND `+retryableSQL+` AND `+who+`
  AND EXISTS (SELECT 1 FROM links l WHERE l.id = grants.link_id AND l.revoked_at IS NULL AND l.expires_at > {now}
    AND grants.attempts < 1 + l.retries AND (l.account_id IS NULL OR l.account_id = ?))`), args...)
	if err != nil {
		return nil, err
	}
	if err := s.matched(res, ledger.ErrNotFound); err != nil {
		if !errors.Is(err, ledger.ErrNotFound) {
			return nil, err
		}
		// Lost: to a retry of the same grant that began meanwhile, or
		// the grant or its link changed.
		now, rerr := read(`id = ?`, seen.id)
		if rerr == nil && now.attempts > seen.attempts {
			if busy := now.inFlight(); busy != nil {
				return nil, busy
			}
		}
		return nil, err
	}
	g, _, err := s.grantByID(ctx, s.Pool, seen.id, "")
	return g, s.Classify(err)
}

// retryClient is the condition on grants that names the caller of req: a
// recorded client key, or with none the verified account. Errors:
// ErrInvalid.
func retryClient(req ledger.RetryRequest) (string, []any, error) {
	if len(req.ClientKeys) == 0 {
		if req.AccountID == "" {
			return "", nil, fmt.Errorf("%w: a retry names its client: client keys, or the verified account", ledger.ErrInvalid)
		}
		return `account_id = ?`, []any{req.AccountID}, nil
	}
	if len(req.ClientKeys) > 8 {
		return "", nil, fmt.Errorf("%w: at most 8 client keys", ledger.ErrInvalid)
	}
	if err := validAffinityKeys(req.ClientKeys); err != nil {
		return "", nil, err
	}
	// INSTR is the same function on MySQL, MariaDB, TiDB and SQLite,
	// case-sensitive under the column's binary collation.
	conds := make([]string, len(req.ClientKeys))
	args := make([]any, len(req.ClientKeys))
	for i, k := range req.ClientKeys {
		conds[i] = `INSTR(client_keys, ?) > 0`
		args[i] = " " + k + " "
	}
	return "(" + strings.Join(conds, " OR ") + ")", args, nil
}

// GrantRetryRenew extends the lease of the retry attempt in flight.
// Errors: ErrNotFound when it is not in flight any more, ErrUnavailable.
func (s *DB) GrantRetryRenew(ctx context.Context, grantID string, attempt int, lease time.Duration) error {
	if grantID == "" || attempt < 2 || lease <= 0 {
		return fmt.Errorf("%w: a grant id, a retry's attempt (≥ 2) and a lease are required", ledger.ErrInvalid)
	}
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	res, err := s.Exec(ctx, s.Q(`UPDATE grants SET attempt_until = {now+}
WHERE id = ? AND attempts = ? AND attempts_ended < ? AND attempt_until IS NOT NULL`),
		s.DBNow(), lease.Microseconds(), grantID, attempt, attempt)
	if err != nil {
		return err
	}
	return s.matched(res, fmt.Errorf("%w: attempt %d of grant %s is not in flight", ledger.ErrNotFound, attempt, grantID))
}

// matched is nil when the statement of res matched a row, else none (or
// why its row count is unknown).
func (s *DB) matched(res sql.Result, none error) error {
	n, err := engine.Affected(res)
	switch {
	case err != nil:
		return s.Classify(err)
	case n == 0:
		return none
	}
	return nil
}

// grantInTx reads grant id as GrantList shows it, with its version's
// size, inside tx, after the change an event announces (a transaction
// sees its own writes). The read locks the grant's and its session's rows
// (Dialect.LockRows): a current read on every engine, so that an event
// carries the coverage as it is, not as the transaction's snapshot had it
// (TiDB's is taken at BEGIN); the link's size, which never changes, is
// read in a subquery, which the lock does not reach.
func (s *DB) grantInTx(ctx context.Context, tx *sql.Tx, id string) (*ledger.Grant, int64, error) {
	return s.grantByID(ctx, tx, id, s.D.LockRows)
}

// grantByID reads grant id through q, the query ending with suffix.
func (s *DB) grantByID(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, id, suffix string) (*ledger.Grant, int64, error) {
	var size int64
	g, err := scanGrant(engine.WithMore(q.QueryRowContext(ctx, `SELECT `+grantColumns+`,
  (SELECT l.size FROM links l WHERE l.id = g.link_id)`+grantFrom+` WHERE g.id = ?`+suffix, id), &size), &size)
	if engine.IsNoRows(err) {
		return nil, 0, ledger.ErrNotFound
	}
	return g, size, err
}

func validAffinityKeys(keys []string) error {
	for _, k := range keys {
		if k == "" || len(k) > ledger.MaxAffinityKey {
			return fmt.Errorf("%w: an affinity key is 1 to %d characters", ledger.ErrInvalid, ledger.MaxAffinityKey)
		}
		for i := 0; i < len(k); i++ {
			if k[i] <= 0x20 || k[i] > 0x7e {
				return fmt.Errorf("%w: an affinity key is visible ASCII", ledger.ErrInvalid)
			}
		}
	}
	return nil
}

// returnSQL gives back unsent budget and notes when a process reported on
// the session, by the database's clock. The CASE is a floor: a return can
// never push the counter below zero even if a caller returned more than
// it drew. Arguments: n, n, now, session id.
const returnSQL = `UPDATE sessions SET bytes_drawn = CASE WHEN bytes_drawn > ? THEN bytes_drawn - ? ELSE 0 END,
  reported_at = {now} WHERE id = ?`
