package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

const sessionColumns = `s.id, s.token_hash, s.link_id, s.grant_id, s.account_id, s.bucket,
  s.object_key, s.version_id, s.size, s.etag, s.content_type, s.last_modified, s.filename,
  s.byte_budget, s.bytes_drawn, s.max_concurrency, s.expires_at, s.revoked_at, s.ended_at,
  s.created_at, l.revoked_at`

const sessionFrom = ` FROM sessions s JOIN links l ON l.id = s.link_id`

func scanSession(r rowScanner) (*ledger.Session, error) {
	var (
		x                                                   ledger.Session
		account                                             nullStr
		lastMod, expires, revoked, ended, at, linkRevokedAt timeCol
	)
	err := r.Scan(&x.ID, &x.TokenHash, &x.LinkID, &x.GrantID, &account, &x.Object.Bucket,
		&x.Object.Key, &x.Object.VersionID, &x.Object.Size, &x.Object.ETag, &x.Object.ContentType,
		&lastMod, &x.Filename, &x.ByteBudget, &x.BytesDrawn, &x.MaxConcurrency, &expires,
		&revoked, &ended, &at, &linkRevokedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ledger.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	x.AccountID = string(account)
	x.Object.LastModified = lastMod.T
	x.ExpiresAt, x.RevokedAt, x.EndedAt, x.CreatedAt = expires.T, revoked.ptr(), ended.ptr(), at.T
	x.LinkRevokedAt = linkRevokedAt.ptr()
	return &x, nil
}

// MintSession claims one allowance and creates the session, its grant and
// its slot rows in one transaction. With an idempotency key, the key's row
// is inserted first: a concurrent duplicate blocks on it inside the
// database until the first transaction ends, then either sees the
// committed session (and returns it, created=false) or, when the first
// rolled back, does the work itself. Errors as Claim; ErrInvalid.
func (s *DB) MintSession(ctx context.Context, req ledger.MintRequest) (*ledger.Session, bool, error) {
	if req.SessionID == "" || len(req.TokenHash) != 32 || req.ByteBudget < 1 || req.MaxConcurrency < 1 || req.MaxConcurrency > 64 || req.ExpiresAt.IsZero() {
		return nil, false, fmt.Errorf("%w: session id, token hash, budget ≥ 1, 1..64 slots and expiry are required", ledger.ErrInvalid)
	}
	if !storable(req.ExpiresAt) {
		return nil, false, fmt.Errorf("%w: session expiry outside %v..%v", ledger.ErrInvalid, storableMin, storableMax)
	}
	req.Claim.Kind = ledger.KindSession
	if req.Affinity {
		prev, now, err := s.latestAffinity(ctx, req.Claim.LinkID, req.Claim.AccountID)
		switch {
		case err == nil && prev.Refusal(now) == "":
			return prev, false, nil
		case err == nil:
			// The account's session died: the next one is keyed by the
			// dead one, so concurrent requests that saw it die still
			// make only one.
			req.IdempotencyKey = affinityPrefix + prev.ID
		case errors.Is(err, ledger.ErrNotFound):
			req.IdempotencyKey = affinityPrefix + "first"
		default:
			return nil, false, err
		}
	}
	for attempt := 0; attempt < 3; attempt++ {
		now := s.now()
		g := newGrant(req.Claim, now, req.SessionID)
		err := s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if req.IdempotencyKey != "" {
				// created_at orders affinity keys (latestAffinity):
				// the database's clock, so processes agree on the newest.
				_, err := tx.ExecContext(ctx, s.q(`INSERT INTO session_idempotency (link_id, scope, idem_key, session_id, created_at)
VALUES (?, ?, ?, ?, {now})`), req.Claim.LinkID, req.Claim.AccountID, req.IdempotencyKey, req.SessionID, s.dbNow())
				if err != nil {
					if s.d.IsDuplicate(err) {
						return errDuplicate
					}
					return err
				}
			}
			if err := s.claim(ctx, tx, g); err != nil {
				return err
			}
			// Pin the link's object version on the session straight from
			// the locked link row. The session is bound to the link's
			// account, not the caller's: a session of an unbound link is
			// anonymous whoever minted it (SPEC §5).
			_, err := tx.ExecContext(ctx, `INSERT INTO sessions (id, token_hash, link_id, grant_id, account_id,
  bucket, object_key, version_id, size, etag, content_type, last_modified, filename,
  byte_budget, bytes_drawn, max_concurrency, expires_at, created_at)
SELECT ?, ?, id, ?, account_id, bucket, object_key, version_id, size, etag, content_type, last_modified,
  filename, ?, 0, ?, ?, ? FROM links WHERE id = ?`,
				req.SessionID, req.TokenHash, g.ID, req.ByteBudget,
				req.MaxConcurrency, s.t(req.ExpiresAt), s.t(now), req.Claim.LinkID)
			if err != nil {
				return err
			}
			var b strings.Builder
			b.WriteString(`INSERT INTO session_slots (session_id, slot, holder, lease_until) VALUES `)
			args := make([]any, 0, 3*req.MaxConcurrency)
			for i := 0; i < req.MaxConcurrency; i++ {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString("(?, ?, NULL, ?)")
				args = append(args, req.SessionID, i, s.t(time.Unix(0, 0)))
			}
			if _, err = tx.ExecContext(ctx, b.String(), args...); err != nil {
				return err
			}
			return s.enqueueClaim(ctx, tx, g, &req)
		})
		switch {
		case err == nil:
			x, err := s.Session(ctx, req.SessionID)
			return x, true, err
		case errors.Is(err, errNoRow):
			return nil, false, s.refusal(ctx, req.Claim)
		case errors.Is(err, errDuplicate):
			x, err := s.sessionByKey(ctx, req)
			if errors.Is(err, ledger.ErrNotFound) {
				// The key's owner rolled back between our duplicate error
				// and this read: try to do the work ourselves.
				continue
			}
			return x, false, err
		default:
			return nil, false, err
		}
	}
	return nil, false, fmt.Errorf("%w: idempotency key kept changing hands", ledger.ErrUnavailable)
}

