package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

// claimableSQL is the condition under which a link may be claimed, the
// one decision that spends an allowance (SPEC §1), written once for every
// decrement: by id (claimSQL, sessions) and by token hash
// (claimByTokenSQL). It is evaluated under InnoDB's row lock (or SQLite's
// write lock) in a single conditional UPDATE, never from a value read
// earlier; exactly one affected row means granted. Expiry is judged by
// the database's clock ({now}), so gateways whose clocks disagree still
// agree on when a link expired. Its argument is the caller's account.
// Link.Refusal only explains a refusal afterwards, from the row.
const claimableSQL = `remaining > 0 AND revoked_at IS NULL AND expires_at > {now}
  AND (account_id IS NULL OR account_id = ?)`

// claimSQL claims the link with the id its caller resolved from the token
// hash (a session mint).
const claimSQL = `UPDATE links SET remaining = remaining - 1
WHERE id = ? AND ` + claimableSQL

const insertGrantSQL = `INSERT INTO grants (id, link_id, kind, account_id, status, created_at, client, session_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`

// Claim spends one allowance and records the grant in one short
// transaction. Errors: ErrRefused (errors.As *ledger.RefusedError for the
// reason), ErrAmbiguous (with the grant whose fate is unknown, for the
// log), ErrUnavailable.
func (s *DB) Claim(ctx context.Context, req ledger.ClaimRequest) (*ledger.Grant, error) {
	now := s.now()
	g := newGrant(req, now, "")
	var err error
	if s.batched() {
		err = s.claimBatched(ctx, g)
	} else {
		err = s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if err := s.claim(ctx, tx, g); err != nil {
				return err
			}
			return s.enqueueClaim(ctx, tx, g, nil)
		})
	}
	switch {
	case errors.Is(err, errNoRow):
		return nil, s.refusal(ctx, req)
	case errors.Is(err, ledger.ErrAmbiguous):
		// The grant may or may not exist: hand its id back for the log.
		return g, err
	case err != nil:
		return nil, err
	}
	return g, nil
}

// ErrInFlight marks a failure of a batched claim's COMMIT: the claim's
// outcome is unknown (ledger.ErrAmbiguous).
var ErrInFlight = errors.New("sqlcore: the claim's outcome is unknown")

// batched reports whether claims run as a batch (Dialect.Batch). Webhook
// events need statements of their own, so with webhooks on the ordinary
// transaction runs.
func (s *DB) batched() bool { return s.d.Batch != nil && !s.Webhooks }

// grantInsertSQL inserts the grant only when the decrement just before it
// matched its row: ROW_COUNT() = 1. It reads the link id from the row
// ({from}), so that a claim by token hash needs no id.
const grantInsertSQL = `INSERT INTO grants (id, link_id, kind, account_id, status, created_at, client, session_id)
SELECT ?, id, ?, ?, ?, ?, ?, ? FROM links WHERE {from} = ? AND ROW_COUNT() = 1`

// grantedSQL reads whether the batch's grant exists: the outcome comes
// from the row itself, not from what the server said of each statement.
const grantedSQL = `(SELECT COUNT(*) FROM grants WHERE id = ?)`

// batchedClaimSQL is the claim's transaction but its COMMIT, as one query
// (Dialect.Batch): the same decrement and grant as claim.
var batchedClaimSQL = "START TRANSACTION; " + claimSQL + ";\n" +
	strings.Replace(grantInsertSQL, "{from}", "id", 1) + ";\nSELECT " + grantedSQL

// claimBatched is Claim's transaction in two round trips (MySQL), with
// the same rules as inTx: detached from the caller's cancellation within
// Timeout, bounded retries of deadlocks, an unknown outcome ambiguous.
func (s *DB) claimBatched(ctx context.Context, g *ledger.Grant) error {
	args := []any{g.LinkID, s.dbNow(), g.AccountID}
	args = append(args, s.grantArgs(g)...)
	args = append(args, g.LinkID, g.ID)
	var granted bool
	err := s.batch(ctx, batchedClaimSQL, args, func(rows *sql.Rows) (bool, error) {
		if !rows.Next() {
			return false, errors.New("sqlcore: the batch read no row")
		}
		var n int
		err := rows.Scan(&n)
		granted = err == nil && n == 1
		return granted, err
	})
	if err == nil && !granted {
		return errNoRow
	}
	return err
}

// grantArgs are g's values for grantInsertSQL, before its {from} value.
func (s *DB) grantArgs(g *ledger.Grant) []any {
	return []any{g.ID, g.Kind, orNull(g.AccountID), g.Status, s.t(g.CreatedAt), g.Client, orNull(g.SessionID)}
}

// batch runs query through Dialect.Batch with inTx's rules: detached from
// the caller's cancellation within Timeout, bounded retries of deadlocks,
// a failed COMMIT ambiguous.
func (s *DB) batch(ctx context.Context, query string, args []any, scan func(*sql.Rows) (bool, error)) error {
	ctx, cancel := s.detached(ctx)
	defer cancel()
	err := s.retry(ctx, func() error { return s.d.Batch(ctx, s.db, s.q(query), args, scan) })
	switch {
	case errors.Is(err, ErrInFlight):
		return fmt.Errorf("%w: %v", ledger.ErrAmbiguous, err)
	case errors.Is(err, ledger.ErrNotFound):
		return err
	case err != nil:
		return s.classify(err)
	}
	return nil
}

// claimByTokenSQL is LinkClaim's batch: the decrement of the link with
// the token hash when a GET claims it at once (Link.ClaimsAtOnce, in
// SQL), its grant, and the row as the transaction sees it with the
// database's clock and whether the grant exists.
var claimByTokenSQL = `START TRANSACTION;
UPDATE links SET remaining = remaining - 1
WHERE token_hash = ? AND delivery = 'stream' AND (confirm = FALSE OR ?) AND (retries = 0 OR ?) AND ` + claimableSQL + `;
` + strings.Replace(grantInsertSQL, "{from}", "token_hash", 1) + `;
SELECT ` + linkColumns + `, {now}, ` + grantedSQL + ` FROM links WHERE token_hash = ?`

// LinkClaim reads the link and claims it when a GET claims it at once,
// in one transaction: on MySQL as one batch and its COMMIT (two round
// trips), elsewhere as one ordinary transaction. A refusal is explained
// from the row that transaction read, by its clock: no second read.
func (s *DB) LinkClaim(ctx context.Context, hash []byte, req ledger.ClaimRequest, confirmed bool) (ledger.ClaimOutcome, error) {
	var (
		o   ledger.ClaimOutcome
		err error
	)
	if s.batched() {
		o, err = s.claimByTokenBatched(ctx, hash, req, confirmed)
	} else {
		o, err = s.claimByTokenInTx(ctx, hash, req, confirmed)
	}
	if err == nil && o.Grant == nil && o.Link.ClaimsAtOnce(confirmed, req.RetriesChecked) {
		o.Refusal = o.Link.Refusal(req.AccountID, o.Link.ReadAt)
		if o.Refusal == "" {
			// Claimable as the row reads now, so it was the allowance
			// that ran out at the decision and a top-up landed since.
			o.Refusal = ledger.ReasonExhausted
		}
	}
	return o, err
}

func (s *DB) claimByTokenBatched(ctx context.Context, hash []byte, req ledger.ClaimRequest, confirmed bool) (ledger.ClaimOutcome, error) {
	g := newGrant(req, s.now(), "")
	args := []any{hash, confirmed, req.RetriesChecked, s.dbNow(), req.AccountID}
	args = append(args, s.grantArgs(g)...)
	args = append(args, hash, s.dbNow(), g.ID, hash)
	var (
		l       *ledger.Link
		granted bool
	)
	err := s.batch(ctx, claimByTokenSQL, args, func(rows *sql.Rows) (bool, error) {
		if !rows.Next() {
			if err := rows.Err(); err != nil {
				return false, err
			}
			return false, ledger.ErrNotFound
		}
		var (
			now timeCol
			n   int
			err error
		)
		l, err = scanLink(withMore(rows, &now, &n))
		if err != nil {
			return false, err
		}
		l.ReadAt = now.T
		granted = n == 1
		return granted, nil
	})
	switch {
	case errors.Is(err, ledger.ErrAmbiguous):
		// Only COMMIT can fail so: the row was read.
		g.LinkID = l.ID
		return ledger.ClaimOutcome{Link: l, Grant: g}, err
	case err != nil:
		return ledger.ClaimOutcome{}, err
	case !granted:
		return ledger.ClaimOutcome{Link: l}, nil
	}
	g.LinkID = l.ID
	return ledger.ClaimOutcome{Link: l, Grant: g}, nil
}

