package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/audit"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// Retention (SPEC §6): which stored versions to delete, and which dead
// links to purge. Both run in bounded batches from any number of
// processes. A batch takes its versions by a conditional UPDATE that
// writes a lease id (takeObjects; see sweep.go for why that is exact on
// every engine), and purges links by DELETEs whose own counts say what
// this batch removed; on SQLite the write lock taken at BEGIN runs one
// batch at a time anyway. docs/design.md ("Retention") has the rules.

// pinState is what pins one version at the instant now.
type pinState struct {
	liveLinks    int // not revoked, not expired, downloads remaining
	liveSessions int // not revoked, not ended, not expired
	// freeSince is when the last reference died: the version's upload,
	// the latest death of a link or session that pins or pinned it. It
	// means something only when nothing is live.
	freeSince time.Time
	// exhausted are dead links that could come back to life: neither
	// revoked nor expired, only out of downloads, which a top-up or a
	// refund gives back. Deleting the version revokes them.
	exhausted []string
}

// pins reads the links that pin row's version and their sessions, and
// judges them at now (the database's clock). A link dies when revoked
// (revoked_at), when it expires (expires_at), or when its last download
// is claimed (its latest grant) with no session left alive; a session
// dies at the first of its expiry, revocation and end.
//
// The caller holds row's lock, which every new link of the version needs
// first (pinStored), so no link appears behind this read. The links it
// reads are not locked (a range lock on the key index would make
// sweepers of neighbouring keys deadlock): what was dead stays dead,
// except an exhausted link that a top-up or refund revives, and those
// are exactly the ones decide revokes, by id, whatever they became.
func (s *DB) pins(ctx context.Context, tx *sql.Tx, row *objectRow, now time.Time) (pinState, error) {
	p := pinState{freeSince: latest(row.StoredAt, row.linkedAt, row.released)}
	const version = ` l.object_key = ? AND l.bucket = ? AND l.version_id = ?`
	args := []any{row.Key, row.Bucket, row.VersionID}
	rows, err := tx.QueryContext(ctx, `SELECT l.id, l.remaining, l.expires_at, l.revoked_at FROM links l
WHERE`+version, args...)
	if err != nil {
		return p, err
	}
	type link struct {
		id               string
		remaining        int
		expires, revoked engine.TimeCol
	}
	var links []link
	spent := false
	for rows.Next() {
		var l link
		if err := rows.Scan(&l.id, &l.remaining, &l.expires, &l.revoked); err != nil {
			rows.Close()
			return p, err
		}
		links = append(links, l)
		spent = spent || l.remaining <= 0
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(links) == 0 {
		return p, err
	}
	// A link without downloads left has been so since its latest grant:
	// only a claim takes remaining to 0, and a top-up or refund since
	// would have left it above 0.
	lastGrant := map[string]time.Time{}
	if spent {
		rows, err := tx.QueryContext(ctx, `SELECT g.link_id, MAX(g.created_at) FROM grants g JOIN links l ON l.id = g.link_id
WHERE`+version+` AND l.remaining <= 0 GROUP BY g.link_id`, args...)
		if err != nil {
			return p, err
		}
		for rows.Next() {
			var (
				id   string
				last engine.TimeCol
			)
			if err := rows.Scan(&id, &last); err != nil {
				rows.Close()
				return p, err
			}
			lastGrant[id] = last.T
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return p, err
		}
	}
	for _, l := range links {
		// Dead since the first of the deaths that apply.
		var died time.Time
		dead := false
		die := func(at time.Time) {
			if !dead || at.Before(died) {
				died, dead = at, true
			}
		}
		if l.revoked.Valid {
			die(l.revoked.T)
		}
		if !l.expires.T.After(now) {
			die(l.expires.T)
		}
		if l.remaining <= 0 {
			die(lastGrant[l.id]) // zero, "long ago", if it never had a grant
			if !l.revoked.Valid && l.expires.T.After(now) {
				p.exhausted = append(p.exhausted, l.id)
			}
		}
		if !dead {
			p.liveLinks++
			continue
		}
		p.freeSince = latest(p.freeSince, died)
	}
	// No session comes back to life, and a new one needs a claim, which
	// needs a live link: one seen live here, or an exhausted one revived
	// since, which decide revokes and so takes its sessions down too.
	rows, err = tx.QueryContext(ctx, `SELECT x.expires_at, x.revoked_at, x.ended_at FROM sessions x
JOIN links l ON l.id = x.link_id WHERE`+version, args...)
	if err != nil {
		return p, err
	}
	defer rows.Close()
	for rows.Next() {
		var expires, revoked, ended engine.TimeCol
		if err := rows.Scan(&expires, &revoked, &ended); err != nil {
			return p, err
		}
		if !revoked.Valid && !ended.Valid && expires.T.After(now) {
			p.liveSessions++
			continue
		}
		died := expires.T
		if revoked.Valid {
			died = earliest(died, revoked.T)
		}
		if ended.Valid {
			died = earliest(died, ended.T)
		}
		p.freeSince = latest(p.freeSince, died)
	}
	return p, rows.Err()
}

// decide marks row deleting, handed out until now + DeletionLease, and
// revokes its exhausted links at stamp so that no top-up or refund brings
// one back to life pointing at a version that is going (each announced by
// its link.revoked webhook event). a is the actor whose DeletionBegin
// decides (nil for retention): it is recorded on the row for the
// object.deleted event, and each revocation is audited as its. The caller
// has checked that nothing live pins it.
func (s *DB) decide(ctx context.Context, tx *sql.Tx, row *objectRow, p pinState, now, stamp time.Time, a *ledger.Actor) error {
	for _, id := range p.exhausted {
		res, err := tx.ExecContext(ctx, `UPDATE links SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, s.TimeArg(stamp), id)
		if err != nil {
			return err
		}
		if n, err := engine.Affected(res); err != nil {
			return err
		} else if n > 0 {
			if err := s.enqueueRevoked(ctx, tx, id, a); err != nil {
				return err
			}
			if err := audit.Write(ctx, tx, a, s.TimeArg(stamp), ledger.ActionLinkRevoked, ledger.AuditTarget{Type: ledger.TargetLink, ID: id},
				audit.LinkRevoked{ObjectDeleted: true}); err != nil {
				return err
			}
		}
	}
	var byID, byName any
	if a != nil {
		byID, byName = a.KeyID, a.KeyName
	}
	_, err := tx.ExecContext(ctx, `UPDATE objects SET state = 'deleting', decided_at = ?, check_at = ?,
  decided_by_key_id = ?, decided_by_key_name = ? WHERE version_hash = ?`,
		s.TimeArg(stamp), s.TimeArg(capTime(now.Add(ledger.DeletionLease))), byID, byName, versionHash(row.Object))
	return err
}

// DeletionClaim hands out at most limit deletions: first the decided
// ones that are due again (a failed attempt's backoff is over, or the
// lease of a holder that never reported lapsed), then versions whose
// retention is due. A stored version that is not due yet is looked at
// again when it may first be: freeSince + retention when nothing pins it,
// now + retention when something does (nothing live dies before now).
// Errors: ErrInvalid, ErrUnavailable.
func (s *DB) DeletionClaim(ctx context.Context, retention time.Duration, limit int) ([]ledger.Deletion, error) {
	if retention < 0 || limit < 1 {
		return nil, fmt.Errorf("%w: retention must not be negative and limit must be at least 1", ledger.ErrInvalid)
	}
	stamp := s.Stamp()
	var out []ledger.Deletion
	err := s.InTxWith(ctx, s.D.SweepTx, func(ctx context.Context, tx *sql.Tx) error {
		out = nil
		now, err := s.txNow(ctx, tx)
		if err != nil {
			return err
		}
		// Taking a deleting row moves its check_at to the end of a new
		// lease: that is the hand-out itself.
		again, err := s.takeObjects(ctx, tx, ledger.ObjectDeleting, now, limit)
		if err != nil {
			return err
		}
		for _, row := range again {
			out = append(out, ledger.Deletion{Object: row.Object, Attempts: row.Attempts, DecidedBy: row.decidedBy})
		}
		if retention == 0 || len(out) == limit {
			return nil
		}
		// A stored row is taken for a look; the look then either decides
		// its deletion or schedules the next look, before COMMIT.
		due, err := s.takeObjects(ctx, tx, ledger.ObjectStored, now, limit-len(out))
		if err != nil {
			return err
		}
		for _, row := range due {
			p, err := s.pins(ctx, tx, row, now)
			if err != nil {
				return err
			}
			next := now.Add(retention)
			if p.liveLinks == 0 && p.liveSessions == 0 {
				if next = p.freeSince.Add(retention); !now.Before(next) {
					// Retention's own decision: no actor, whoever calls.
					if err := s.decide(ctx, tx, row, p, now, stamp, nil); err != nil {
						return err
					}
					out = append(out, ledger.Deletion{Object: row.Object, Attempts: row.Attempts})
					continue
				}
			}
			if _, err := tx.ExecContext(ctx, `UPDATE objects SET check_at = ? WHERE version_hash = ?`,
				s.TimeArg(capTime(next)), versionHash(row.Object)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// takeObjects takes at most limit rows in state whose check_at has come,
// oldest first: it picks candidates, then moves the check_at of those
// still due to now + ledger.DeletionLease and stamps them with a lease id
// of its own in one conditional UPDATE, and returns the rows that carry
// that id. A row another sweeper took first (its check_at moved) is left
// out, whether or not the engine honours SKIP LOCKED. The candidate read
// names only the primary key: TiDB cannot plan a locking read whose
// select list lacks it.
func (s *DB) takeObjects(ctx context.Context, tx *sql.Tx, state ledger.ObjectState, now time.Time, limit int) ([]*objectRow, error) {
	rows, err := tx.QueryContext(ctx, `SELECT version_hash FROM objects
WHERE state = ? AND check_at <= ? ORDER BY check_at LIMIT ?`+s.D.SkipLockedSQL(), string(state), s.TimeArg(now), limit)
	if err != nil {
		return nil, err
	}
	var hashes []any
	order := map[string]int{}
	for rows.Next() {
		var h []byte
		if err := rows.Scan(&h); err != nil {
			rows.Close()
			return nil, err
		}
		order[string(h)] = len(hashes)
		hashes = append(hashes, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(hashes) == 0 {
		return nil, err
	}
	lease := engine.NewID()
	in := engine.Placeholders(len(hashes))
	args := append([]any{lease, s.TimeArg(capTime(now.Add(ledger.DeletionLease)))}, hashes...)
	res, err := tx.ExecContext(ctx, `UPDATE objects SET lease_id = ?, check_at = ?
WHERE version_hash IN `+in+` AND state = ? AND check_at <= ?`, append(args, string(state), s.TimeArg(now))...)
	if err != nil {
		return nil, err
	}
	if n, err := engine.Affected(res); err != nil || n == 0 {
		return nil, err
	}
	rows, err = tx.QueryContext(ctx, `SELECT version_hash, `+objectColumns+` FROM objects
WHERE version_hash IN `+in+` AND lease_id = ?`, append(hashes, lease)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]*objectRow, len(hashes))
	for rows.Next() {
		var h []byte
		row, err := scanObject(prefixed{rows, &h})
		if err != nil {
			return nil, err
		}
		out[order[string(h)]] = row
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	taken := out[:0]
	for _, row := range out {
		if row != nil {
			taken = append(taken, row)
		}
	}
	return taken, nil
}

// prefixed scans one leading column into first, the rest as r would.
type prefixed struct {
	r     engine.RowScanner
	first any
}

func (p prefixed) Scan(dest ...any) error { return p.r.Scan(append([]any{p.first}, dest...)...) }

// deadLink is a link the purge may delete, with when it died.
type deadLink struct {
	id   string
	obj  ledger.Object
	died time.Time
}

// LinkPurge deletes at most limit links dead for retention and the rows
// that hang off them, then at most limit tombstones as old, at most limit
// audit entries as old and at most limit keys revoked or expired as long
// ago (with any console session left of them). A link counts
// from its revocation or expiry, whichever came first, and waits for the
// last of its sessions to be dead as long; one that is only exhausted
// waits until it is revoked (deleting its version revokes it) or expires.
// When a purged link pinned a version the gateway stored, that version's
// released_at keeps the link's death, so retention still counts from it.
// Errors: ErrInvalid, ErrUnavailable.
func (s *DB) LinkPurge(ctx context.Context, retention time.Duration, limit int) (ledger.PurgeResult, error) {
	if retention < 0 || limit < 1 {
		return ledger.PurgeResult{}, fmt.Errorf("%w: retention must not be negative and limit must be at least 1", ledger.ErrInvalid)
	}
	var out ledger.PurgeResult
	if retention == 0 {
		return out, nil
	}
	err := s.InTxWith(ctx, s.D.SweepTx, func(ctx context.Context, tx *sql.Tx) error {
		out = ledger.PurgeResult{}
		now, err := s.txNow(ctx, tx)
		if err != nil {
			return err
		}
		cutoff := now.Add(-retention)
		dead, err := s.deadLinks(ctx, tx, cutoff, limit)
		if err != nil {
			return err
		}
		if out.Links, err = s.purge(ctx, tx, dead); err != nil {
			return err
		}
		if out.Tombstones, err = s.purgeTombstones(ctx, tx, cutoff, limit); err != nil {
			return err
		}
		if out.Audit, err = s.purgeAudit(ctx, tx, cutoff, limit); err != nil {
			return err
		}
		out.Keys, err = s.purgeKeys(ctx, tx, cutoff, limit)
		return err
	})
	return out, err
}

// deadLinks picks at most limit links revoked or expired at or before
// cutoff whose sessions all died at or before it too. Dead stays dead (no
// session of such a link can be minted), so a link read dead here is
// purged rightly whichever purger gets to it.
func (s *DB) deadLinks(ctx context.Context, tx *sql.Tx, cutoff time.Time, limit int) ([]deadLink, error) {
	seen := map[string]bool{}
	var cands []deadLink
	for _, col := range []string{"revoked_at", "expires_at"} {
		rows, err := tx.QueryContext(ctx, `SELECT id, bucket, object_key, version_id, expires_at, revoked_at FROM links
WHERE `+col+` <= ? ORDER BY `+col+` LIMIT ?`+s.D.SkipLockedSQL(), s.TimeArg(cutoff), limit)
		if err != nil {
			return nil, err
		}
		for rows.Next() {
			var (
				d                deadLink
				expires, revoked engine.TimeCol
			)
			if err := rows.Scan(&d.id, &d.obj.Bucket, &d.obj.Key, &d.obj.VersionID, &expires, &revoked); err != nil {
				rows.Close()
				return nil, err
			}
			d.died = expires.T
			if revoked.Valid {
				d.died = earliest(d.died, revoked.T)
			}
			if !seen[d.id] && len(cands) < limit {
				seen[d.id] = true
				cands = append(cands, d)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	if len(cands) == 0 {
		return nil, nil
	}
	ids := make([]string, len(cands))
	for i, d := range cands {
		ids[i] = d.id
	}
	rows, err := tx.QueryContext(ctx, `SELECT link_id, expires_at, revoked_at, ended_at FROM sessions WHERE link_id IN `+engine.Placeholders(len(ids)), engine.Anys(ids)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	sessionDied := map[string]time.Time{}
	for rows.Next() {
		var (
			id                      string
			expires, revoked, ended engine.TimeCol
		)
		if err := rows.Scan(&id, &expires, &revoked, &ended); err != nil {
			return nil, err
		}
		died := expires.T
		if revoked.Valid {
			died = earliest(died, revoked.T)
		}
		if ended.Valid {
			died = earliest(died, ended.T)
		}
		sessionDied[id] = latest(sessionDied[id], died)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	dead := cands[:0]
	for _, d := range cands {
		if t, ok := sessionDied[d.id]; ok {
			if t.After(cutoff) {
				continue // a session lived on after the link; its turn comes later
			}
			d.died = latest(d.died, t)
		}
		dead = append(dead, d)
	}
	return dead, nil
}

// purge deletes the links in dead with everything that names them,
// children first, after carrying their deaths over to the versions the
// gateway stored, and returns how many links it deleted. Two purgers that
// picked the same links do the same idempotent work one after the other
// (the second waits for the first's row locks), and the count comes from
// the final DELETE itself, so each link is counted by the one that
// removed it.
func (s *DB) purge(ctx context.Context, tx *sql.Tx, dead []deadLink) (int, error) {
	if len(dead) == 0 {
		return 0, nil
	}
	ids := make([]string, len(dead))
	for i, d := range dead {
		ids[i] = d.id
		died := s.TimeArg(d.died)
		if _, err := tx.ExecContext(ctx, `UPDATE objects SET released_at = ?
WHERE version_hash = ? AND (released_at IS NULL OR released_at < ?)`, died, versionHash(d.obj), died); err != nil {
			return 0, err
		}
	}
	in, args := engine.Placeholders(len(ids)), engine.Anys(ids)
	for _, q := range []string{
		`DELETE FROM session_slots WHERE session_id IN (SELECT id FROM sessions WHERE link_id IN ` + in + `)`,
		`DELETE FROM session_idempotency WHERE link_id IN ` + in,
		`DELETE FROM sessions WHERE link_id IN ` + in,
		`DELETE FROM grants WHERE link_id IN ` + in,
		`DELETE FROM allowance_changes WHERE link_id IN ` + in,
	} {
		if _, err := tx.ExecContext(ctx, q, args...); err != nil {
			return 0, err
		}
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM links WHERE id IN `+in, args...)
	if err != nil {
		return 0, err
	}
	n, err := engine.Affected(res)
	return int(n), err
}

// purgeTombstones deletes at most limit rows of versions deleted at or
// before cutoff (their check_at is when the tombstone was made), and
// returns how many its DELETE, which repeats the condition, removed.
func (s *DB) purgeTombstones(ctx context.Context, tx *sql.Tx, cutoff time.Time, limit int) (int, error) {
	const tombstone = `state = 'deleted' AND check_at <= ?`
	rows, err := tx.QueryContext(ctx, `SELECT version_hash FROM objects
WHERE `+tombstone+` ORDER BY check_at LIMIT ?`+s.D.SkipLockedSQL(), s.TimeArg(cutoff), limit)
	if err != nil {
		return 0, err
	}
	var hashes []any
	for rows.Next() {
		var h []byte
		if err := rows.Scan(&h); err != nil {
			rows.Close()
			return 0, err
		}
		hashes = append(hashes, h)
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(hashes) == 0 {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM objects WHERE version_hash IN `+engine.Placeholders(len(hashes))+` AND `+tombstone,
		append(hashes, s.TimeArg(cutoff))...)
	if err != nil {
		return 0, err
	}
	n, err := engine.Affected(res)
	return int(n), err
}

// purgeAudit deletes at most limit audit entries written at or before
// cutoff, oldest first, and returns how many its DELETE, which repeats
// the condition, removed.
func (s *DB) purgeAudit(ctx context.Context, tx *sql.Tx, cutoff time.Time, limit int) (int, error) {
	return s.purgeBatch(ctx, tx, cutoff, limit, "audit_entries", `created_at <= ?`, []string{"created_at"})
}

// purgeKeys deletes at most limit keys revoked or expired at or before
// cutoff, with what is left of their console sessions, and returns how
// many keys its DELETE removed. Audit entries keep the names of the keys
// they name.
func (s *DB) purgeKeys(ctx context.Context, tx *sql.Tx, cutoff time.Time, limit int) (int, error) {
	return s.purgeBatch(ctx, tx, cutoff, limit, "api_keys", `(revoked_at <= ? OR expires_at <= ?)`,
		[]string{"revoked_at", "expires_at"}, `DELETE FROM console_sessions WHERE key_id IN `)
}

// purgeBatch deletes at most limit rows of table that meet cond at cutoff
// (each of its placeholders is cutoff), oldest first by each column of
// cols (one candidate read each, by that column's index), after running
// each of children with the rows' ids, and returns how many rows the
// final DELETE, which repeats cond, removed: a row another purger took
// first is not counted twice.
func (s *DB) purgeBatch(ctx context.Context, tx *sql.Tx, cutoff time.Time, limit int, table, cond string, cols []string, children ...string) (int, error) {
	reads := make([]engine.IDRead, len(cols))
	for i, col := range cols {
		reads[i] = engine.Read(`SELECT id FROM `+table+` WHERE `+col+` <= ? ORDER BY `+col+` LIMIT ?`+s.D.SkipLockedSQL(), s.TimeArg(cutoff), limit)
	}
	found, err := engine.ReadIDs(ctx, tx, limit, reads...)
	if err != nil {
		return 0, err
	}
	ids := engine.Anys(found)
	if len(ids) == 0 {
		return 0, nil
	}
	in := engine.Placeholders(len(ids))
	for _, q := range children {
		if _, err := tx.ExecContext(ctx, q+in, ids...); err != nil {
			return 0, err
		}
	}
	args := append([]any(nil), ids...)
	for range strings.Count(cond, "?") {
		args = append(args, s.TimeArg(cutoff))
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM `+table+` WHERE id IN `+in+` AND `+cond, args...)
	if err != nil {
		return 0, err
	}
	n, err := engine.Affected(res)
	return int(n), err
}

func latest(ts ...time.Time) time.Time {
	var out time.Time
	for _, t := range ts {
		if t.After(out) {
			out = t
		}
	}
	return out
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// DeletionBegin marks a version the gateway stored deleting when nothing
// live pins it, in one transaction that first locks the version's row and
// its links, and hands it out for ledger.DeletionLease. With force, the
// links that are live or have a live session are revoked first, each by
// LinkRevoke (which ends its sessions); a link created meanwhile still
// pins, so the check is made again, a few times. A version already
// deleting is handed out again at once. Errors: ErrNotFound, ErrPinned,
// ErrUnavailable.
func (s *DB) DeletionBegin(ctx context.Context, bucket, key, versionID string, force bool) (*ledger.Deletion, error) {
	a, err := audit.ActorOf(ctx)
	if err != nil {
		return nil, err
	}
	o := ledger.Object{Bucket: bucket, Key: key, VersionID: versionID}
	for attempt := 1; ; attempt++ {
		if force {
			ids, err := s.pinningLinks(ctx, o)
			if err != nil {
				return nil, err
			}
			for _, id := range ids {
				if err := s.LinkRevoke(ctx, id); err != nil && !errors.Is(err, ledger.ErrNotFound) {
					return nil, err
				}
			}
		}
		d, err := s.beginDeletion(ctx, o, a, force)
		if !force || !errors.Is(err, ledger.ErrPinned) || attempt == 3 {
			return d, err
		}
	}
}

// beginDeletion decides o's deletion as a's (nil: no audit), or hands a
// deletion decided before out again. The object.deleted audit entry is
// written here, with the decision, rather than when the store deletion
// is finished: deciding is what the operator did, irrevocably (no link
// can pin the version from then on), and a store deletion that fails is
// finished later by the sweeper, which has no actor. Handing a decided
// deletion out again changes nothing and writes no entry.
func (s *DB) beginDeletion(ctx context.Context, o ledger.Object, a *ledger.Actor, force bool) (*ledger.Deletion, error) {
	stamp := s.Stamp()
	var out *ledger.Deletion
	err := s.InTxWith(ctx, s.D.SweepTx, func(ctx context.Context, tx *sql.Tx) error {
		row, err := scanObject(tx.QueryRowContext(ctx, `SELECT `+objectColumns+` FROM objects
WHERE version_hash = ?`+s.D.LockRows, versionHash(o)))
		if err != nil {
			return err
		}
		now, err := s.txNow(ctx, tx)
		if err != nil {
			return err
		}
		switch row.State {
		case ledger.ObjectDeleted:
			return ledger.ErrNotFound
		case ledger.ObjectDeleting:
			// Decided before: only the store deletion is left to do.
			out = &ledger.Deletion{Object: row.Object, Attempts: row.Attempts, DecidedBy: row.decidedBy}
			return s.lease(ctx, tx, row, now)
		}
		p, err := s.pins(ctx, tx, row, now)
		if err != nil {
			return err
		}
		if p.liveLinks > 0 || p.liveSessions > 0 {
			return &ledger.PinnedError{Links: p.liveLinks, Sessions: p.liveSessions}
		}
		if err := s.decide(ctx, tx, row, p, now, stamp, a); err != nil {
			return err
		}
		out = &ledger.Deletion{Object: row.Object, Attempts: row.Attempts, DecidedBy: by(a)}
		details := audit.ObjectOf(row.Object)
		details.Force = &force
		return audit.Write(ctx, tx, a, s.TimeArg(stamp), ledger.ActionObjectDeleted, ledger.AuditTarget{Type: ledger.TargetObject, ID: row.Key},
			details)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// pinningLinks returns the ids of the links that pin o and are live or
// have a live session: what force revokes. A plain read; the deletion's
// own transaction checks again under lock.
func (s *DB) pinningLinks(ctx context.Context, o ledger.Object) ([]string, error) {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	ids, err := engine.ReadIDs(ctx, s.Pool, 0, engine.Read(s.Q(`SELECT id FROM links l
WHERE object_key = ? AND bucket = ? AND version_id = ? AND revoked_at IS NULL
  AND ((expires_at > {now} AND remaining > 0) OR EXISTS (SELECT 1 FROM sessions x
    WHERE x.link_id = l.id AND x.revoked_at IS NULL AND x.ended_at IS NULL AND x.expires_at > {now}))`), o.Key, o.Bucket, o.VersionID, s.DBNow(), s.DBNow()))
	return ids, s.Classify(err)
}