func (s *DB) sessionByKey(ctx context.Context, req ledger.MintRequest) (*ledger.Session, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	x, err := scanSession(s.db.QueryRowContext(ctx, `SELECT `+sessionColumns+sessionFrom+`
JOIN session_idempotency k ON k.session_id = s.id
WHERE k.link_id = ? AND k.scope = ? AND k.idem_key = ?`, req.Claim.LinkID, req.Claim.AccountID, req.IdempotencyKey))
	return x, s.classify(err)
}

// affinityPrefix starts the idempotency keys of session affinity. Its space
// is not a visible ASCII character, so no client's Idempotency-Key can
// collide with one.
const affinityPrefix = "affinity "

// latestAffinity returns the newest session that affinity gave account on
// the link, live or not, and the database's clock when it was read: whether
// it is still live decides between reusing it and claiming again, so that
// is the database's call, not this process's. Errors: ErrNotFound.
func (s *DB) latestAffinity(ctx context.Context, linkID, account string) (*ledger.Session, time.Time, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var now timeCol
	x, err := scanSession(withNow(s.db.QueryRowContext(ctx, s.q(`SELECT `+sessionColumns+`, {now}`+sessionFrom+`
JOIN session_idempotency k ON k.session_id = s.id
WHERE k.link_id = ? AND k.scope = ? AND k.idem_key LIKE ?
ORDER BY k.created_at DESC, k.session_id DESC LIMIT 1`), s.dbNow(), linkID, account, affinityPrefix+"%"), &now))
	return x, now.T, s.classify(err)
}

// AffinitySession returns the account's live affinity session of the
// link. Errors: ErrNotFound, ErrUnavailable.
func (s *DB) AffinitySession(ctx context.Context, linkID, account string) (*ledger.Session, error) {
	x, now, err := s.latestAffinity(ctx, linkID, account)
	if err != nil {
		return nil, err
	}
	if x.Refusal(now) != "" {
		return nil, ledger.ErrNotFound
	}
	return x, nil
}

// SessionByTokenHash returns the session and its link's revocation time.
// Errors: ErrNotFound.
func (s *DB) SessionByTokenHash(ctx context.Context, hash []byte) (*ledger.Session, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	var now timeCol
	x, err := scanSession(withNow(s.db.QueryRowContext(ctx,
		s.q(`SELECT `+sessionColumns+`, {now}`+sessionFrom+` WHERE s.token_hash = ?`), s.dbNow(), hash), &now))
	if err == nil {
		x.ReadAt = now.T
	}
	return x, s.classify(err)
}

// Session returns the session by id. Errors: ErrNotFound.
func (s *DB) Session(ctx context.Context, id string) (*ledger.Session, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	x, err := scanSession(s.db.QueryRowContext(ctx, `SELECT `+sessionColumns+sessionFrom+` WHERE s.id = ?`, id))
	return x, s.classify(err)
}

// RevokeSession revokes the session; revoking twice keeps the first time.
// Errors: ErrNotFound.
func (s *DB) RevokeSession(ctx context.Context, id string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	res, err := s.exec(ctx, `UPDATE sessions SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, s.t(s.now()), id)
	if err != nil {
		return err
	}
	if n, err := affected(res); err != nil {
		return s.classify(err)
	} else if n == 0 {
		_, err := s.Session(ctx, id)
		return err
	}
	return nil
}

func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }
