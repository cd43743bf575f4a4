package sqlcore

import (
	"context"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

// GrantList lists the link's grants newest first. The cursor is opaque to
// callers: the (created_at, id) of the last grant of the previous page.
// Errors: ErrNotFound (unknown link), ErrInvalid (bad cursor).
func (s *DB) GrantList(ctx context.Context, linkID, cursor string, limit int) (ledger.Page, error) {
	if limit < 1 || limit > 500 {
		limit = 100
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var one int
	if err := s.db.QueryRowContext(ctx, `SELECT 1 FROM links WHERE id = ?`, linkID).Scan(&one); err != nil {
		if isNoRows(err) {
			return ledger.Page{}, ledger.ErrNotFound
		}
		return ledger.Page{}, s.classify(err)
	}
	q := `SELECT g.id, g.link_id, g.kind, g.account_id, g.status, g.created_at, g.refunded_at, g.client, g.session_id,
  COALESCE(s.affinity_reuses, 0)
FROM grants g LEFT JOIN sessions s ON s.id = g.session_id WHERE g.link_id = ?`
	args := []any{linkID}
	if cursor != "" {
		at, id, err := decodeCursor(cursor)
		if err != nil {
			return ledger.Page{}, err
		}
		q += ` AND (g.created_at < ? OR (g.created_at = ? AND g.id < ?))`
		args = append(args, s.t(at), s.t(at), id)
	}
	q += ` ORDER BY g.created_at DESC, g.id DESC LIMIT ?`
	args = append(args, limit+1)
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return ledger.Page{}, s.classify(err)
	}
	defer rows.Close()
	var page ledger.Page
	for rows.Next() {
		var (
			g                 ledger.Grant
			account, session  nullStr
			created, refunded timeCol
		)
		if err := rows.Scan(&g.ID, &g.LinkID, &g.Kind, &account, &g.Status, &created, &refunded, &g.Client, &session, &g.AffinityReuses); err != nil {
			return ledger.Page{}, s.classify(err)
		}
		g.AccountID, g.SessionID = string(account), string(session)
		g.CreatedAt, g.RefundedAt = created.T, refunded.ptr()
		page.Grants = append(page.Grants, g)
	}
	if err := rows.Err(); err != nil {
		return ledger.Page{}, s.classify(err)
	}
	if len(page.Grants) > limit {
		page.Grants = page.Grants[:limit]
		last := page.Grants[limit-1]
		page.Next = encodeCursor(last.CreatedAt, last.ID)
	}
	return page, nil
}

func encodeCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at.UnixMicro(), 10) + "/" + id))
}

// decodeCursor reads a cursor from encodeCursor. Anything else, forged
// ones included, is ErrInvalid: a time outside what a timestamp column
// holds or an id no row can have would otherwise reach the database and
// come back as a server error.
func decodeCursor(c string) (time.Time, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil && len(raw) <= 64 {
		micros, id, ok := strings.Cut(string(raw), "/")
		n, perr := strconv.ParseInt(micros, 10, 64)
		at := time.UnixMicro(n).UTC()
		if ok && perr == nil && !at.Before(minTime) && !at.After(maxTime) && validCursorID(id) {
			return at, id, nil
		}
	}
	return time.Time{}, "", fmt.Errorf("%w: bad cursor", ledger.ErrInvalid)
}

// validCursorID accepts what ids are: at most 36 visible ASCII characters.
func validCursorID(id string) bool {
	if id == "" || len(id) > 36 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}
