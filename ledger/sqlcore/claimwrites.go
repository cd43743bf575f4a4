package sqlcore

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// The writes of a claim transaction (claimtx.go): what it granted, carried
// out in one statement per table.

// writes are the statements that carry out the grants of granted (in
// arrival order) on the locked rows.
func (s *DB) writes(granted []*claim, rows map[string]*lockedRow) (engine.Writes, error) {
	var w engine.Writes
	if keys := s.keysInsert(granted); keys.SQL != "" {
		w.Stmts = append(w.Stmts, keys)
	}
	evs, err := s.claimEvents(granted, rows)
	if err != nil {
		return engine.Writes{}, err
	}
	w.Stmts = append(w.Stmts, s.decrement(granted, rows), s.grantsInsert(granted))
	if sess := s.sessionsInsert(granted); sess.SQL != "" {
		w.Stmts = append(w.Stmts, sess, s.slotsInsert(granted))
	}
	if evs.SQL != "" {
		w.Stmts = append(w.Stmts, evs)
	}
	w.Commit = true
	return w, nil
}

// claimableSQL is the condition under which a link may grant k claims to
// an account (its arguments: k, the database's clock, the account), the
// one decision that spends an allowance (SPEC §1): remaining > 0 for one
// claim, not revoked, not expired by the database's clock ({now}), not
// bound to another account. Link.Refusal is the same condition in Go, in
// the same order, and judges each claim from the row its transaction
// locked; the decrement repeats it, so that a row that did not say what
// the judgement read matches nothing, and the transaction, whose counts
// then differ, commits nothing.
const claimableSQL = `remaining >= ? AND revoked_at IS NULL AND expires_at > {now}
  AND (account_id IS NULL OR account_id = ?)`

// decrement is the one UPDATE that takes from every row what the batch
// grants of it (and reserves its events' numbers), under claimableSQL by
// the clock the rows were judged by. It must match every row it names.
// It finds its rows by primary key alone, one row as many: the condition
// of each row is inside a CASE, which no index serves, so that the engine
// never scans (and locks, under REPEATABLE READ, with the gaps between)
// entries of another batch's rows in the index of revoked_at or
// expires_at, which MariaDB chose for "id = ? AND revoked_at IS NULL AND
// …" and which made two batches wait for each other (1213 in
// BatchesOfManyLinksOnTwoProcessesNeverDeadlock).
func (s *DB) decrement(granted []*claim, rows map[string]*lockedRow) engine.Stmt {
	var ids []string
	for _, c := range granted {
		if x := rows[c.link.ID]; x.granted > 0 && !slices.Contains(ids, c.link.ID) {
			ids = append(ids, c.link.ID)
		}
	}
	slices.Sort(ids)
	now := s.TimeArg(ledger.Micro(rows[ids[0]].link.ReadAt))
	cond := strings.ReplaceAll(claimableSQL, "{now}", s.D.NowSQL)
	var (
		take, seq, where strings.Builder
		args, seqArgs    []any
		whereArgs        []any
	)
	take.WriteString(`CASE id`)
	seq.WriteString(`CASE id`)
	where.WriteString(`CASE id`)
	for _, id := range ids {
		x := rows[id]
		take.WriteString(` WHEN ? THEN ?`)
		args = append(args, id, x.granted)
		seq.WriteString(` WHEN ? THEN ?`)
		seqArgs = append(seqArgs, id, x.events)
		where.WriteString(` WHEN ? THEN ` + cond)
		whereArgs = append(whereArgs, id, x.granted, now, x.account)
	}
	take.WriteString(` END`)
	seq.WriteString(` END`)
	where.WriteString(` END`)
	args = append(append(append(args, seqArgs...), stringsAny(ids)...), whereArgs...)
	return engine.Stmt{
		SQL: `UPDATE links SET remaining = remaining - ` + take.String() + `, event_seq = event_seq + ` + seq.String() +
			` WHERE id IN (` + marks(len(ids)) + `) AND ` + where.String(),
		Args: args,
		Rows: int64(len(ids)),
	}
}

