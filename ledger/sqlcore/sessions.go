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

const sessionColumns = `s.id, s.token_hash, s.link_id, s.grant_id, s.account_id, s.bucket,
  s.object_key, s.version_id, s.size, s.etag, s.content_type, s.last_modified, s.filename,
  s.byte_budget, s.bytes_drawn, s.max_concurrency, s.expires_at, s.revoked_at, s.ended_at,
  s.created_at, l.revoked_at, s.sha256`

const sessionFrom = ` FROM sessions s JOIN links l ON l.id = s.link_id`

func scanSession(r engine.RowScanner) (*ledger.Session, error) {
	var (
		x                                                   ledger.Session
		account, sum                                        engine.NullStr
		lastMod, expires, revoked, ended, at, linkRevokedAt engine.TimeCol
	)
	err := r.Scan(&x.ID, &x.TokenHash, &x.LinkID, &x.GrantID, &account, &x.Object.Bucket,
		&x.Object.Key, &x.Object.VersionID, &x.Object.Size, &x.Object.ETag, &x.Object.ContentType,
		&lastMod, &x.Filename, &x.ByteBudget, &x.BytesDrawn, &x.MaxConcurrency, &expires,
		&revoked, &ended, &at, &linkRevokedAt, &sum)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, ledger.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	x.AccountID = string(account)
	x.Object.LastModified, x.Object.SHA256 = lastMod.T, string(sum)
	x.ExpiresAt, x.RevokedAt, x.EndedAt, x.CreatedAt = expires.T, revoked.Ptr(), ended.Ptr(), at.T
	x.LinkRevokedAt = linkRevokedAt.Ptr()
	return &x, nil
}

// SessionMint claims one allowance and creates the session, its grant and
// its slot rows in one claim transaction (claimtx.go), which may decide
// other claims of this process with it. With an idempotency key, the key
// decides first: a key another mint committed returns that session
// (created=false), claiming nothing; a concurrent duplicate waits inside
// the database for the first mint's outcome (the link's row lock, then
// the key's) and then either sees the committed session or, when the
// first rolled back, does the work itself. Errors: ErrRefused (with the
// reason; ReasonUnknown for no such link), ErrInvalid, ErrAmbiguous (with
// the session the claim may have minted, for its grant), ErrUnavailable.
//
// A link seen unclaimable is refused from the refusal cache (refusals.go)
// without a claim transaction, but only after what decides first: the
// client's affinity session (a usable one is returned, as ever), and the
// mint's idempotency key (mintRefused).
func (s *DB) SessionMint(ctx context.Context, req ledger.MintRequest) (*ledger.Session, bool, error) {
	if req.SessionID == "" || len(req.TokenHash) != 32 || req.ByteBudget < 1 || req.MaxConcurrency < 1 || req.MaxConcurrency > 64 || req.ExpiresAt.IsZero() {
		return nil, false, fmt.Errorf("%w: session id, token hash, budget ≥ 1, 1..64 slots and expiry are required", ledger.ErrInvalid)
	}
	if !engine.Storable(req.ExpiresAt) {
		return nil, false, fmt.Errorf("%w: session expiry outside %v..%v", ledger.ErrInvalid, engine.StorableMin, engine.StorableMax)
	}
	req.Claim.Kind = ledger.KindSession
	// The kept row, if any, as it stood before any key is read below.
	kept, cached := s.keptByID(req.Claim.LinkID)
	var aliases []string
	if req.Affinity {
		if err := validAffinityKeys(req.AffinityKeys); err != nil {
			return nil, false, err
		}
		if cached && kept.link.RevokedAt != nil {
			// Every session of a revoked link is dead with it
			// (Session.Refusal): the client has none to be sent to,
			// and none its keys could return would serve a byte.
			return nil, false, ledger.Refused(ledger.ReasonRevoked)
		}
		prev, key, now, err := s.latestAffinity(ctx, req.Claim.LinkID, req.Claim.AccountID, req.AffinityKeys)
		switch {
		case err == nil && prev.Usable(now, prev.Object.Size):
			// An affinity mint is a GET without Range: the session is
			// reused only when its budget covers the whole object.
			return prev, false, nil
		case err == nil:
			// The client's session died: the next one is keyed by the
			// dead one, so concurrent requests that saw it die still
			// make only one.
			req.IdempotencyKey = affinityKey(key, prev.ID)
		case errors.Is(err, ledger.ErrNotFound):
			key = ""
			if n := len(req.AffinityKeys); n > 0 {
				key = req.AffinityKeys[n-1]
			}
			req.IdempotencyKey = affinityKey(key, "first")
		default:
			return nil, false, err
		}
		// The client's other keys find the same session; each row names
		// the session, so none can collide with another.
		for _, k := range req.AffinityKeys {
			if k != key {
				aliases = append(aliases, affinityKey(k, "= "+req.SessionID))
			}
		}
	}
	if cached {
		if x, done, err := s.mintRefused(ctx, req, kept); done {
			return x, false, err
		}
	}
	began, epoch := time.Now(), s.refusalEpoch()
	for attempt := 0; attempt < 3; attempt++ {
		c := &claim{linkID: req.Claim.LinkID, req: req.Claim, mint: &mintRows{req: req, aliases: aliases},
			grant: newGrant(req.Claim, s.Stamp(), req.SessionID)}
		s.submit(ctx, c)
		switch {
		case errors.Is(c.err, ledger.ErrAmbiguous):
			return c.session, false, c.err
		case c.err != nil:
			return nil, false, c.err
		case c.granted:
			return c.session, true, nil
		case c.dup:
			x, err := s.sessionByKey(ctx, req)
			if errors.Is(err, ledger.ErrNotFound) {
				// The key's owner rolled back between our duplicate error
				// and this read: try to do the work ourselves.
				continue
			}
			return x, false, err
		default:
			s.noteRefusal(c.link, began, epoch)
			return nil, false, ledger.Refused(c.refusal)
		}
	}
	return nil, false, fmt.Errorf("%w: idempotency key kept changing hands", ledger.ErrUnavailable)
}

