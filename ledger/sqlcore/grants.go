package sqlcore

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
	"github.com/dlgate/dlgate/sessions"
)

// grantColumns are a grant's columns with its delivery evidence, in
// scanGrant's order: a session's grant reads its coverage from the
// session row (grantFrom), where the session's reports merge it.
const grantColumns = `g.id, g.link_id, g.kind, g.account_id, g.status, g.created_at, g.refunded_at, g.client,
  g.session_id, COALESCE(s.affinity_reuses, 0), g.delivery_status, g.bytes_acked, g.delivery_written,
  g.delivered_at, g.interrupted_at, g.attempts, g.attempts_ended, s.coverage, COALESCE(s.delivery_written, 0)`

const grantFrom = ` FROM grants g LEFT JOIN sessions s ON s.id = g.session_id`

// scanGrant scans grantColumns of a grant of an object version of *size
// bytes (read after the scan, so a query may select the size beside the
// grant: withMore).
func scanGrant(r engine.RowScanner, sizeOf *int64) (*ledger.Grant, error) {
	var (
		g                                ledger.Grant
		account, session, coverage       engine.NullStr
		created, refunded, done, stopped engine.TimeCol
		gWritten, sWritten               bool
		ended                            int
		d                                = &g.Delivery
	)
	err := r.Scan(&g.ID, &g.LinkID, &g.Kind, &account, &g.Status, &created, &refunded, &g.Client,
		&session, &g.AffinityReuses, &d.Status, &d.BytesAcked, &gWritten,
		&done, &stopped, &d.Attempts, &ended, &coverage, &sWritten)
	if err != nil {
		return nil, err
	}
	size := *sizeOf
	g.AccountID, g.SessionID = string(account), string(session)
	g.CreatedAt, g.RefundedAt = created.T, refunded.Ptr()
	d.DeliveredAt, d.InterruptedAt = done.Ptr(), stopped.Ptr()
	recorded := ended > 0
	if g.Kind == ledger.KindSession && coverage != "" {
		c, err := sessions.DecodeCoverage(string(coverage))
		if err != nil {
			return nil, fmt.Errorf("sqlcore: coverage of session %s: %w", g.SessionID, err)
		}
		d.BytesAcked, recorded = c.Bytes(size), !c.IsEmpty()
	}
	d.BytesAcked = min(d.BytesAcked, max(size, 0))
	d.Measured = recorded && !gWritten && !sWritten
	d.Coverage = coverageOf(d.Status, d.BytesAcked, size)
	return &g, nil
}

// coverageOf is the share of an object of size bytes that acked bytes
// are, from 0 to 1, and exactly 1 only for a complete grant (a fraction
// rounded for display never reads 100 % for an incomplete one).
func coverageOf(status ledger.DeliveryStatus, acked, size int64) float64 {
	switch {
	case status == ledger.DeliveryComplete:
		return 1
	case size <= 0:
		return 0
	}
	return min(float64(acked)/float64(size), math.Nextafter(1, 0))
}

// GrantList lists the link's grants newest first, with their delivery
// evidence, those of q.Delivery only when it is set. The cursor is
// opaque to callers: the (created_at, id) of the last grant of the
// previous page. With or without the filter the page is one range scan
// of an index in (created_at, id) order (grants_link_created,
// grants_link_delivery), stopped by the LIMIT. Errors: ErrNotFound
// (unknown link), ErrInvalid (bad cursor or delivery status).
func (s *DB) GrantList(ctx context.Context, q ledger.GrantQuery) (ledger.Page, error) {
	limit := q.Limit
	if limit < 1 || limit > ledger.MaxListLimit {
		limit = ledger.DefaultListLimit
	}
	if q.Delivery != "" {
		if _, err := ledger.ParseDeliveryStatus(string(q.Delivery)); err != nil {
			return ledger.Page{}, err
		}
	}
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	var size int64
	if err := s.Pool.QueryRowContext(ctx, `SELECT size FROM links WHERE id = ?`, q.LinkID).Scan(&size); err != nil {
		if engine.IsNoRows(err) {
			return ledger.Page{}, ledger.ErrNotFound
		}
		return ledger.Page{}, s.Classify(err)
	}
	query := `SELECT ` + grantColumns + grantFrom + ` WHERE g.link_id = ?`
	args := []any{q.LinkID}
	if q.Delivery != "" {
		query += ` AND g.delivery_status = ?`
		args = append(args, string(q.Delivery))
	}
	if q.Cursor != "" {
		at, id, err := engine.DecodeCursor(q.Cursor)
		if err != nil {
			return ledger.Page{}, err
		}
		query += ` AND (g.created_at < ? OR (g.created_at = ? AND g.id < ?))`
		args = append(args, s.TimeArg(at), s.TimeArg(at), id)
	}
	query += ` ORDER BY g.created_at DESC, g.id DESC LIMIT ?`
	args = append(args, limit+1)
	rows, err := s.Pool.QueryContext(ctx, query, args...)
	if err != nil {
		return ledger.Page{}, s.Classify(err)
	}
	defer rows.Close()
	var page ledger.Page
	for rows.Next() {
		g, err := scanGrant(rows, &size)
		if err != nil {
			return ledger.Page{}, s.Classify(err)
		}
		page.Grants = append(page.Grants, *g)
	}
	if err := rows.Err(); err != nil {
		return ledger.Page{}, s.Classify(err)
	}
	page.Grants, page.Next = engine.PageOf(page.Grants, limit, true, func(g *ledger.Grant) (time.Time, string) { return g.CreatedAt, g.ID })
	return page, nil
}