// grantsInsert writes every grant of the batch in one INSERT.
func (s *DB) grantsInsert(granted []*claim) engine.Stmt {
	args := make([]any, 0, 8*len(granted))
	for _, c := range granted {
		g := c.grant
		args = append(args, g.ID, g.LinkID, g.Kind, engine.OrNull(g.AccountID), g.Status, s.TimeArg(g.CreatedAt), g.Client, engine.OrNull(g.SessionID))
	}
	return engine.Stmt{
		SQL:  `INSERT INTO grants (id, link_id, kind, account_id, status, created_at, client, session_id) VALUES ` + rowsOf(len(granted), 8),
		Args: args,
		Rows: int64(len(granted)),
	}
}

// mintedSession is the session c mints on the locked row l: pinned from
// it (object version, size, ETag, filename, digest), bound to the link's
// account, not the caller's (SPEC §5), as SessionGet would read it.
func mintedSession(c *claim, l *ledger.Link) *ledger.Session {
	r := c.mint.req
	return &ledger.Session{
		ID: r.SessionID, TokenHash: r.TokenHash, LinkID: l.ID, GrantID: c.grant.ID, AccountID: l.AccountID,
		Object: l.Object, Filename: l.Filename, ByteBudget: r.ByteBudget, MaxConcurrency: r.MaxConcurrency,
		ExpiresAt: ledger.Micro(r.ExpiresAt), CreatedAt: c.grant.CreatedAt,
	}
}

// sessionsInsert writes the sessions the batch mints, their object
// version copied from the locked link rows; empty when it mints none.
func (s *DB) sessionsInsert(granted []*claim) engine.Stmt {
	var (
		n    int
		args []any
	)
	for _, c := range granted {
		x := c.session
		if x == nil {
			continue
		}
		n++
		var lastMod any
		if !x.Object.LastModified.IsZero() {
			lastMod = s.TimeArg(x.Object.LastModified)
		}
		args = append(args, x.ID, x.TokenHash, x.LinkID, x.GrantID, engine.OrNull(x.AccountID), x.Object.Bucket, x.Object.Key,
			x.Object.VersionID, x.Object.Size, x.Object.ETag, x.Object.ContentType, lastMod, x.Filename,
			x.ByteBudget, 0, x.MaxConcurrency, s.TimeArg(x.ExpiresAt), s.TimeArg(x.CreatedAt), engine.OrNull(x.Object.SHA256))
	}
	if n == 0 {
		return engine.Stmt{}
	}
	return engine.Stmt{
		SQL: `INSERT INTO sessions (id, token_hash, link_id, grant_id, account_id, bucket, object_key, version_id, size,
  etag, content_type, last_modified, filename, byte_budget, bytes_drawn, max_concurrency, expires_at, created_at, sha256)
VALUES ` + rowsOf(n, 19),
		Args: args,
		Rows: int64(n),
	}
}

// slotsInsert writes one free slot row per allowed concurrent request of
// each session the batch mints.
func (s *DB) slotsInsert(granted []*claim) engine.Stmt {
	var (
		n    int
		args []any
	)
	free := s.TimeArg(time.Unix(0, 0))
	for _, c := range granted {
		if c.session == nil {
			continue
		}
		for i := range c.session.MaxConcurrency {
			n++
			args = append(args, c.session.ID, i, free)
		}
	}
	return engine.Stmt{
		SQL:  `INSERT INTO session_slots (session_id, slot, holder, lease_until) VALUES ` + repeatRows(n, "(?, ?, NULL, ?)"),
		Args: args,
		Rows: int64(n),
	}
}

// keysInsert writes the idempotency and affinity keys of the mints of
// batch; created_at is the database's clock, which orders a client's
// affinity keys (latestAffinity), so processes agree on the newest.
// Empty when none has a key.
func (s *DB) keysInsert(batch []*claim) engine.Stmt {
	var (
		n    int
		args []any
	)
	for _, c := range batch {
		if c.mint == nil {
			continue
		}
		r := c.mint.req
		keys := c.mint.aliases
		if r.IdempotencyKey != "" {
			keys = append([]string{r.IdempotencyKey}, keys...)
		}
		for _, k := range keys {
			n++
			args = append(args, c.req.LinkID, c.req.AccountID, k, r.SessionID, s.DBNow())
		}
	}
	if n == 0 {
		return engine.Stmt{}
	}
	return engine.Stmt{
		SQL:  `INSERT INTO session_idempotency (link_id, scope, idem_key, session_id, created_at) VALUES ` + repeatRows(n, "(?, ?, ?, ?, "+s.D.NowSQL+")"),
		Args: args,
		Rows: int64(n),
	}
}

