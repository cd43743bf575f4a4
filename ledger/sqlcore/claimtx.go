package sqlcore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

// The claim transaction: one transaction decides a batch of claims (one
// claim when it is alone), the way group commit lets many commits share
// one log write (SPEC §1 "Group claims"; group.go gathers the batch).
//
//  1. The link rows are locked in id order (SELECT … FOR UPDATE; on
//     SQLite the write lock taken at BEGIN): two batches that share rows
//     take them in the same order, so they never deadlock each other.
//  2. Each claim is judged, in arrival order, from its locked row and the
//     database's clock read with it, by the claim condition
//     (Link.Refusal, the same condition as claimableSQL): the rows are
//     locked, so what they say holds until COMMIT, on every engine (a
//     locking read is a current read on InnoDB and on TiDB's pessimistic
//     transactions alike).
//  3. One UPDATE takes from each row what it grants (k claims of one
//     link: one decrement of k), under claimableSQL again as a second line
//     of defence, and one INSERT writes every grant, then the sessions,
//     their slots and keys of the mints, and the outbox rows.
//  4. COMMIT only once every write affected exactly the rows decided.

// claim is one request decided by a claim transaction: a claim by token
// hash (LinkClaim) or a session mint (SessionMint).
type claim struct {
	hash      []byte // LinkClaim's token hash; nil for a mint
	linkID    string // a mint's link; LinkClaim's once the hash is resolved
	req       ledger.ClaimRequest
	confirmed bool
	mint      *mintRows
	grant     *ledger.Grant // made on arrival: its id and time

	// What the transaction decided.
	link    *ledger.Link    // the row as it was for this claim
	granted bool            // granted (ambiguous when the COMMIT failed)
	refusal ledger.Reason   // refused: why
	dup     bool            // a mint whose idempotency key is taken
	session *ledger.Session // a granted mint's session
	err     error
	// alone asks for the claim to be decided again in a transaction of
	// its own: its batch failed, or it is a keyed mint the batch refused,
	// whose key must decide first.
	alone bool
	// batch is how many claims shared the transaction that decided it.
	batch int

	// The queue's (group.go).
	queued   time.Time
	waited   time.Duration // in the queue until its batch was taken
	deadline time.Time
	done     chan struct{}
}

// mintRows are what a mint writes beside its grant.
type mintRows struct {
	req     ledger.MintRequest // IdempotencyKey as SessionMint resolved it
	aliases []string           // further affinity keys naming the session
}

// key is the claim's idempotency key row, "" without one.
func (c *claim) key() string {
	if c.mint == nil || c.mint.req.IdempotencyKey == "" {
		return ""
	}
	return c.req.LinkID + "\x00" + c.req.AccountID + "\x00" + c.mint.req.IdempotencyKey
}

// reset forgets what a failed transaction decided, for the claim to be
// decided again.
func (c *claim) reset() {
	c.link, c.granted, c.refusal, c.dup, c.session, c.err, c.alone = nil, false, "", false, nil, nil, false
	if c.hash != nil && c.mint == nil {
		c.grant.LinkID = ""
	}
}

// outcome is what LinkClaim answers for c.
func (c *claim) outcome() (ledger.ClaimOutcome, error) {
	o := ledger.ClaimOutcome{Link: c.link, Refusal: c.refusal}
	if c.granted {
		o.Grant = c.grant
	}
	return o, c.err
}

// ClaimPoint names a point of a claim's way for DB.ClaimHook.
type ClaimPoint int

const (
	// ClaimQueued: the claim waits for the transaction in flight.
	ClaimQueued ClaimPoint = iota
	// ClaimJudged: a transaction judges the claim, its row locked.
	ClaimJudged
)

