package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

// claimSQL is the one decision that spends an allowance (SPEC §1): a single
// conditional decrement. Exactly one affected row means granted. The link
// is addressed by id, which the caller resolved from the token hash; the
// row is the same and the condition is evaluated under InnoDB's row lock
// (or SQLite's write lock), never from a value read earlier. Expiry is
// judged by the database's clock ({now}), so gateways whose clocks
// disagree still agree on when a link expired.
const claimSQL = `UPDATE links SET remaining = remaining - 1
WHERE id = ? AND remaining > 0 AND revoked_at IS NULL AND expires_at > {now}
  AND (account_id IS NULL OR account_id = ?)`

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
	if s.d.ClaimBatched != nil && !s.Webhooks {
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

// batchedClaimSQL is the claim's transaction but its COMMIT as one query,
// for dialects with ClaimBatched: the same decrement and grant as claim,
// the insert guarded by the decrement's ROW_COUNT(). Webhook events need
// statements of their own, so with webhooks on the ordinary transaction
// runs.
const batchedClaimSQL = "START TRANSACTION; " + claimSQL + `;
INSERT INTO grants (id, link_id, kind, account_id, status, created_at, client, session_id)
SELECT ?, ?, ?, ?, ?, ?, ?, ? FROM DUAL WHERE ROW_COUNT() = 1`

// claimBatched is Claim's transaction in two round trips (MySQL), with
// the same rules as inTx: detached from the caller's cancellation within
// Timeout, bounded retries of deadlocks, an unknown outcome ambiguous.
func (s *DB) claimBatched(ctx context.Context, g *ledger.Grant) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.timeout())
	defer cancel()
	args := []any{g.LinkID, s.dbNow(), g.AccountID,
		g.ID, g.LinkID, g.Kind, orNull(g.AccountID), g.Status, s.t(g.CreatedAt), g.Client, orNull(g.SessionID)}
	var granted bool
	err := s.retry(ctx, func() (err error) {
		granted, err = s.d.ClaimBatched(ctx, s.db, s.q(batchedClaimSQL), args)
		return err
	})
	switch {
	case errors.Is(err, ErrInFlight):
		return fmt.Errorf("%w: %v", ledger.ErrAmbiguous, err)
	case err != nil:
		return s.classify(err)
	case !granted:
		return errNoRow
	}
	return nil
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

// Refund restores the allowance of a granted claim and marks its grant
// refunded, in one transaction; a second refund changes nothing.
// Errors: ErrNotFound.
func (s *DB) Refund(ctx context.Context, grantID string) error {
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