// mintRefused answers req from kept, the row the refusal cache kept of
// its link before req's keys were read, when that row refuses req's
// caller; done says it answered. A keyed mint's key decides first, as in
// the claim transaction: an affinity mint's key was read by its affinity
// lookup (every key it mints under is in the range that lookup read);
// an Idempotency-Key is read here, and a session it names is returned.
// Neither read can miss a key that matters: the kept row was read, under
// the link's lock, before them, and a key committed after that row's read
// came with a grant the row did not allow — a top-up or refund since,
// which this process's own forgets, and another process's the cache may
// miss for RefusalCache, as SPEC §1 allows. So the kept row must still be
// the one the cache holds after the reads: one noted since may have been
// read after them.
func (s *DB) mintRefused(ctx context.Context, req ledger.MintRequest, kept refused) (*ledger.Session, bool, error) {
	if _, ok := s.refuses(kept, req.Claim.AccountID); !ok {
		return nil, false, nil
	}
	if req.IdempotencyKey != "" && !req.Affinity {
		x, err := s.sessionByKey(ctx, req)
		switch {
		case err == nil:
			return x, true, nil
		case !errors.Is(err, ledger.ErrNotFound):
			return nil, true, err
		}
	}
	now, ok := s.keptByID(req.Claim.LinkID)
	if !ok || !now.seen.Equal(kept.seen) {
		return nil, false, nil
	}
	o, ok := s.refuses(kept, req.Claim.AccountID)
	if !ok {
		return nil, false, nil
	}
	return nil, true, ledger.Refused(o.Refusal)
}

func (s *DB) sessionByKey(ctx context.Context, req ledger.MintRequest) (*ledger.Session, error) {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	x, err := scanSession(s.Pool.QueryRowContext(ctx, `SELECT `+sessionColumns+sessionFrom+`
JOIN session_idempotency k ON k.session_id = s.id
WHERE k.link_id = ? AND k.scope = ? AND k.idem_key = ?`, req.Claim.LinkID, req.Claim.AccountID, req.IdempotencyKey))
	return x, s.Classify(err)
}

// affinityPrefix starts the idempotency keys of session affinity. Its space
// is not a visible ASCII character, so no client's Idempotency-Key can
// collide with one.
const affinityPrefix = "affinity "

// affinityKey is the idempotency key of a client key's row: "affinity
// first" and "affinity <dead session id>" decide an account's sessions
// (the form before client keys, kept so live sessions survive an
// upgrade); "affinity K first", "affinity K <dead id>" decide client K's,
// and "affinity K = <id>" registers a session another of its keys decided.
// Client keys hold no space, so the rows of K are exactly those between
// "affinity K " and "affinity K!" in the binary collation both engines
// use for the column: a range of the primary key, not a LIKE (whose _
// is a wildcard, and _ is in base64url).
func affinityKey(key, rest string) string {
	if key == "" {
		return affinityPrefix + rest
	}
	return affinityPrefix + key + " " + rest
}