// decideClaims runs one claim transaction for batch, the claims in arrival
// order, and sets each one's outcome. A batch of one is decided alone: a
// keyed mint's key decides before its refusal, and a member's error is
// its own. It returns the transaction's error: then nothing committed
// (each claim is reset for its caller to try again alone), or, when it
// is ErrAmbiguous, the granted claims' outcome is unknown.
func (s *DB) decideClaims(ctx context.Context, batch []*claim) error {
	alone := len(batch) == 1
	for _, c := range batch {
		c.batch = len(batch)
	}
	if err := s.resolve(ctx, batch); err != nil {
		for _, c := range batch {
			c.reset()
		}
		return err
	}
	live := batch[:0:0]
	for _, c := range batch {
		if c.err == nil {
			live = append(live, c)
		}
	}
	if len(live) == 0 {
		return nil
	}
	var (
		rows = map[string]*lockedRow{}
		seen = map[string]bool{} // idempotency keys found taken
	)
	reads := []Stmt{s.lockRows(live)}
	if keys := s.keysRead(live); keys.SQL != "" {
		reads = append(reads, keys)
	}
	read := func(i int, r *sql.Rows) error {
		if i == 0 {
			return s.scanLocked(r, rows)
		}
		for r.Next() {
			var link, scope, key string
			if err := r.Scan(&link, &scope, &key); err != nil {
				return err
			}
			seen[link+"\x00"+scope+"\x00"+key] = true
		}
		return r.Err()
	}
	plan := func() (w Writes, err error) {
		return s.judge(live, rows, seen, alone)
	}
	// READ COMMITTED: every decision rests on locked rows (SELECT … FOR
	// UPDATE, the conditional UPDATE), which read the latest committed
	// row at any level, and at this level they lock the rows they match
	// and no gaps. Under REPEATABLE READ the batch's UPDATE of the rows
	// "id IN (…)" took next-key locks (a record and the gap before it)
	// beyond its own rows, and two batches of interleaved links
	// deadlocked (BatchesOfManyLinksOnTwoProcessesNeverDeadlock: 1213 in
	// 1 of 8 rounds). The plain read of the idempotency keys then sees
	// what committed before it, a key committed while the batch waited
	// for its rows too.
	err := s.claimTx(ctx, sql.LevelReadCommitted, reads, read, plan)
	var ce *commitError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrInFlight), errors.As(err, &ce):
		return fmt.Errorf("%w: %v", ledger.ErrAmbiguous, err)
	case alone && s.d.IsDuplicate(err) && live[0].key() != "":
		// The key's owner committed first: the mint returns its session.
		c := live[0]
		c.reset()
		c.dup = true
		return nil
	}
	for _, c := range live {
		c.reset()
	}
	return err
}

// lockedRow is a link row as the claim transaction locked it.
type lockedRow struct {
	link     ledger.Link // ReadAt the database's clock of the read
	eventSeq int64
	// What the batch takes from it.
	granted   int
	events    int
	account   string // of a granted claim, for the decrement's condition
	remaining int    // as the claims judged so far leave it
}

// lockRows is the read that locks the batch's rows: by id, in id order
// (the order every batch takes them in, so that two never deadlock), or
// by token hash when the batch names one row only. With the row the
// database's clock, by which every claim of the batch is judged.
func (s *DB) lockRows(batch []*claim) Stmt {
	sel := `SELECT ` + linkColumns + `, event_seq, ` + s.d.NowSQL + ` FROM links WHERE `
	ids := distinctIDs(batch)
	if len(ids) == 0 {
		return Stmt{SQL: sel + `token_hash = ?` + s.d.LockRows, Args: []any{s.dbNow(), batch[0].hash}}
	}
	args := []any{s.dbNow()}
	for _, id := range ids {
		args = append(args, id)
	}
	return Stmt{SQL: sel + `id IN (` + marks(len(ids)) + `) ORDER BY id` + s.d.LockRows, Args: args}
}

// distinctIDs are the link ids of batch in ascending order, or none when
// every claim names the same token hash and no id (resolve).
func distinctIDs(batch []*claim) []string {
	set := map[string]bool{}
	var ids []string
	for _, c := range batch {
		if c.linkID == "" {
			return nil
		}
		if !set[c.linkID] {
			set[c.linkID] = true
			ids = append(ids, c.linkID)
		}
	}
	slices.Sort(ids)
	return ids
}

func (s *DB) scanLocked(r *sql.Rows, rows map[string]*lockedRow) error {
	for r.Next() {
		var (
			x   lockedRow
			now timeCol
		)
		l, err := scanLink(withMore(r, &x.eventSeq, &now))
		if err != nil {
			return err
		}
		l.ReadAt = now.T
		x.link, x.remaining = *l, l.Remaining
		rows[l.ID] = &x
		s.ids.put(l.TokenHash, l.ID)
	}
	return r.Err()
}

// keysRead reads which of the batch's idempotency keys are taken, after
// the rows are locked: every transaction that inserts a key of a link
// holds the link's lock first, so on InnoDB (whose read view starts at
// this read) a key committed before is seen. Where the snapshot is older
// (TiDB's, taken at BEGIN) a key committed since is not; its INSERT then
// fails as a duplicate and the mints are decided alone, where the key
// decides first. Empty when no claim of batch has a key.
func (s *DB) keysRead(batch []*claim) Stmt {
	var (
		b    strings.Builder
		args []any
	)
	for _, c := range batch {
		if c.key() == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(` OR `)
		}
		b.WriteString(`(link_id = ? AND scope = ? AND idem_key = ?)`)
		args = append(args, c.req.LinkID, c.req.AccountID, c.mint.req.IdempotencyKey)
	}
	if b.Len() == 0 {
		return Stmt{}
	}
	return Stmt{SQL: `SELECT link_id, scope, idem_key FROM session_idempotency WHERE ` + b.String(), Args: args}
}

