package sqlcore

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// The backfill of SHA-256s (ledger.Digests): versions the gateway stored
// before it computed digests, found by primary key order, so a run goes
// through the table once whatever it records meanwhile.

var _ ledger.Digests = (*DB)(nil)

// DigestCountMissing counts the stored versions without a SHA-256 and their
// bytes. Errors: ErrUnavailable.
func (s *DB) DigestCountMissing(ctx context.Context) (int, int64, error) {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	var (
		n     int
		bytes sql.NullInt64
	)
	err := s.Pool.QueryRowContext(ctx, `SELECT COUNT(*), SUM(size) FROM objects WHERE state = 'stored' AND sha256 IS NULL`).
		Scan(&n, &bytes)
	return n, bytes.Int64, s.Classify(err)
}

// ObjectListWithoutDigest returns at most limit stored versions without a
// SHA-256 after the cursor (the hex version hash of the last one a call
// returned), in version hash order. Errors: ErrInvalid, ErrUnavailable.
func (s *DB) ObjectListWithoutDigest(ctx context.Context, after string, limit int) ([]ledger.StoredObject, string, error) {
	if limit < 1 {
		return nil, "", fmt.Errorf("%w: limit must be at least 1", ledger.ErrInvalid)
	}
	from, err := hex.DecodeString(after)
	if err != nil || (len(from) != 0 && len(from) != 32) {
		return nil, "", fmt.Errorf("%w: not a cursor of ObjectListWithoutDigest", ledger.ErrInvalid)
	}
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	rows, err := s.Pool.QueryContext(ctx, `SELECT version_hash, `+objectColumns+` FROM objects
WHERE version_hash > ? AND state = 'stored' AND sha256 IS NULL ORDER BY version_hash LIMIT ?`, from, limit)
	if err != nil {
		return nil, "", s.Classify(err)
	}
	defer rows.Close()
	var (
		out  []ledger.StoredObject
		last []byte
	)
	for rows.Next() {
		var h []byte
		row, err := scanObject(prefixed{rows, &h})
		if err != nil {
			return nil, "", s.Classify(err)
		}
		out, last = append(out, row.StoredObject), h
	}
	if err := rows.Err(); err != nil {
		return nil, "", s.Classify(err)
	}
	if last == nil {
		return nil, "", nil
	}
	return out, hex.EncodeToString(last), nil
}

// DigestRecord records sum on the version o names and on the links and
// sessions that pin it with the same size and ETag, where none is
// recorded yet. Errors: ErrInvalid, ErrNotFound, ErrConflict,
// ErrUnavailable.
func (s *DB) DigestRecord(ctx context.Context, o ledger.Object, sum string) error {
	if !ledger.ValidSHA256(sum) {
		return fmt.Errorf("%w: sha256 must be 64 lowercase hex digits", ledger.ErrInvalid)
	}
	h := versionHash(o)
	return s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		var recorded engine.NullStr
		err := tx.QueryRowContext(ctx, `SELECT sha256 FROM objects WHERE version_hash = ? AND size = ? AND etag = ?`+s.D.LockRows,
			h, o.Size, o.ETag).Scan(&recorded)
		switch {
		case engine.IsNoRows(err):
			return fmt.Errorf("%w: %s@%s is not a stored version of %d bytes with ETag %s", ledger.ErrNotFound, o.Key, o.VersionID, o.Size, o.ETag)
		case err != nil:
			return err
		case recorded == "":
			if _, err := tx.ExecContext(ctx, `UPDATE objects SET sha256 = ? WHERE version_hash = ?`, sum, h); err != nil {
				return err
			}
		case string(recorded) != sum:
			return fmt.Errorf("%w: %s@%s has SHA-256 %s recorded, its bytes now hash to %s", ledger.ErrConflict, o.Key, o.VersionID, recorded, sum)
		}
		// Links and sessions copied the version when they pinned it, so a
		// download reads its digest from the row it reads anyway.
		if _, err := tx.ExecContext(ctx, `UPDATE links SET sha256 = ?
WHERE object_key = ? AND bucket = ? AND version_id = ? AND size = ? AND etag = ? AND sha256 IS NULL`,
			sum, o.Key, o.Bucket, o.VersionID, o.Size, o.ETag); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `UPDATE sessions SET sha256 = ?
WHERE link_id IN (SELECT id FROM links WHERE object_key = ? AND bucket = ? AND version_id = ?)
  AND size = ? AND etag = ? AND sha256 IS NULL`,
			sum, o.Key, o.Bucket, o.VersionID, o.Size, o.ETag)
		return err
	})
}
