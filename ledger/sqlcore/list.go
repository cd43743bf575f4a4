package sqlcore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// LinkList returns one page of links, newest first, with their counts.
// Each filter has an index that continues in (created_at, id) order
// (migrations 00003), so the page is one index range scan stopped by the
// LIMIT, plus a primary key lookup per link; the counts of the whole page
// come from one more statement.
// Errors: ErrInvalid (bad cursor, limit or state), ErrUnavailable.
func (s *DB) LinkList(ctx context.Context, q ledger.ListQuery) (ledger.LinkPage, error) {
	limit := q.Limit
	switch {
	case limit == 0:
		limit = ledger.DefaultListLimit
	case limit < 1 || limit > ledger.MaxListLimit:
		return ledger.LinkPage{}, fmt.Errorf("%w: limit must be between 1 and %d", ledger.ErrInvalid, ledger.MaxListLimit)
	}
	where, args, err := s.listWhere(q)
	if err != nil {
		return ledger.LinkPage{}, err
	}
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	// The inner query reads ids only, from an index that holds every
	// column it filters on, so it is a range scan starting at the cursor.
	// Asked for whole rows instead, MariaDB 10.11 scans a state's index
	// from the newest link down to the cursor: page n would cost n pages.
	// The outer join then fetches at most limit+1 rows by primary key.
	// One row more than the page tells whether there is a next page.
	rows, err := s.Pool.QueryContext(ctx, s.Q(`SELECT `+linkColumns+` FROM (
  SELECT id AS page_id FROM links`+where+`
  ORDER BY created_at DESC, id DESC LIMIT ?
) page JOIN links ON links.id = page.page_id`), append(args, limit+1)...)
	if err != nil {
		return ledger.LinkPage{}, s.Classify(err)
	}
	defer rows.Close()
	var page ledger.LinkPage
	for rows.Next() {
		l, err := scanLink(rows)
		if err != nil {
			return ledger.LinkPage{}, s.Classify(err)
		}
		page.Links = append(page.Links, *newLinkStatus(l))
	}
	if err := rows.Err(); err != nil {
		return ledger.LinkPage{}, s.Classify(err)
	}
	rows.Close()
	page.Links, page.Next = engine.PageOf(page.Links, limit, false, func(l *ledger.LinkStatus) (time.Time, string) { return l.CreatedAt, l.ID })
	if err := s.countPage(ctx, page.Links); err != nil {
		return ledger.LinkPage{}, err
	}
	return page, nil
}

// listWhere turns q into a WHERE clause template and its arguments. The
// state conditions follow ledger.Link.State: revocation first, then
// expiry, then what remains; expiry by the database's clock, the one the
// claim decides by, so a link listed as active is one a claim may take.
func (s *DB) listWhere(q ledger.ListQuery) (string, []any, error) {
	var (
		conds []string
		args  []any
	)
	if q.AccountID != "" {
		conds, args = append(conds, "account_id = ?"), append(args, q.AccountID)
	}
	if q.ObjectKey != "" {
		conds, args = append(conds, "object_key = ?"), append(args, q.ObjectKey)
	}
	switch q.State {
	case "":
	case ledger.StateRevoked:
		conds = append(conds, "is_revoked = 1")
	case ledger.StateExpired:
		conds, args = append(conds, "is_revoked = 0 AND expires_at <= {now}"), append(args, s.DBNow())
	case ledger.StateExhausted:
		conds, args = append(conds, "is_revoked = 0 AND expires_at > {now} AND remaining = 0"), append(args, s.DBNow())
	case ledger.StateActive:
		conds, args = append(conds, "is_revoked = 0 AND expires_at > {now} AND remaining > 0"), append(args, s.DBNow())
	default:
		return "", nil, fmt.Errorf("%w: unknown link state %q", ledger.ErrInvalid, q.State)
	}
	if !q.CreatedAfter.IsZero() {
		// Stored times are whole microseconds: "after t" is "after t
		// truncated".
		conds, args = append(conds, "created_at > ?"), append(args, s.TimeArg(engine.ClampTime(q.CreatedAfter)))
	}
	if !q.CreatedBefore.IsZero() {
		// …and "before t" is "before t rounded up to the microsecond".
		before := engine.ClampTime(q.CreatedBefore)
		if ledger.Micro(before).Before(before) {
			before = before.Add(time.Microsecond)
		}
		conds, args = append(conds, "created_at < ?"), append(args, s.TimeArg(before))
	}
	if q.Cursor != "" {
		at, id, err := engine.DecodeCursor(q.Cursor)
		if err != nil {
			return "", nil, err
		}
		conds = append(conds, "(created_at < ? OR (created_at = ? AND id < ?))")
		args = append(args, s.TimeArg(at), s.TimeArg(at), id)
	}
	if len(conds) == 0 {
		return "", nil, nil
	}
	return "\nWHERE " + strings.Join(conds, " AND "), args, nil
}

// countPage fills in the grant counts (by status and by delivery status)
// and live sessions of links with one statement for the whole page,
// whatever its size.
func (s *DB) countPage(ctx context.Context, links []ledger.LinkStatus) error {
	if len(links) == 0 {
		return nil
	}
	byID := make(map[string]*ledger.LinkStatus, len(links))
	ids := make([]any, 0, len(links))
	for i := range links {
		byID[links[i].ID] = &links[i]
		ids = append(ids, links[i].ID)
	}
	in := "?" + strings.Repeat(", ?", len(ids)-1)
	// The session condition is the one Link uses for active_sessions.
	query := `SELECT 'grant', link_id, status, delivery_status, COUNT(*) FROM grants
WHERE link_id IN (` + in + `) GROUP BY link_id, status, delivery_status
UNION ALL
SELECT 'session', link_id, '', '', COUNT(*) FROM sessions
WHERE link_id IN (` + in + `) AND revoked_at IS NULL AND ended_at IS NULL AND expires_at > {now}
GROUP BY link_id`
	args := append(append(append(make([]any, 0, 2*len(ids)+1), ids...), ids...), s.DBNow())
	// Not through s.q: the text varies with the page size.
	query = strings.ReplaceAll(query, "{now}", s.D.NowSQL)
	rows, err := s.Pool.QueryContext(ctx, query, args...)
	if err != nil {
		return s.Classify(err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			kind, id, status string
			delivery         ledger.DeliveryStatus
			n                int
		)
		if err := rows.Scan(&kind, &id, &status, &delivery, &n); err != nil {
			return s.Classify(err)
		}
		st := byID[id]
		switch {
		case st == nil:
		case kind == "session":
			st.ActiveSessions = n
		default:
			countGrants(st, status, delivery, n)
		}
	}
	return s.Classify(rows.Err())
}