// judge decides each claim of batch from the locked rows, in arrival
// order, and returns the writes that carry out what it granted.
func (s *DB) judge(batch []*claim, rows map[string]*lockedRow, seen map[string]bool, alone bool) (Writes, error) {
	byHash := map[string]*lockedRow{}
	for _, x := range rows {
		byHash[string(x.link.TokenHash)] = x
	}
	var granted []*claim
	for _, c := range batch {
		x := rows[c.linkID]
		if c.linkID == "" {
			x = byHash[string(c.hash)]
		}
		if x == nil {
			if c.mint != nil {
				c.refusal = ledger.ReasonUnknown
			} else {
				c.err = ledger.ErrNotFound
			}
			continue
		}
		if err := s.hook(ClaimJudged, c.req); err != nil {
			if !alone {
				return Writes{}, err // the batch fails; each claim is decided alone
			}
			c.err = err
			continue
		}
		l := x.link
		l.Remaining = x.remaining
		c.link = &l
		if c.mint == nil {
			c.grant.LinkID = l.ID
			if !l.ClaimsAtOnce(c.confirmed) {
				continue // for the caller to mint or show a page
			}
		}
		if c.key() != "" && seen[c.key()] {
			c.dup = true
			continue
		}
		if r := l.Refusal(c.req.AccountID, l.ReadAt); r != "" {
			if c.key() != "" && !alone {
				// A keyed mint's key decides before its refusal: a taken
				// key returns its session even from a spent link.
				c.alone = true
				continue
			}
			c.refusal = r
			continue
		}
		x.remaining--
		x.granted++
		x.account = c.req.AccountID
		l.Remaining = x.remaining
		c.granted = true
		granted = append(granted, c)
		if c.mint != nil {
			c.session = mintedSession(c, &l)
		}
	}
	if alone && len(granted) == 0 && batch[0].key() != "" && batch[0].refusal != "" && batch[0].link != nil {
		// Alone, a refused keyed mint still tries its key, which decides
		// first: a duplicate returns the key's session; else the refusal
		// stands and nothing is kept.
		return Writes{Stmts: []Stmt{s.keysInsert(batch)}}, nil
	}
	if len(granted) == 0 {
		return Writes{}, nil
	}
	return s.writes(granted, rows)
}

