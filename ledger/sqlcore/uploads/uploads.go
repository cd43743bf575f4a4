// Package uploads keeps resumable uploads in the SQL ledger (SPEC §11,
// docs/design.md "Resumable uploads"). Every decision is one conditional
// UPDATE judged by the database's clock, as for session slots: the lock (holder, lease_until), the advance (only
// its holder, only from the recorded offset), the finish, and the hand-out
// of expired uploads to sweepers (a lease of the sweeper's own, taken by
// the UPDATE, read back by its holder: see ledger/sqlcore's sweep.go).
package uploads

import (
	"context"
	"database/sql"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// Table keeps the uploads in progress (ledger.Uploads); ledger/sqlcore's
// DB embeds it.
type Table struct{ *engine.DB }

var _ ledger.Uploads = (*Table)(nil)

// maxUploadExpiry bounds the expiry a caller may ask for, so that
// {now+} stays within what every backend stores.
const maxUploadExpiry = 10 * 366 * 24 * time.Hour

const uploadColumns = `id, bucket, object_key, filename, content_type, size, part_size, upload_offset,
  sha256_state, store_state, created_at, expires_at, finished_at, version_id, etag, sha256, holder, lease_until`

func scanUpload(r engine.RowScanner) (*ledger.Upload, error) {
	var (
		u                                    ledger.Upload
		filename, vid, etag, sum, holder     engine.NullStr
		created, expires, finished, leaseEnd engine.TimeCol
		read                                 engine.TimeCol
	)
	err := engine.WithNow(r, &read).Scan(&u.ID, &u.Bucket, &u.Key, &filename, &u.ContentType, &u.Size, &u.PartSize, &u.Offset,
		&u.SHA256State, &u.StoreState, &created, &expires, &finished, &vid, &etag, &sum, &holder, &leaseEnd)
	if engine.IsNoRows(err) {
		return nil, ledger.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	u.Filename, u.Holder = string(filename), string(holder)
	u.CreatedAt, u.ExpiresAt, u.FinishedAt, u.ReadAt = created.T, expires.T, finished.Ptr(), read.T
	if leaseEnd.T.After(time.Unix(0, 0)) {
		u.LeaseUntil = leaseEnd.T
	}
	if u.FinishedAt != nil {
		u.Object = &ledger.Object{Bucket: u.Bucket, Key: u.Key, VersionID: string(vid), Size: u.Size, ETag: string(etag),
			ContentType: u.ContentType, SHA256: string(sum)}
	}
	return &u, nil
}

// free is the lease_until of a lock nobody holds.
func (s *Table) free() any { return s.TimeArg(time.Unix(0, 0)) }

// UploadCreate records a new upload. Errors: ErrInvalid, ErrConflict,
// ErrUnavailable.
func (s *Table) UploadCreate(ctx context.Context, u ledger.Upload, expiry time.Duration) (*ledger.Upload, error) {
	switch {
	case u.ID == "" || len(u.ID) > 36 || u.Key == "" || len(u.Key) > 1024 || len(u.Bucket) > 255 || len(u.ContentType) > 255:
		return nil, fmt.Errorf("%w: an upload needs an id, a key of at most 1024 bytes, a bucket and a content type of at most 255", ledger.ErrInvalid)
	case utf8.RuneCountInString(u.Filename) > 1024:
		return nil, fmt.Errorf("%w: filename longer than 1024 characters", ledger.ErrInvalid)
	case u.Size < 0 || u.PartSize < 0 || u.Offset != 0:
		return nil, fmt.Errorf("%w: an upload starts at offset 0 of a size >= 0", ledger.ErrInvalid)
	case len(u.SHA256State) == 0 || len(u.SHA256State) > 255:
		return nil, fmt.Errorf("%w: an upload needs the state of its SHA-256", ledger.ErrInvalid)
	case expiry <= 0 || expiry > maxUploadExpiry:
		return nil, fmt.Errorf("%w: upload expiry must be positive and at most %v", ledger.ErrInvalid, maxUploadExpiry)
	}
	var out *ledger.Upload
	err := s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, s.Q(`INSERT INTO uploads (id, bucket, object_key, filename, content_type, size, part_size,
  upload_offset, sha256_state, store_state, state, created_at, expires_at, lease_until)
VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, 'active', ?, {now+}, ?)`),
			u.ID, u.Bucket, u.Key, engine.OrNull(u.Filename), u.ContentType, u.Size, u.PartSize, u.SHA256State, orEmpty(u.StoreState),
			s.TimeArg(s.Stamp()), s.DBNow(), expiry.Microseconds(), s.free())
		if s.D.IsDuplicate(err) {
			return fmt.Errorf("%w: upload %s exists", ledger.ErrConflict, u.ID)
		}
		if err != nil {
			return err
		}
		out, err = scanUpload(tx.QueryRowContext(ctx, s.Q(`SELECT `+uploadColumns+`, {now} FROM uploads WHERE id = ?`), s.DBNow(), u.ID))
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// orEmpty binds nil as an empty value: the blob columns are NOT NULL.
func orEmpty(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// UploadGet returns the upload. Errors: ErrNotFound, ErrUnavailable.
func (s *Table) UploadGet(ctx context.Context, id string) (*ledger.Upload, error) {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	u, err := scanUpload(s.Pool.QueryRowContext(ctx, s.Q(`SELECT `+uploadColumns+`, {now} FROM uploads WHERE id = ?`), s.DBNow(), id))
	if err != nil {
		return nil, s.Classify(err)
	}
	return u, nil
}

// UploadLock takes or renews the lock with one UPDATE. Errors:
// ErrNotFound, ErrLocked, ErrUnavailable.
func (s *Table) UploadLock(ctx context.Context, id, holder string, lease time.Duration) error {
	if holder == "" || len(holder) > 64 || lease <= 0 {
		return fmt.Errorf("%w: a lock needs a holder of at most 64 bytes and a positive lease", ledger.ErrInvalid)
	}
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	now := s.DBNow()
	res, err := s.Exec(ctx, s.Q(`UPDATE uploads SET holder = ?, lease_until = {now+}
WHERE id = ? AND (holder = ? OR lease_until <= {now})`), holder, now, lease.Microseconds(), id, holder, now)
	if changed, err := s.changed(res, err); err != nil || changed {
		return err
	}
	return s.uploadRefusal(ctx, id, ledger.ErrLocked)
}

// uploadRefusal explains a conditional UPDATE of upload id that changed
// nothing: ErrNotFound when there is no such upload, else why.
func (s *Table) uploadRefusal(ctx context.Context, id string, why error) error {
	var one int
	err := s.Pool.QueryRowContext(ctx, `SELECT 1 FROM uploads WHERE id = ?`, id).Scan(&one)
	switch {
	case engine.IsNoRows(err):
		return ledger.ErrNotFound
	case err != nil:
		return s.Classify(err)
	}
	return why
}

// UploadUnlock frees holder's lock. Errors: ErrUnavailable.
func (s *Table) UploadUnlock(ctx context.Context, id, holder string) error {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	_, err := s.Exec(ctx, `UPDATE uploads SET holder = NULL, lease_until = ? WHERE id = ? AND holder = ?`, s.free(), id, holder)
	return err
}

// UploadAdvance records one append. Errors: ErrInvalid, ErrNotFound,
// ErrLocked, ErrConflict, ErrUnavailable.
func (s *Table) UploadAdvance(ctx context.Context, p ledger.UploadAdvanceParams) error {
	switch {
	case p.From < 0 || p.Offset < p.From:
		return fmt.Errorf("%w: an advance goes forward from a non-negative offset (%d to %d)", ledger.ErrInvalid, p.From, p.Offset)
	case len(p.SHA256State) == 0 || len(p.SHA256State) > 255:
		return fmt.Errorf("%w: an advance carries the state of the SHA-256", ledger.ErrInvalid)
	case p.Expiry <= 0 || p.Expiry > maxUploadExpiry:
		return fmt.Errorf("%w: upload expiry must be positive and at most %v", ledger.ErrInvalid, maxUploadExpiry)
	}
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	res, err := s.Exec(ctx, s.Q(`UPDATE uploads SET upload_offset = ?, sha256_state = ?, store_state = ?, expires_at = {now+}
WHERE id = ? AND state = 'active' AND holder = ? AND upload_offset = ? AND ? <= size`),
		p.Offset, p.SHA256State, orEmpty(p.StoreState), s.DBNow(), p.Expiry.Microseconds(), p.ID, p.Holder, p.From, p.Offset)
	if changed, err := s.changed(res, err); err != nil || changed {
		return err
	}
	return s.explainUpload(ctx, p.ID, p.Holder, func(u *ledger.Upload) error {
		if p.Offset > u.Size {
			return fmt.Errorf("%w: offset %d past the upload's %d bytes", ledger.ErrInvalid, p.Offset, u.Size)
		}
		return fmt.Errorf("%w: the upload is at %d, not %d", ledger.ErrConflict, u.Offset, p.From)
	})
}

// changed reports whether a conditional write of an upload changed its
// row, given the write's result and error: Exec's error as it came, a
// failure to count the rows classified. A write that changed nothing is
// explained by its caller (uploadRefusal, explainUpload).
func (s *Table) changed(res sql.Result, err error) (bool, error) {
	if err != nil {
		return false, err
	}
	n, err := engine.Affected(res)
	if err != nil {
		return false, s.Classify(err)
	}
	return n > 0, nil
}

// explainUpload says why a conditional UPDATE of upload id for holder
// changed nothing: ErrNotFound (no such upload), ErrConflict (finished),
// ErrLocked (holder does not hold the lock), else what rest says.
func (s *Table) explainUpload(ctx context.Context, id, holder string, rest func(*ledger.Upload) error) error {
	u, err := scanUpload(s.Pool.QueryRowContext(ctx, s.Q(`SELECT `+uploadColumns+`, {now} FROM uploads WHERE id = ?`), s.DBNow(), id))
	switch {
	case err != nil:
		return s.Classify(err)
	case u.FinishedAt != nil:
		return fmt.Errorf("%w: the upload is finished", ledger.ErrConflict)
	case u.Holder != holder:
		return ledger.ErrLocked
	}
	return rest(u)
}

// UploadFinish records the version a complete upload became. Errors:
// ErrInvalid, ErrNotFound, ErrLocked, ErrConflict, ErrUnavailable.
func (s *Table) UploadFinish(ctx context.Context, id, holder string, o ledger.Object, expiry time.Duration) error {
	switch {
	case o.VersionID == "" || len(o.VersionID) > 1024 || len(o.ETag) > 255:
		return fmt.Errorf("%w: a finished upload needs the version it became", ledger.ErrInvalid)
	case o.SHA256 != "" && !ledger.ValidSHA256(o.SHA256):
		return fmt.Errorf("%w: sha256 must be 64 lowercase hex digits", ledger.ErrInvalid)
	case expiry <= 0 || expiry > maxUploadExpiry:
		return fmt.Errorf("%w: upload expiry must be positive and at most %v", ledger.ErrInvalid, maxUploadExpiry)
	}
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	res, err := s.Exec(ctx, s.Q(`UPDATE uploads SET state = 'finished', finished_at = ?, version_id = ?, etag = ?, sha256 = ?,
  sha256_state = ?, store_state = ?, expires_at = {now+}
WHERE id = ? AND state = 'active' AND holder = ? AND upload_offset = size AND size = ?`),
		s.TimeArg(s.Stamp()), o.VersionID, o.ETag, engine.OrNull(o.SHA256), []byte{}, []byte{}, s.DBNow(), expiry.Microseconds(),
		id, holder, o.Size)
	if changed, err := s.changed(res, err); err != nil || changed {
		return err
	}
	return s.explainUpload(ctx, id, holder, func(u *ledger.Upload) error {
		return fmt.Errorf("%w: %d of %d bytes uploaded, the version has %d", ledger.ErrConflict, u.Offset, u.Size, o.Size)
	})
}

// UploadExpiredClaim hands out expired unfinished uploads, each to one
// caller: candidates by a plain read, taken by a conditional UPDATE that
// writes this call's holder, read back by it. Errors: ErrInvalid,
// ErrUnavailable.
func (s *Table) UploadExpiredClaim(ctx context.Context, lease time.Duration, limit int) ([]ledger.Upload, error) {
	if limit < 1 || lease <= 0 {
		return nil, fmt.Errorf("%w: limit must be at least 1 and the lease positive", ledger.ErrInvalid)
	}
	holder := engine.NewID()
	var out []ledger.Upload
	err := s.InTxWith(ctx, s.D.SweepTx, func(ctx context.Context, tx *sql.Tx) error {
		out = nil
		now := s.DBNow()
		ids, err := s.uploadCandidates(ctx, tx, `state = 'active' AND expires_at <= {now} AND lease_until <= {now}`, limit)
		if err != nil || len(ids) == 0 {
			return err
		}
		in := engine.Placeholders(len(ids))
		args := append([]any{holder, now, lease.Microseconds()}, engine.Anys(ids)...)
		res, err := tx.ExecContext(ctx, s.Q(`UPDATE uploads SET holder = ?, lease_until = {now+}
WHERE id IN `+in+` AND state = 'active' AND expires_at <= {now} AND lease_until <= {now}`), append(args, now, now)...)
		if err != nil {
			return err
		}
		if n, err := engine.Affected(res); err != nil || n == 0 {
			return err
		}
		rows, err := tx.QueryContext(ctx, s.Q(`SELECT `+uploadColumns+`, {now} FROM uploads WHERE id IN `+in+` AND holder = ?`),
			append(append([]any{now}, engine.Anys(ids)...), holder)...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			u, err := scanUpload(rows)
			if err != nil {
				return err
			}
			out = append(out, *u)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// uploadCandidates reads at most limit ids of uploads matching where
// (with one {now} argument per {now} in it), oldest expiry first.
func (s *Table) uploadCandidates(ctx context.Context, tx *sql.Tx, where string, limit int) ([]string, error) {
	now := s.DBNow()
	return engine.ReadIDs(ctx, tx, limit, engine.Read(s.Q(`SELECT id FROM uploads WHERE `+where+` ORDER BY expires_at LIMIT ?`)+s.D.SkipLockedSQL(), now, now, limit))
}

// UploadDelete deletes the upload while holder holds its lock. Errors:
// ErrNotFound, ErrLocked, ErrUnavailable.
func (s *Table) UploadDelete(ctx context.Context, id, holder string) error {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	res, err := s.Exec(ctx, `DELETE FROM uploads WHERE id = ? AND holder = ?`, id, holder)
	if changed, err := s.changed(res, err); err != nil || changed {
		return err
	}
	return s.uploadRefusal(ctx, id, ledger.ErrLocked)
}

// UploadPurge deletes finished uploads past their expiry. Errors:
// ErrInvalid, ErrUnavailable.
func (s *Table) UploadPurge(ctx context.Context, limit int) (int, error) {
	if limit < 1 {
		return 0, fmt.Errorf("%w: limit must be at least 1", ledger.ErrInvalid)
	}
	const due = `state = 'finished' AND expires_at <= {now} AND lease_until <= {now}`
	var n int
	err := s.InTxWith(ctx, s.D.SweepTx, func(ctx context.Context, tx *sql.Tx) error {
		n = 0
		ids, err := s.uploadCandidates(ctx, tx, due, limit)
		if err != nil || len(ids) == 0 {
			return err
		}
		now := s.DBNow()
		res, err := tx.ExecContext(ctx, s.Q(`DELETE FROM uploads WHERE id IN `+engine.Placeholders(len(ids))+` AND `+due),
			append(engine.Anys(ids), now, now)...)
		if err != nil {
			return err
		}
		m, err := engine.Affected(res)
		n = int(m)
		return err
	})
	return n, err
}