// claimEvents is the outbox INSERT announcing the grants (SPEC §6):
// grant.created, then session.created for a mint, then link.exhausted when
// a grant took the last download, each numbered by its link's own
// sequence from the locked row on, as the batch's decrement reserves the
// numbers. Each event reads the row as its own claim left it, as if the
// claims had run one after another. Empty with webhooks off.
func (s *DB) claimEvents(granted []*claim, rows map[string]*lockedRow) (engine.Stmt, error) {
	if !s.Webhooks {
		return engine.Stmt{}, nil
	}
	var (
		n    int
		args []any
	)
	created := s.Stamp()
	for _, c := range granted {
		x := rows[c.link.ID]
		for _, e := range grantEvents(c) {
			x.events++
			e.Timestamp = ledger.Micro(e.Timestamp)
			body, err := json.Marshal(e)
			if err != nil {
				return engine.Stmt{}, fmt.Errorf("sqlcore: event %s: %w", e.Type, err)
			}
			n++
			args = append(args, engine.NewID(), c.link.ID, x.eventSeq+int64(x.events), e.Type, string(body), s.TimeArg(created), s.DBNow())
		}
	}
	return engine.Stmt{
		SQL: `INSERT INTO webhook_outbox (event_id, link_id, link_seq, event_type, payload, created_at, next_attempt_at) VALUES ` +
			repeatRows(n, "(?, ?, ?, ?, ?, ?, "+s.D.NowSQL+")"),
		Args: args,
		Rows: int64(n),
	}, nil
}

// grantEvents are the events of the granted claim c, its row as its claim
// left it.
func grantEvents(c *claim) []ledger.Event {
	g, l := c.grant, c.link
	expires := l.ExpiresAt
	evs := []ledger.Event{{Type: ledger.EventGrantCreated, Timestamp: g.CreatedAt, Data: ledger.EventData{
		LinkID: l.ID, GrantID: g.ID, SessionID: g.SessionID, AccountID: g.AccountID, Client: g.Client,
		Kind: g.Kind, Downloads: engine.Ptr(l.Allowance), Remaining: engine.Ptr(l.Remaining), ExpiresAt: &expires,
		SHA256: l.Object.SHA256,
	}}}
	if m := c.mint; m != nil {
		// The session is bound to the link's account, not the caller's
		// (SPEC §5), as the session row is.
		sessionExpires := ledger.Micro(m.req.ExpiresAt)
		evs = append(evs, ledger.Event{Type: ledger.EventSessionCreated, Timestamp: g.CreatedAt, Data: ledger.EventData{
			LinkID: l.ID, GrantID: g.ID, SessionID: m.req.SessionID, AccountID: l.AccountID, Client: g.Client,
			ExpiresAt: &sessionExpires, ByteBudget: m.req.ByteBudget, MaxConcurrency: m.req.MaxConcurrency,
		}})
	}
	if l.Remaining <= 0 {
		evs = append(evs, ledger.Event{Type: ledger.EventLinkExhausted, Timestamp: g.CreatedAt, Data: ledger.EventData{
			LinkID: l.ID, AccountID: l.AccountID, Downloads: engine.Ptr(l.Allowance), Remaining: engine.Ptr(0), ExpiresAt: &expires,
		}})
	}
	return evs
}

// marks is n placeholders separated by commas.
func marks(n int) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat("?, ", n-1) + "?"
}

// rowsOf is n rows of k placeholders each, for a multi-row VALUES.
func rowsOf(n, k int) string { return repeatRows(n, "("+marks(k)+")") }

func repeatRows(n int, row string) string {
	if n <= 0 {
		return ""
	}
	return strings.Repeat(row+", ", n-1) + row
}

func stringsAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

func newGrant(req ledger.ClaimRequest, now time.Time, sessionID string) *ledger.Grant {
	client := req.Client
	if len(client) > 255 {
		client = client[:255]
	}
	return &ledger.Grant{
		ID: engine.NewID(), LinkID: req.LinkID, Kind: req.Kind, AccountID: req.AccountID,
		Status: ledger.StatusGranted, CreatedAt: now, Client: client, SessionID: sessionID,
	}
}