// writes are the statements that carry out the grants of granted (in
// arrival order) on the locked rows.
func (s *DB) writes(granted []*claim, rows map[string]*lockedRow) (Writes, error) {
	var w Writes
	if keys := s.keysInsert(granted); keys.SQL != "" {
		w.Stmts = append(w.Stmts, keys)
	}
	evs, err := s.claimEvents(granted, rows)
	if err != nil {
		return Writes{}, err
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
func (s *DB) decrement(granted []*claim, rows map[string]*lockedRow) Stmt {
	var ids []string
	for _, c := range granted {
		if x := rows[c.link.ID]; x.granted > 0 && !slices.Contains(ids, c.link.ID) {
			ids = append(ids, c.link.ID)
		}
	}
	slices.Sort(ids)
	now := s.t(ledger.Micro(rows[ids[0]].link.ReadAt))
	cond := strings.ReplaceAll(claimableSQL, "{now}", s.d.NowSQL)
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
	return Stmt{
		SQL: `UPDATE links SET remaining = remaining - ` + take.String() + `, event_seq = event_seq + ` + seq.String() +
			` WHERE id IN (` + marks(len(ids)) + `) AND ` + where.String(),
		Args: args,
		Rows: int64(len(ids)),
	}
}

// grantsInsert writes every grant of the batch in one INSERT.
func (s *DB) grantsInsert(granted []*claim) Stmt {
	args := make([]any, 0, 8*len(granted))
	for _, c := range granted {
		g := c.grant
		args = append(args, g.ID, g.LinkID, g.Kind, orNull(g.AccountID), g.Status, s.t(g.CreatedAt), g.Client, orNull(g.SessionID))
	}
	return Stmt{
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
func (s *DB) sessionsInsert(granted []*claim) Stmt {
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
			lastMod = s.t(x.Object.LastModified)
		}
		args = append(args, x.ID, x.TokenHash, x.LinkID, x.GrantID, orNull(x.AccountID), x.Object.Bucket, x.Object.Key,
			x.Object.VersionID, x.Object.Size, x.Object.ETag, x.Object.ContentType, lastMod, x.Filename,
			x.ByteBudget, 0, x.MaxConcurrency, s.t(x.ExpiresAt), s.t(x.CreatedAt), orNull(x.Object.SHA256))
	}
	if n == 0 {
		return Stmt{}
	}
	return Stmt{
		SQL: `INSERT INTO sessions (id, token_hash, link_id, grant_id, account_id, bucket, object_key, version_id, size,
  etag, content_type, last_modified, filename, byte_budget, bytes_drawn, max_concurrency, expires_at, created_at, sha256)
VALUES ` + rowsOf(n, 19),
		Args: args,
		Rows: int64(n),
	}
}

// slotsInsert writes one free slot row per allowed concurrent request of
// each session the batch mints.
func (s *DB) slotsInsert(granted []*claim) Stmt {
	var (
		n    int
		args []any
	)
	free := s.t(time.Unix(0, 0))
	for _, c := range granted {
		if c.session == nil {
			continue
		}
		for i := range c.session.MaxConcurrency {
			n++
			args = append(args, c.session.ID, i, free)
		}
	}
	return Stmt{
		SQL:  `INSERT INTO session_slots (session_id, slot, holder, lease_until) VALUES ` + repeatRows(n, "(?, ?, NULL, ?)"),
		Args: args,
		Rows: int64(n),
	}
}

// keysInsert writes the idempotency and affinity keys of the mints of
// batch; created_at is the database's clock, which orders a client's
// affinity keys (latestAffinity), so processes agree on the newest.
// Empty when none has a key.
func (s *DB) keysInsert(batch []*claim) Stmt {
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
			args = append(args, c.req.LinkID, c.req.AccountID, k, r.SessionID, s.dbNow())
		}
	}
	if n == 0 {
		return Stmt{}
	}
	return Stmt{
		SQL:  `INSERT INTO session_idempotency (link_id, scope, idem_key, session_id, created_at) VALUES ` + repeatRows(n, "(?, ?, ?, ?, "+s.d.NowSQL+")"),
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
func (s *DB) claimEvents(granted []*claim, rows map[string]*lockedRow) (Stmt, error) {
	if !s.Webhooks {
		return Stmt{}, nil
	}
	var (
		n    int
		args []any
	)
	created := s.now()
	for _, c := range granted {
		x := rows[c.link.ID]
		for _, e := range grantEvents(c) {
			x.events++
			e.Timestamp = ledger.Micro(e.Timestamp)
			body, err := json.Marshal(e)
			if err != nil {
				return Stmt{}, fmt.Errorf("sqlcore: event %s: %w", e.Type, err)
			}
			n++
			args = append(args, newID(), c.link.ID, x.eventSeq+int64(x.events), e.Type, string(body), s.t(created), s.dbNow())
		}
	}
	return Stmt{
		SQL: `INSERT INTO webhook_outbox (event_id, link_id, link_seq, event_type, payload, created_at, next_attempt_at) VALUES ` +
			repeatRows(n, "(?, ?, ?, ?, ?, ?, "+s.d.NowSQL+")"),
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
		Kind: g.Kind, Downloads: ptr(l.Allowance), Remaining: ptr(l.Remaining), ExpiresAt: &expires,
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
			LinkID: l.ID, AccountID: l.AccountID, Downloads: ptr(l.Allowance), Remaining: ptr(0), ExpiresAt: &expires,
		}})
	}
	return evs
}

