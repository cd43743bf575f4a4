package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// LinkClaim is the download path's one claim call: it reads the link
// with token hash hash and, when a GET of its URL claims it at once
// (Link.ClaimsAtOnce(confirmed, req.RetriesChecked)), claims it, in one
// transaction that may decide other claims of this process with it
// (claimtx.go, group.go). A refusal is explained from the row that
// transaction locked, by its clock: no second read. A link seen
// unclaimable may be refused again from the refusal cache (refusals.go)
// without a statement; the row of a link this claim did not claim at
// once (a session link, a landing page) is kept there too when it would
// refuse the caller, for the mint or the confirmation that follows.
// req.LinkID is ignored. Errors: ErrNotFound, ErrAmbiguous (with the
// outcome's grant, and its link when the row was read), ErrUnavailable.
func (s *DB) LinkClaim(ctx context.Context, hash []byte, req ledger.ClaimRequest, confirmed bool) (ledger.ClaimOutcome, error) {
	if o, ok := s.cachedRefusal(hash, req.AccountID, confirmed, req.RetriesChecked); ok {
		return o, nil
	}
	req.LinkID = ""
	c := &claim{hash: hash, req: req, confirmed: confirmed, grant: newGrant(req, s.Stamp(), "")}
	if id, ok := s.ids.get(hash); ok {
		c.linkID = id
	}
	began, epoch := time.Now(), s.refusalEpoch()
	s.submit(ctx, c)
	o, err := c.outcome()
	if err == nil && o.Link != nil && o.Grant == nil && (o.Refusal != "" || o.Link.Refusal(req.AccountID, o.Link.ReadAt) != "") {
		s.noteRefusal(o.Link, began, epoch)
	}
	return o, err
}

// GrantRefund restores the allowance of a granted claim and marks its grant
// refunded, in one transaction; a second refund changes nothing. The
// session of a refunded session grant is revoked with it: nobody was told
// its URL (the refund is for a claim whose answer was an error), and a
// mint replayed for its Idempotency-Key must not hand out a session that
// costs nothing. The link's refusal, if this process keeps one, is
// forgotten.
// Errors: ErrNotFound.
func (s *DB) GrantRefund(ctx context.Context, grantID string) error {
	now := s.TimeArg(s.Stamp())
	var link string
	err := s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE grants SET status = 'refunded', refunded_at = ?
WHERE id = ? AND status = 'granted'`, now, grantID)
		if err != nil {
			return err
		}
		n, err := engine.Affected(res)
		if err != nil {
			return err
		}
		var status string
		var session engine.NullStr
		err = tx.QueryRowContext(ctx, `SELECT link_id, status, session_id FROM grants WHERE id = ?`, grantID).Scan(&link, &status, &session)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return ledger.ErrNotFound
		case err != nil || n == 0:
			return err // already refunded: nothing to do
		}
		_, err = tx.ExecContext(ctx, `UPDATE links SET remaining = remaining + 1 WHERE id = ?`, link)
		if err != nil {
			return err
		}
		if session != "" {
			// The session of a refunded grant serves nothing more.
			if _, err = tx.ExecContext(ctx, `UPDATE sessions SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, now, string(session)); err != nil {
				return err
			}
		}
		return s.EnqueueRefund(ctx, tx, grantID)
	})
	if link != "" {
		s.forgetRefusal(link)
	}
	return err
}
