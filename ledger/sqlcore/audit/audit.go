// Package audit is the SQL ledger's audit trail (SPEC §6, migration
// 00011). Each change made with an actor in its context writes its entry
// with Write, inside the change's own transaction, so the entry exists
// exactly when the change does; the details each action records are the
// types below; the listing is Trail.AuditList; the purge is part of
// ledger/sqlcore's LinkPurge (retention.go).
package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// Trail is the audit trail's reading (ledger.Audit); ledger/sqlcore's DB
// embeds it. Entries are written by Write, in the transaction of the
// change they record.
type Trail struct{ *engine.DB }

var _ ledger.Audit = (*Trail)(nil)

// ActorOf returns the actor ctx carries, nil for none. Errors: ErrInvalid
// (an actor an entry cannot record), before anything is written.
func ActorOf(ctx context.Context) (*ledger.Actor, error) {
	a, ok := ledger.ActorOf(ctx)
	if !ok {
		return nil, nil
	}
	if err := a.Validate(); err != nil {
		return nil, err
	}
	return &a, nil
}

// Write writes, inside tx, the entry of the change action to target that
// a made at at (the value bound to a timestamp column, engine.DB.TimeArg),
// with details (a struct that marshals to a JSON object).
// Nothing when a is nil: the gateway's own changes are not audited.
func Write(ctx context.Context, tx *sql.Tx, a *ledger.Actor, at any, action string, target ledger.AuditTarget, details any) error {
	if a == nil {
		return nil
	}
	body, err := json.Marshal(details)
	if err != nil {
		return fmt.Errorf("sqlcore: audit details of %s: %w", action, err)
	}
	_, err = tx.ExecContext(ctx, `INSERT INTO audit_entries
  (id, created_at, actor_key_id, actor_key_name, action, target_type, target_id, request_id, details)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		engine.NewID(), at, a.KeyID, a.KeyName, action, target.Type, target.ID, engine.OrNull(a.RequestID), string(body))
	return err
}

// The details of each action: what changed, never a secret.
type (
	Version struct {
		Bucket    string `json:"bucket"`
		Key       string `json:"key"`
		VersionID string `json:"version_id"`
	}
	LinkCreated struct {
		Downloads int       `json:"downloads"`
		ExpiresAt time.Time `json:"expires_at"`
		Delivery  string    `json:"delivery"`
		AccountID *string   `json:"account_id"`
		Filename  string    `json:"filename"`
		Object    Version   `json:"object"`
	}
	LinkRevoked struct {
		SessionsRevoked int64 `json:"sessions_revoked"`
		// ObjectDeleted marks a revocation made by the deletion of the
		// version the link pins.
		ObjectDeleted bool `json:"object_deleted"`
	}
	AllowanceAdded struct {
		Add    int    `json:"add"`
		Reason string `json:"reason"`
	}
	// Object are the version as events name it, and Force.
	Object struct {
		ledger.EventObject
		// Force is set on object.deleted: the deletion revoked the links
		// that pinned the version (each has its link.revoked entry).
		Force *bool `json:"force,omitempty"`
	}
	Key struct {
		Name      string     `json:"name"`
		Scopes    []string   `json:"scopes"`
		ExpiresAt *time.Time `json:"expires_at"`
	}
	None struct{}
)

// ObjectOf is the details of an object.* entry about o.
func ObjectOf(o ledger.Object) Object {
	return Object{EventObject: *ledger.EventObjectOf(o)}
}

const auditColumns = `id, created_at, actor_key_id, actor_key_name, action, target_type, target_id, request_id, details`

func scanAudit(r engine.RowScanner) (ledger.AuditEntry, error) {
	var (
		e       ledger.AuditEntry
		at      engine.TimeCol
		req     engine.NullStr
		details string
	)
	err := r.Scan(&e.ID, &at, &e.Actor.KeyID, &e.Actor.KeyName, &e.Action, &e.Target.Type, &e.Target.ID, &req, &details)
	e.At, e.Actor.RequestID, e.Details = at.T, string(req), json.RawMessage(details)
	return e, err
}

// AuditList returns one page of audit entries, newest first. Each filter
// has an index that continues in (created_at, id) order (migration
// 00011), so the page is one index range scan from the cursor stopped by
// the LIMIT, plus a primary key lookup per entry, the way LinkList reads
// links. Errors: ErrInvalid (bad cursor, limit or action), ErrUnavailable.
func (s *Trail) AuditList(ctx context.Context, q ledger.AuditQuery) (ledger.AuditPage, error) {
	limit := q.Limit
	switch {
	case limit == 0:
		limit = ledger.DefaultListLimit
	case limit < 1 || limit > ledger.MaxListLimit:
		return ledger.AuditPage{}, fmt.Errorf("%w: limit must be between 1 and %d", ledger.ErrInvalid, ledger.MaxListLimit)
	}
	var (
		conds []string
		args  []any
	)
	if q.ActorKeyID != "" {
		conds, args = append(conds, "actor_key_id = ?"), append(args, q.ActorKeyID)
	}
	if q.Action != "" {
		if !slices.Contains(ledger.Actions(), q.Action) {
			return ledger.AuditPage{}, fmt.Errorf("%w: unknown action %q (known: %s)", ledger.ErrInvalid, q.Action,
				strings.Join(ledger.Actions(), ", "))
		}
		conds, args = append(conds, "action = ?"), append(args, q.Action)
	}
	if q.TargetID != "" {
		conds, args = append(conds, "target_id = ?"), append(args, q.TargetID)
	}
	c, a, err := s.timeWindow(q.After, q.Before, q.Cursor)
	if err != nil {
		return ledger.AuditPage{}, err
	}
	conds, args = append(conds, c...), append(args, a...)
	where := ""
	if len(conds) > 0 {
		where = "\nWHERE " + strings.Join(conds, " AND ")
	}
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	// As in LinkList: the inner query reads ids from the filter's index,
	// the join fetches at most limit+1 rows by primary key, and one row
	// more than the page tells whether there is a next one.
	rows, err := s.Pool.QueryContext(ctx, `SELECT `+auditColumns+` FROM (
  SELECT id AS page_id FROM audit_entries`+where+`
  ORDER BY created_at DESC, id DESC LIMIT ?
) page JOIN audit_entries ON audit_entries.id = page.page_id`, append(args, limit+1)...)
	if err != nil {
		return ledger.AuditPage{}, s.Classify(err)
	}
	defer rows.Close()
	var page ledger.AuditPage
	for rows.Next() {
		e, err := scanAudit(rows)
		if err != nil {
			return ledger.AuditPage{}, s.Classify(err)
		}
		page.Entries = append(page.Entries, e)
	}
	if err := rows.Err(); err != nil {
		return ledger.AuditPage{}, s.Classify(err)
	}
	page.Entries, page.Next = engine.PageOf(page.Entries, limit, false, func(e *ledger.AuditEntry) (time.Time, string) { return e.At, e.ID })
	return page, nil
}

// timeWindow is the conditions on created_at of a listing newest first:
// after and before exclusive (either zero for no bound), and the cursor's
// position. Stored times are whole microseconds, so "after t" is "after t
// truncated" and "before t" is "before t rounded up".
func (s *Trail) timeWindow(after, before time.Time, cursor string) ([]string, []any, error) {
	var (
		conds []string
		args  []any
	)
	if !after.IsZero() {
		conds, args = append(conds, "created_at > ?"), append(args, s.TimeArg(engine.ClampTime(after)))
	}
	if !before.IsZero() {
		b := engine.ClampTime(before)
		if ledger.Micro(b).Before(b) {
			b = b.Add(time.Microsecond)
		}
		conds, args = append(conds, "created_at < ?"), append(args, s.TimeArg(b))
	}
	if cursor != "" {
		at, id, err := engine.DecodeCursor(cursor)
		if err != nil {
			return nil, nil, err
		}
		conds = append(conds, "(created_at < ? OR (created_at = ? AND id < ?))")
		args = append(args, s.TimeArg(at), s.TimeArg(at), id)
	}
	return conds, args, nil
}