// latestAffinity returns the newest session that affinity gave the client
// on the link, live or not, the client key it was found under ("" for the
// account) and the database's clock when it was read: whether it is still
// usable decides between reusing it and claiming again, so that is the
// database's call, not this process's. The first of keys that has any
// row wins, in one query. Errors: ErrNotFound.
func (s *DB) latestAffinity(ctx context.Context, linkID, account string, keys []string) (*ledger.Session, string, time.Time, error) {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	var (
		now   engine.TimeCol
		found string
		where strings.Builder
		order strings.Builder
		args  = []any{s.DBNow(), linkID, account}
		oargs []any
	)
	if len(keys) == 0 {
		where.WriteString(`k.idem_key LIKE ?`)
		args = append(args, affinityPrefix+"%")
	} else {
		order.WriteString(`CASE`)
		for i, k := range keys {
			if i > 0 {
				where.WriteString(` OR `)
			}
			lo, hi := affinityKey(k, ""), affinityPrefix+k+"!"
			where.WriteString(`(k.idem_key >= ? AND k.idem_key < ?)`)
			args = append(args, lo, hi)
			fmt.Fprintf(&order, ` WHEN k.idem_key >= ? AND k.idem_key < ? THEN %d`, i)
			oargs = append(oargs, lo, hi)
		}
		order.WriteString(` END, `)
	}
	// The selected {now} and the slot lease's {now} take the first two
	// arguments, then the WHERE's and the ORDER BY's.
	queryArgs := append([]any{args[0], s.DBNow()}, args[1:]...)
	queryArgs = append(queryArgs, oargs...)
	var streaming int
	x, err := scanSession(engine.WithMore(s.Pool.QueryRowContext(ctx, s.Q(`SELECT `+sessionColumns+`, {now}, k.idem_key,
  (SELECT COUNT(*) FROM session_slots t WHERE t.session_id = s.id AND t.holder IS NOT NULL AND t.lease_until > {now})`+sessionFrom+`
JOIN session_idempotency k ON k.session_id = s.id
WHERE k.link_id = ? AND k.scope = ? AND (`+where.String()+`)
ORDER BY `+order.String()+`k.created_at DESC, k.session_id DESC LIMIT 1`), queryArgs...), &now, &found, &streaming))
	if err != nil {
		return nil, "", time.Time{}, s.Classify(err)
	}
	x.Streaming = streaming > 0
	for _, k := range keys {
		if strings.HasPrefix(found, affinityKey(k, "")) {
			return x, k, now.T, nil
		}
	}
	return x, "", now.T, nil
}

// SessionGetByAffinity returns the client's affinity session of the link
// when it is usable for a request of need bytes (Session.Usable). Errors:
// ErrNotFound, ErrInvalid, ErrUnavailable.
func (s *DB) SessionGetByAffinity(ctx context.Context, linkID, account string, keys []string, need int64) (*ledger.Session, error) {
	if err := validAffinityKeys(keys); err != nil {
		return nil, err
	}
	x, _, now, err := s.latestAffinity(ctx, linkID, account, keys)
	if err != nil {
		return nil, err
	}
	if !x.Usable(now, need) {
		return nil, ledger.ErrNotFound
	}
	return x, nil
}

// SessionNoteAffinityReuse counts one request that session affinity sent to the
// session instead of claiming. Errors: ErrUnavailable.
func (s *DB) SessionNoteAffinityReuse(ctx context.Context, sessionID string) error {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	_, err := s.Exec(ctx, `UPDATE sessions SET affinity_reuses = affinity_reuses + 1 WHERE id = ?`, sessionID)
	return err
}

// SessionGetByTokenHash returns the session and its link's revocation time.
// Errors: ErrNotFound.
func (s *DB) SessionGetByTokenHash(ctx context.Context, hash []byte) (*ledger.Session, error) {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	var now engine.TimeCol
	x, err := scanSession(engine.WithNow(s.Pool.QueryRowContext(ctx,
		s.Q(`SELECT `+sessionColumns+`, {now}`+sessionFrom+` WHERE s.token_hash = ?`), s.DBNow(), hash), &now))
	if err == nil {
		x.ReadAt = now.T
	}
	return x, s.Classify(err)
}

// SessionGet returns the session by id. Errors: ErrNotFound.
func (s *DB) SessionGet(ctx context.Context, id string) (*ledger.Session, error) {
	ctx, cancel := s.Bound(ctx)
	defer cancel()
	x, err := scanSession(s.Pool.QueryRowContext(ctx, `SELECT `+sessionColumns+sessionFrom+` WHERE s.id = ?`, id))
	return x, s.Classify(err)
}

// SessionRevoke revokes the session; revoking twice keeps the first time.
// When that ends a live session whose grant is not complete, the grant
// gets grant.interrupted (reason revoked), and with an actor the first
// revocation writes its session.revoked audit entry, all in the same
// transaction. Errors: ErrNotFound.
func (s *DB) SessionRevoke(ctx context.Context, id string) error {
	a, err := audit.ActorOf(ctx)
	if err != nil {
		return err
	}
	at := s.Stamp()
	return s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
		// Before the revocation: the session it ends is one that was
		// live, not one already expired or ended.
		err := s.interrupt(ctx, tx, at, `s.id = ? AND s.revoked_at IS NULL AND s.ended_at IS NULL AND s.expires_at > {now}`,
			[]any{id, s.DBNow()}, func(endedSession) string { return ledger.InterruptedRevoked })
		if err != nil {
			return err
		}
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL`, s.TimeArg(at), id)
		if err != nil {
			return err
		}
		n, err := engine.Affected(res)
		switch {
		case err != nil:
			return err
		case n == 1:
			return audit.Write(ctx, tx, a, s.TimeArg(at), ledger.ActionSessionRevoked,
				ledger.AuditTarget{Type: ledger.TargetSession, ID: id}, audit.None{})
		}
		var one int
		if err := tx.QueryRowContext(ctx, `SELECT 1 FROM sessions WHERE id = ?`, id).Scan(&one); engine.IsNoRows(err) {
			return ledger.ErrNotFound
		} else if err != nil {
			return err
		}
		return nil // revoked before: nothing to do
	})
}
