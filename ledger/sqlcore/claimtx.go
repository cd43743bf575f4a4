package sqlcore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
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
	reads := []engine.Stmt{s.lockRows(live)}
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
	plan := func() (w engine.Writes, err error) {
		return s.judge(live, rows, seen, alone)
	}
	// READ COMMITTED for a batch of several rows: every decision rests on
	// locked rows (SELECT … FOR UPDATE, the conditional UPDATE), which
	// read the latest committed row at any level, and at this level they
	// lock the rows they match and no gaps. Under REPEATABLE READ the
	// batch's UPDATE of the rows "id IN (…)" took next-key locks (a record
	// and the gap before it) beyond its own rows, and two batches of
	// interleaved links deadlocked (BatchesOfManyLinksOnTwoProcessesNever-
	// Deadlock: 1213 in 1 of 8 rounds). One row is found by a unique key's
	// equality, which locks that record alone at any level, so a lone
	// claim spares the statement that sets the level. The plain read of
	// the idempotency keys sees what committed before it either way (on
	// InnoDB the snapshot of REPEATABLE READ starts at that read, after
	// the rows' locks).
	iso := sql.LevelDefault
	if len(distinctIDs(live)) > 1 {
		iso = sql.LevelReadCommitted
	}
	err := s.claimTx(ctx, iso, reads, read, plan)
	var ce *engine.CommitError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, engine.ErrInFlight), errors.As(err, &ce):
		return fmt.Errorf("%w: %v", ledger.ErrAmbiguous, err)
	case alone && s.D.IsDuplicate(err) && live[0].key() != "":
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
func (s *DB) lockRows(batch []*claim) engine.Stmt {
	sel := `SELECT ` + linkColumns + `, event_seq, ` + s.D.NowSQL + ` FROM links WHERE `
	ids := distinctIDs(batch)
	if len(ids) == 0 {
		return engine.Stmt{SQL: sel + `token_hash = ?` + s.D.LockRows, Args: []any{s.DBNow(), batch[0].hash}}
	}
	args := []any{s.DBNow()}
	for _, id := range ids {
		args = append(args, id)
	}
	return engine.Stmt{SQL: sel + `id IN (` + marks(len(ids)) + `) ORDER BY id` + s.D.LockRows, Args: args}
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
			now engine.TimeCol
		)
		l, err := scanLink(engine.WithMore(r, &x.eventSeq, &now))
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
func (s *DB) keysRead(batch []*claim) engine.Stmt {
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
		return engine.Stmt{}
	}
	return engine.Stmt{SQL: `SELECT link_id, scope, idem_key FROM session_idempotency WHERE ` + b.String(), Args: args}
}

// judge decides each claim of batch from the locked rows, in arrival
// order, and returns the writes that carry out what it granted.
func (s *DB) judge(batch []*claim, rows map[string]*lockedRow, seen map[string]bool, alone bool) (engine.Writes, error) {
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
				return engine.Writes{}, err // the batch fails; each claim is decided alone
			}
			c.err = err
			continue
		}
		l := x.link
		l.Remaining = x.remaining
		c.link = &l
		if c.mint == nil {
			c.grant.LinkID = l.ID
			if !l.ClaimsAtOnce(c.confirmed, c.req.RetriesChecked) {
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
		return engine.Writes{Stmts: []engine.Stmt{s.keysInsert(batch)}}, nil
	}
	if len(granted) == 0 {
		return engine.Writes{}, nil
	}
	return s.writes(granted, rows)
}

// claimTx runs one claim transaction: the reads, whose result sets read
// gets in order, then the writes plan decides from them, each of which
// must affect the rows it says, then COMMIT (or ROLLBACK when plan asks
// for none). On MySQL that is Dialect.Batch's three round trips; on
// SQLite an ordinary transaction, which holds the write lock from BEGIN.
// A failed COMMIT is ErrInFlight or a *commitError; a failure before it
// committed nothing.
func (s *DB) claimTx(ctx context.Context, iso sql.IsolationLevel, reads []engine.Stmt, read func(int, *sql.Rows) error, plan func() (engine.Writes, error)) error {
	if s.D.Batch != nil {
		return s.D.Batch(ctx, s.Pool, iso, reads, read, plan)
	}
	tx, err := s.Pool.BeginTx(ctx, nil)
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
		n, err := engine.Affected(res)
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
	if err := engine.Commit(ctx, tx); err != nil {
		return &engine.CommitError{Err: err}
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
		err = s.InTx(ctx, func(ctx context.Context, tx *sql.Tx) error {
			found = 0
			rows, err := tx.QueryContext(ctx, `SELECT id FROM grants WHERE id IN (`+marks(len(ids))+`)`+s.D.LockRows, ids...)
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
