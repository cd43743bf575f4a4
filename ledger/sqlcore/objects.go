package sqlcore

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/audit"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// The object lifecycle (SPEC §6): versions the gateway stored, and their
// deletion. Retention, which finds the versions to delete, is in
// retention.go; the rules of both are in docs/design.md ("Retention").

// versionHash identifies a version: bucket, key and version id, joined by
// NUL, which none of them can contain (storage.ValidateKey refuses it in
// keys, bucket names are DNS-like, version ids come from the store).
func versionHash(o ledger.Object) []byte {
	h := sha256.Sum256([]byte(o.Bucket + "\x00" + o.Key + "\x00" + o.VersionID))
	return h[:]
}

const objectColumns = `bucket, object_key, version_id, size, etag, content_type, stored_at,
  state, attempts, deleted_at, check_at, linked_at, released_at, sha256, decided_by_key_id, decided_by_key_name`

// objectRow is a row of objects with what retention needs beside the
// ledger.StoredObject.
type objectRow struct {
	ledger.StoredObject
	checkAt  time.Time
	linkedAt time.Time // zero when never linked
	released time.Time // zero when no link of it was purged
	// decidedBy is the actor whose DeletionBegin decided the deletion,
	// nil when none did (retention, or not decided).
	decidedBy *ledger.Actor
}

func scanObject(r engine.RowScanner) (*objectRow, error) {
	var (
		o                                        objectRow
		stored, deleted, check, linked, released engine.TimeCol
		state                                    string
		sum, byID, byName                        engine.NullStr
	)
	err := r.Scan(&o.Bucket, &o.Key, &o.VersionID, &o.Size, &o.ETag, &o.ContentType, &stored,
		&state, &o.Attempts, &deleted, &check, &linked, &released, &sum, &byID, &byName)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ledger.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	o.State, o.SHA256 = ledger.ObjectState(state), string(sum)
	o.StoredAt, o.DeletedAt = stored.T, deleted.Ptr()
	o.checkAt, o.linkedAt, o.released = check.T, linked.T, released.T
	if byID != "" {
		o.decidedBy = &ledger.Actor{KeyID: string(byID), KeyName: string(byName)}
	}
	return &o, nil
}

// ObjectRecord records a version the gateway stored, as stored, with the
// SHA-256 its upload computed, and with an actor its object.stored audit
// entry, in one transaction. A version recorded before (version "null"
// of a bucket without versioning, written again) starts over with o's
// size, ETag and digest, whatever its state was. Errors: ErrInvalid,
// ErrUnavailable.
func (s *DB) ObjectRecord(ctx context.Context, o ledger.Object) error {
	if o.Key == "" || o.VersionID == "" || o.Size < 0 || len(o.Bucket) > 255 || len(o.ETag) > 255 || len(o.ContentType) > 255 {
		return fmt.Errorf("%w: an object version needs a key, a version id and a size", ledger.ErrInvalid)
	}
	if o.SHA256 != "" && !ledger.ValidSHA256(o.SHA256) {
		return fmt.Errorf("%w: sha256 must be 64 lowercase hex digits", ledger.ErrInvalid)
	}
	a, err := audit.ActorOf(ctx)
	if err != nil {
		return err
	}
	stamp := s.Stamp()
	now := s.TimeArg(stamp)
	h := versionHash(o)
	return s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		// check_at = stored_at: retention looks at a new version at once
		// and then schedules it (see DeletionClaim).
		_, err := tx.ExecContext(ctx, `INSERT INTO objects (version_hash, bucket, object_key, version_id, size, etag,
  content_type, stored_at, state, check_at, sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'stored', ?, ?)`,
			h, o.Bucket, o.Key, o.VersionID, o.Size, o.ETag, o.ContentType, now, now, engine.OrNull(o.SHA256))
		if err != nil && s.D.IsDuplicate(err) {
			_, err = tx.ExecContext(ctx, `UPDATE objects SET size = ?, etag = ?, content_type = ?, stored_at = ?,
  state = 'stored', check_at = ?, decided_at = NULL, attempts = 0, last_error = NULL, deleted_at = NULL, sha256 = ?,
  decided_by_key_id = NULL, decided_by_key_name = NULL
WHERE version_hash = ?`, o.Size, o.ETag, o.ContentType, now, now, engine.OrNull(o.SHA256), h)
		}
		if err != nil {
			return err
		}
		return audit.Write(ctx, tx, a, s.TimeArg(stamp), ledger.ActionObjectStored, ledger.AuditTarget{Type: ledger.TargetObject, ID: o.Key},
			audit.ObjectOf(o))
	})
}

// ObjectGet returns the record of a version the gateway stored.
// Errors: ErrNotFound, ErrUnavailable.
func (s *DB) ObjectGet(ctx context.Context, bucket, key, versionID string) (*ledger.StoredObject, error) {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	o, err := scanObject(s.Pool.QueryRowContext(ctx, `SELECT `+objectColumns+` FROM objects WHERE version_hash = ?`,
		versionHash(ledger.Object{Bucket: bucket, Key: key, VersionID: versionID})))
	if err != nil {
		return nil, s.Classify(err)
	}
	return &o.StoredObject, nil
}