// claimByTokenInTx is LinkClaim as one ordinary transaction: the row,
// then, when a GET claims it at once, Claim's decrement and grant (and
// its webhook event).
func (s *DB) claimByTokenInTx(ctx context.Context, hash []byte, req ledger.ClaimRequest, confirmed bool) (ledger.ClaimOutcome, error) {
	var (
		l *ledger.Link
		g *ledger.Grant
	)
	err := s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var now timeCol
		var err error
		g = nil
		l, err = scanLink(withNow(tx.QueryRowContext(ctx,
			s.q(`SELECT `+linkColumns+`, {now} FROM links WHERE token_hash = ?`), s.dbNow(), hash), &now))
		if err != nil {
			return err
		}
		l.ReadAt = now.T
		if !l.ClaimsAtOnce(confirmed, req.RetriesChecked) {
			return nil
		}
		req.LinkID = l.ID
		claim := newGrant(req, s.now(), "")
		switch err := s.claim(ctx, tx, claim); {
		case errors.Is(err, errNoRow):
			return nil // refused: LinkClaim explains it from the row
		case err != nil:
			return err
		}
		if err := s.enqueueClaim(ctx, tx, claim, nil); err != nil {
			return err
		}
		g = claim
		l.Remaining--
		return nil
	})
	switch {
	case errors.Is(err, ledger.ErrAmbiguous):
		return ledger.ClaimOutcome{Link: l, Grant: g}, err
	case err != nil:
		return ledger.ClaimOutcome{}, s.classify(err)
	}
	return ledger.ClaimOutcome{Link: l, Grant: g}, nil
}

// errNoRow leaves a transaction whose conditional update matched nothing.
var errNoRow = errors.New("sqlcore: condition not met")

func newGrant(req ledger.ClaimRequest, now time.Time, sessionID string) *ledger.Grant {
	client := req.Client
	if len(client) > 255 {
		client = client[:255]
	}
	return &ledger.Grant{
		ID: newID(), LinkID: req.LinkID, Kind: req.Kind, AccountID: req.AccountID,
		Status: ledger.StatusGranted, CreatedAt: now, Client: client, SessionID: sessionID,
	}
}

func (s *DB) claim(ctx context.Context, tx *sql.Tx, g *ledger.Grant) error {
	res, err := tx.ExecContext(ctx, s.q(claimSQL), g.LinkID, s.dbNow(), g.AccountID)
	if err != nil {
		return err
	}
	n, err := affected(res)
	if err != nil {
		return err
	}
	if n != 1 {
		return errNoRow
	}
	_, err = tx.ExecContext(ctx, insertGrantSQL, g.ID, g.LinkID, g.Kind, orNull(g.AccountID),
		g.Status, s.t(g.CreatedAt), g.Client, orNull(g.SessionID))
	return err
}

// refusal explains a refused claim for logs and the admin API, by the
// database's clock as the decision was. It reads after the decision was
// made; it never changes the decision.
func (s *DB) refusal(ctx context.Context, req ledger.ClaimRequest) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var now timeCol
	l, err := scanLink(withNow(s.db.QueryRowContext(ctx,
		s.q(`SELECT `+linkColumns+`, {now} FROM links WHERE id = ?`), s.dbNow(), req.LinkID), &now))
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return ledger.Refused(ledger.ReasonUnknown)
	case err != nil:
		// The refusal stands; only its explanation is missing.
		return ledger.Refused(ledger.ReasonUnknown)
	}
	r := l.Refusal(req.AccountID, now.T)
	if r == "" {
		// Claimable now, so it was the allowance that ran out at the
		// decision and a top-up landed since.
		r = ledger.ReasonExhausted
	}
	return ledger.Refused(r)
}

// GrantRefund restores the allowance of a granted claim and marks its grant
// refunded, in one transaction; a second refund changes nothing.
// Errors: ErrNotFound.
func (s *DB) GrantRefund(ctx context.Context, grantID string) error {
	now := s.t(s.now())
	return s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE grants SET status = 'refunded', refunded_at = ?
WHERE id = ? AND status = 'granted'`, now, grantID)
		if err != nil {
			return err
		}
		n, err := affected(res)
		if err != nil {
			return err
		}
		if n == 0 {
			var status string
			err := tx.QueryRowContext(ctx, `SELECT status FROM grants WHERE id = ?`, grantID).Scan(&status)
			if errors.Is(err, sql.ErrNoRows) {
				return ledger.ErrNotFound
			}
			return err // already refunded: nothing to do
		}
		_, err = tx.ExecContext(ctx, `UPDATE links SET remaining = remaining + 1
WHERE id = (SELECT link_id FROM grants WHERE id = ?)`, grantID)
		if err != nil {
			return err
		}
		return s.enqueueRefund(ctx, tx, grantID)
	})
}
