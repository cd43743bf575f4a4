// Package sqlcore is the SQL implementation of ledger.Ledger shared by
// ledger/mysql and ledger/sqlite. The statements are portable; the few that
// are not (returning a value from an UPDATE, UPDATE … LIMIT) and the error
// classification come from the engine.Dialect each of them supplies.
//
// This package holds the links, their objects, claims and grants,
// sessions, delivery records and retention: the parts one claim touches.
// The rest are packages of their own beneath it, each a type DB embeds:
//   - engine: what every part stands on (the Dialect, bounded calls,
//     transactions and their one retry loop, the reading of rows);
//   - audit: the audit trail (entries written in each change's
//     transaction, and their listing);
//   - access: operators' API keys and console sessions;
//   - uploads: resumable uploads;
//   - outbox: the webhook outbox (events written in each change's
//     transaction, and their hand-out to deliverers).
package sqlcore

import (
	"database/sql"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/access"
	"github.com/dlgate/dlgate/ledger/sqlcore/audit"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
	"github.com/dlgate/dlgate/ledger/sqlcore/outbox"
	"github.com/dlgate/dlgate/ledger/sqlcore/uploads"
)

// DB implements ledger.Ledger on database/sql.
type DB struct {
	// DB is the database and how the ledger calls it: its pool and
	// dialect, the clocks, the bound on each call (Timeout), the hook
	// before each commit (BeforeCommit).
	engine.DB
	// Trail reads the audit trail (its entries are written in each
	// change's transaction: audit.Write).
	audit.Trail
	// Keys keeps API keys and console sessions.
	access.Keys
	// Table keeps resumable uploads.
	uploads.Table
	// Queue is the webhook outbox; its Webhooks, set when
	// GATEWAY_WEBHOOK_URL is, makes each change write its event there.
	outbox.Queue
	// ClaimBatch caps how many claims one transaction decides
	// (GATEWAY_CLAIM_BATCH, default DefaultClaimBatch, at most
	// MaxClaimBatch): claims that arrive while this process's claim
	// transaction is in flight go together in the next one (group.go).
	// 1 turns grouping off: every claim is a transaction of its own, as
	// many at once as callers make.
	ClaimBatch int
	// RecordWindow, when positive, is how long a stream delivery record
	// waits for others to be written with it in one transaction
	// (records.go; the gateway sets DefaultRecordWindow); 0 writes each
	// as it comes.
	RecordWindow time.Duration
	// RefusalCache is how long a refusal of an exhausted link may be
	// answered again without asking the database (GATEWAY_REFUSAL_CACHE,
	// default DefaultRefusalCache); 0 turns the refusal cache off
	// (refusals.go).
	RefusalCache time.Duration
	// OnClaimBatch, when set, is called after each claim transaction,
	// for the metrics of batch sizes, batches per second and queue
	// waits. It must not block.
	OnClaimBatch func(ClaimBatchStats)
	// ClaimHook, when set (tests only), is called at points of a claim's
	// way with its request: ClaimQueued when it waits for the transaction
	// in flight, ClaimJudged as its transaction judges it, the rows
	// locked. An error or a panic at ClaimJudged fails that transaction;
	// the claims of a failed batch are then decided alone, so it ends as
	// that claim's own error.
	ClaimHook func(at ClaimPoint, req ledger.ClaimRequest) error

	group    group       // claims waiting for the transaction in flight
	ids      idCache     // link ids of token hashes
	refusals refusals    // links seen unclaimable
	records  recordGroup // stream delivery records waiting for their window
}

var _ ledger.Ledger = (*DB)(nil)

// New returns a ledger over db speaking dialect d.
func New(db *sql.DB, d engine.Dialect) *DB {
	s := &DB{DB: engine.DB{Pool: db, D: d, Now: time.Now, Timeout: engine.DefaultTimeout},
		ClaimBatch: DefaultClaimBatch, RefusalCache: DefaultRefusalCache}
	s.Trail, s.Keys, s.Table, s.Queue = audit.Trail{DB: &s.DB}, access.Keys{DB: &s.DB}, uploads.Table{DB: &s.DB}, outbox.Queue{DB: &s.DB}
	return s
}

// DefaultClaimBatch is DB.ClaimBatch when none is set
// (GATEWAY_CLAIM_BATCH).
const DefaultClaimBatch = 64

// MaxClaimBatch is the largest DB.ClaimBatch: a batch's statements carry
// a few parameters per claim, and 1,024 claims keep them far below what
// any engine accepts in one statement.
const MaxClaimBatch = 1024

// ClaimBatchStats is what DB.OnClaimBatch learns of one claim transaction.
type ClaimBatchStats struct {
	// Size is how many claims it decided: 1 for a claim alone.
	Size int
	// QueueWaits are how long each claim it decided waited in the queue
	// for it, in arrival order: 0 for a claim that found no transaction
	// in flight. Each claim's wait is reported once, with the transaction
	// that decided it: a claim its batch sent to be decided alone (the
	// batch failed, or it is a keyed mint the batch refused) is counted
	// with that transaction of its own, so a failed batch has none.
	QueueWaits []time.Duration
	// Err is why it failed, nil when it committed or rolled back what it
	// refused. The claims of a failed batch are decided alone next.
	Err error
}

// DefaultRefusalCache is DB.RefusalCache when none is set
// (GATEWAY_REFUSAL_CACHE).
const DefaultRefusalCache = time.Second

// ClaimPoint names a point of a claim's way for DB.ClaimHook.
type ClaimPoint int

const (
	// ClaimQueued: the claim waits for the transaction in flight.
	ClaimQueued ClaimPoint = iota
	// ClaimJudged: a transaction judges the claim, its row locked.
	ClaimJudged
)
