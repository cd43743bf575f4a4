// Package sqlcore is the SQL implementation of ledger.Ledger shared by
// ledger/mysql and ledger/sqlite. The statements are portable; the few that
// are not (returning a value from an UPDATE, UPDATE … LIMIT) and the error
// classification come from the engine.Dialect each of them supplies; what
// every part of the ledger stands on (bounded calls, transactions, the
// reading of rows) is package engine.
package sqlcore

import (
	"database/sql"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// DB implements ledger.Ledger on database/sql.
type DB struct {
	// DB is the database and how the ledger calls it: its pool and
	// dialect, the clocks, the bound on each call (Timeout), the hook
	// before each commit (BeforeCommit).
	engine.DB
	// Webhooks makes each change write its webhook event to the outbox in
	// its own transaction (GATEWAY_WEBHOOK_URL is set; see outbox.go).
	Webhooks bool
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
	return &DB{DB: engine.DB{Pool: db, D: d, Now: time.Now, Timeout: engine.DefaultTimeout},
		ClaimBatch: DefaultClaimBatch, RefusalCache: DefaultRefusalCache}
}