// claimTx runs one claim transaction: the reads, whose result sets read
// gets in order, then the writes plan decides from them, each of which
// must affect the rows it says, then COMMIT (or ROLLBACK when plan asks
// for none). On MySQL that is Dialect.Batch's three round trips; on
// SQLite an ordinary transaction, which holds the write lock from BEGIN.
// A failed COMMIT is ErrInFlight or a *commitError; a failure before it
// committed nothing.
func (s *DB) claimTx(ctx context.Context, iso sql.IsolationLevel, reads []Stmt, read func(int, *sql.Rows) error, plan func() (Writes, error)) error {
	if s.d.Batch != nil {
		return s.d.Batch(ctx, s.db, iso, reads, read, plan)
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it is a no-op
	for i, st := range reads {
		rows, err := tx.QueryContext(ctx, st.SQL, st.Args...)
		if err != nil {
			return err
		}
		err = read(i, rows)
		if cerr := rows.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	w, err := plan()
	if err != nil {
		return err
	}
	counts := make([]int64, 0, len(w.Stmts))
	for _, st := range w.Stmts {
		res, err := tx.ExecContext(ctx, st.SQL, st.Args...)
		if err != nil {
			return err
		}
		n, err := affected(res)
		if err != nil {
			return err
		}
		counts = append(counts, n)
	}
	if err := w.Check(counts); err != nil {
		return err
	}
	if !w.Commit {
		return nil
	}
	if err := commit(ctx, tx); err != nil {
		return &commitError{err}
	}
	return nil
}

// reconcile settles the claims of batch granted by a transaction whose
// COMMIT failed, when that can be known for certain: a read of their
// grants that waits for the failed transaction's locks (a locking read on
// MySQL: its grant rows stay locked by it until it has committed or
// rolled back, whichever the server did; on SQLite a transaction, whose
// write lock the failed one held until it ended). Granted claims then
// stand, or, when the grants are not there, nothing was spent and they
// fail with ErrUnavailable. When the read fails too (the database is
// still gone, the deadline passed), they stay ErrAmbiguous.
func (s *DB) reconcile(ctx context.Context, batch []*claim, cause error) {
	var ids []any
	for _, c := range batch {
		if c.granted {
			ids = append(ids, c.grant.ID)
		}
	}
	if len(ids) == 0 {
		return
	}
	found := 0
	err := ctx.Err()
	if err == nil {
		err = s.inTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			found = 0
			rows, err := tx.QueryContext(ctx, `SELECT id FROM grants WHERE id IN (`+marks(len(ids))+`)`+s.d.LockRows, ids...)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				found++
			}
			return rows.Err()
		})
	}
	for _, c := range batch {
		if !c.granted {
			continue
		}
		switch {
		case err == nil && found == len(ids):
			c.err = nil // committed: the claim stands
		case err == nil && found == 0:
			c.granted, c.session = false, nil
			c.err = fmt.Errorf("%w: the claim's COMMIT failed and it did not take effect: %v", ledger.ErrUnavailable, cause)
		default:
			c.err = cause
		}
	}
}

// resolve finds the link ids of the batch's token hashes, so that its
// rows can be locked in id order, when it names more than one row. A
// token hash names its link for good (both are set at creation and
// never change), so ids found once are kept (DB.ids); the read is a
// plain one. A hash without a link leaves its claim ErrNotFound.
func (s *DB) resolve(ctx context.Context, batch []*claim) error {
	var (
		want  []any
		names = map[string]bool{}
	)
	for _, c := range batch {
		if c.linkID == "" {
			if id, ok := s.ids.get(c.hash); ok {
				c.linkID = id
			}
		}
		if c.linkID != "" {
			names[c.linkID] = true
		} else {
			names["\x00"+string(c.hash)] = true
		}
	}
	if len(names) < 2 {
		return nil
	}
	seen := map[string]bool{}
	for _, c := range batch {
		if c.linkID == "" && !seen[string(c.hash)] {
			seen[string(c.hash)] = true
			want = append(want, c.hash)
		}
	}
	if len(want) == 0 {
		return nil
	}
	rows, err := s.db.QueryContext(ctx, `SELECT token_hash, id FROM links WHERE token_hash IN (`+marks(len(want))+`)`, want...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			hash []byte
			id   string
		)
		if err := rows.Scan(&hash, &id); err != nil {
			return err
		}
		s.ids.put(hash, id)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, c := range batch {
		if c.linkID == "" {
			if id, ok := s.ids.get(c.hash); ok {
				c.linkID = id
			} else {
				c.err = ledger.ErrNotFound
			}
		}
	}
	return nil
}

// hook calls ClaimHook, when set, turning a panic into an error.
func (s *DB) hook(at ClaimPoint, req ledger.ClaimRequest) (err error) {
	if s.ClaimHook == nil {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("sqlcore: claim hook panicked: %v", r)
		}
	}()
	return s.ClaimHook(at, req)
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

// idCache keeps the link ids of token hashes this process resolved (a
// hash names its link for good), up to maxIDs of them.
type idCache struct {
	mu sync.RWMutex
	m  map[string]string
}

const maxIDs = 1 << 16

func (c *idCache) get(hash []byte) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	id, ok := c.m[string(hash)]
	return id, ok
}

func (c *idCache) put(hash []byte, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]string{}
	}
	if _, ok := c.m[string(hash)]; !ok && len(c.m) >= maxIDs {
		// Full: let an eighth go, whichever the map hands out first.
		n := maxIDs / 8
		for k := range c.m {
			delete(c.m, k)
			if n--; n == 0 {
				break
			}
		}
	}
	c.m[string(hash)] = id
}