// pinStored refuses a new link to a version the gateway stored and has
// decided to delete (ErrObjectDeleted), and stamps linked_at on one it
// keeps. It runs in the link's transaction before the INSERT: its UPDATE
// takes the version row's lock, so a deletion deciding at the same moment
// either committed first (and the state says so here) or waits for this
// transaction and then finds the new link. A version the gateway did not
// store has no row and is not its business.
//
// It returns the SHA-256 the upload recorded ("" for none), when the
// version is still what was recorded (size and ETag): S3's "null" version
// of a bucket without versioning may have been written over by another
// writer since, and its digest is then not known here.
func (s *DB) pinStored(ctx context.Context, tx *sql.Tx, o ledger.Object, now any) (string, error) {
	h := versionHash(o)
	res, err := tx.ExecContext(ctx, `UPDATE objects SET linked_at = ? WHERE version_hash = ? AND state = 'stored'`, now, h)
	if err != nil {
		return "", err
	}
	if n, err := engine.Affected(res); err != nil {
		return "", err
	} else if n > 0 {
		var sum engine.NullStr
		err := tx.QueryRowContext(ctx, `SELECT sha256 FROM objects WHERE version_hash = ? AND size = ? AND etag = ?`,
			h, o.Size, o.ETag).Scan(&sum)
		if engine.IsNoRows(err) {
			return "", nil
		}
		return string(sum), err
	}
	var state string
	err = tx.QueryRowContext(ctx, `SELECT state FROM objects WHERE version_hash = ?`, h).Scan(&state)
	switch {
	case engine.IsNoRows(err):
		return "", nil
	case err != nil:
		return "", err
	}
	return "", fmt.Errorf("%w: %s@%s is %s", ledger.ErrObjectDeleted, o.Key, o.VersionID, state)
}

// DeletionFinish records the store's answer for d. Only a row still
// deleting changes, so a late report from a caller whose lease lapsed
// cannot undo another's; the deletion that makes the tombstone writes the
// object.deleted webhook event in its transaction, naming d.DecidedBy
// (the actor of the decision, audited then) whoever finishes. Errors:
// ErrNotFound, ErrUnavailable.
func (s *DB) DeletionFinish(ctx context.Context, d ledger.Deletion, failure error) error {
	h := versionHash(d.Object)
	now := s.Stamp()
	return s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var res sql.Result
		var err error
		if failure == nil {
			// check_at keeps when the tombstone was made, by the clock
			// the audit retention reads.
			res, err = tx.ExecContext(ctx, s.Q(`UPDATE objects SET state = 'deleted', deleted_at = ?, check_at = {now},
  last_error = NULL WHERE version_hash = ? AND state = 'deleting'`), s.TimeArg(now), s.DBNow(), h)
			if n, aerr := engine.Affected(res); err == nil && aerr == nil && n > 0 {
				return s.Enqueue(ctx, tx, ledger.Event{Type: ledger.EventObjectDeleted, Timestamp: now, Data: ledger.EventData{
					Object: ledger.EventObjectOf(d.Object),
					Actor:  ledger.EventActorOf(d.DecidedBy)}})
			}
		} else {
			retry := ledger.DeletionBackoff(d.Attempts + 1)
			res, err = tx.ExecContext(ctx, s.Q(`UPDATE objects SET attempts = attempts + 1, last_error = ?,
  check_at = {now+} WHERE version_hash = ? AND state = 'deleting'`),
				clip(failure.Error(), 1000), s.DBNow(), retry.Microseconds(), h)
		}
		if err != nil {
			return err
		}
		if n, err := engine.Affected(res); err != nil || n > 0 {
			return err
		}
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM objects WHERE version_hash = ?`, h).Scan(&one); engine.IsNoRows(err) {
			return ledger.ErrNotFound
		} else if err != nil {
			return err
		}
		// Finished already (another holder reported first), or stored
		// anew by a PUT: nothing of this deletion is left to record.
		return nil
	})
}

// clip shortens s to at most n bytes without splitting a character.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// txNow reads the database's clock (or DBClock) inside tx, once, for a
// decision the Go code makes from several rows: a retention verdict is
// not one statement's WHERE clause, but it is still the database's clock
// that judges it, never a process's.
func (s *DB) txNow(ctx context.Context, tx *sql.Tx) (time.Time, error) {
	var now engine.TimeCol
	if err := tx.QueryRowContext(ctx, s.Q(`SELECT {now}`), s.DBNow()).Scan(&now); err != nil {
		return time.Time{}, err
	}
	return now.T, nil
}

// lease hands row out until now + ledger.DeletionLease.
func (s *DB) lease(ctx context.Context, tx *sql.Tx, row *objectRow, now time.Time) error {
	_, err := tx.ExecContext(ctx, `UPDATE objects SET check_at = ? WHERE version_hash = ?`,
		s.TimeArg(capTime(now.Add(ledger.DeletionLease))), versionHash(row.Object))
	return err
}

// capTime keeps a computed time within what every backend stores.
func capTime(t time.Time) time.Time {
	if t.After(engine.StorableMax) {
		return engine.StorableMax
	}
	return t
}

// inList is "(?, ?, …)" with n placeholders.

// by is the key of a as a decision records it (no request id), nil for
// none.
func by(a *ledger.Actor) *ledger.Actor {
	if a == nil {
		return nil
	}
	return &ledger.Actor{KeyID: a.KeyID, KeyName: a.KeyName}
}
