package mysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore"
)

// tidbLockWaits are TiDB's answers to a statement that waited for a held
// row or met a write conflict (README's changelog, isRetryable): each is
// a transaction that may run again, and then the database unavailable.
var tidbLockWaits = []*gomysql.MySQLError{
	{Number: 1205, Message: "Lock wait timeout exceeded; try restarting transaction"},
	{Number: 1105, Message: "lock wait timeout"},
	{Number: 1105, Message: "pessimistic lock retry limit reached"},
	{Number: 8002, Message: "can not retry select for update statement"},
	{Number: 8005, Message: "Write Conflict, txnStartTS is stale"},
	{Number: 8022, Message: "Error: KV error safe to retry"},
	{Number: 9007, Message: "Write conflict"},
}

// claimConns is a driver whose every statement, query or not, fails with
// err, as a TiDB server answering the claim's first round trip (START
// TRANSACTION and the locking read) would. The first query waits until
// release is closed when hold is set, saying so on held: the claim
// transaction in flight, for claims to queue behind it.
type claimConns struct {
	err     error
	queries atomic.Int64
	hold    bool
	once    sync.Once
	held    chan struct{}
	release chan struct{}
}

func (f *claimConns) Connect(context.Context) (driver.Conn, error) { return claimConn{f}, nil }
func (f *claimConns) Driver() driver.Driver                        { return nil }

type claimConn struct{ f *claimConns }

func (c claimConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("no prepare") }
func (c claimConn) Close() error                        { return nil }
func (c claimConn) Begin() (driver.Tx, error)           { return failingTx{}, nil }
func (c claimConn) ExecContext(context.Context, string, []driver.NamedValue) (driver.Result, error) {
	return nil, c.f.err
}

func (c claimConn) QueryContext(ctx context.Context, _ string, _ []driver.NamedValue) (driver.Rows, error) {
	c.f.queries.Add(1)
	if c.f.hold {
		first := false
		c.f.once.Do(func() { first = true })
		if first {
			close(c.f.held)
			select {
			case <-c.f.release:
			case <-ctx.Done():
			}
		}
	}
	return nil, c.f.err
}

// tidbLedger is a ledger speaking TiDB 8.5.3's dialect over conns.
func tidbLedger(t *testing.T, conns *claimConns) *sqlcore.DB {
	t.Helper()
	pool := sql.OpenDB(conns)
	t.Cleanup(func() { pool.Close() })
	return sqlcore.New(pool, DialectFor(Engine{Kind: TiDB, Major: 8, Minor: 5, Patch: 3}))
}

// wantUnavailable fails unless err is ErrUnavailable carrying TiDB's e:
// classified, not a 500, and not ErrAmbiguous (nothing reached COMMIT).
func wantUnavailable(t *testing.T, what string, e *gomysql.MySQLError, err error) {
	t.Helper()
	if !errors.Is(err, ledger.ErrUnavailable) || errors.Is(err, ledger.ErrAmbiguous) {
		t.Errorf("%s meeting %d %q = %v; want ErrUnavailable", what, e.Number, e.Message, err)
	}
}

// TestTiDBsLockWaitsInAClaimAreUnavailable: the claim path meets TiDB's
// lock-wait and write-conflict answers where they come, in the claim
// transaction's locking read: a claim alone (LinkClaim, SessionMint) runs
// again (the dialect's IsRetryable, as decideAlone's retry asks it) and
// ends ErrUnavailable (503), never an unclassified error; a batch of
// claims that meets one fails as a whole (OnClaimBatch reports the
// driver's error), and each of its claims is then decided alone, run
// again, and ends ErrUnavailable with no grant.
func TestTiDBsLockWaitsInAClaimAreUnavailable(t *testing.T) {
	d := DialectFor(Engine{Kind: TiDB, Major: 8, Minor: 5, Patch: 3})
	for _, e := range tidbLockWaits {
		t.Run(fmt.Sprintf("%d %s", e.Number, e.Message), func(t *testing.T) {
			wrapped := fmt.Errorf("claim: %w", e)
			if !d.IsRetryable(wrapped) {
				t.Errorf("the dialect's IsRetryable(%v) = false", wrapped)
			}
			ctx := context.Background()
			hash := make([]byte, 32)

			// Alone.
			conns := &claimConns{err: e}
			db := tidbLedger(t, conns)
			db.ClaimBatch = 1
			o, err := db.LinkClaim(ctx, hash, ledger.ClaimRequest{Kind: ledger.KindStream, Client: "alone"}, false)
			wantUnavailable(t, "LinkClaim", e, err)
			if o.Grant != nil {
				t.Errorf("LinkClaim meeting %d granted %+v", e.Number, o.Grant)
			}
			if n := conns.queries.Load(); n < 2 {
				t.Errorf("LinkClaim meeting %d ran its transaction %d time(s); want it run again", e.Number, n)
			}
			conns.queries.Store(0)
			x, created, err := db.SessionMint(ctx, ledger.MintRequest{
				Claim:     ledger.ClaimRequest{LinkID: "l", Client: "mint"},
				SessionID: "s", TokenHash: hash, ByteBudget: 1, MaxConcurrency: 1, ExpiresAt: time.Now().Add(time.Hour),
			})
			wantUnavailable(t, "SessionMint", e, err)
			if x != nil || created {
				t.Errorf("SessionMint meeting %d minted %+v", e.Number, x)
			}
			if n := conns.queries.Load(); n < 2 {
				t.Errorf("SessionMint meeting %d ran its transaction %d time(s); want it run again", e.Number, n)
			}

			// In a batch: three claims queue behind the blocker's
			// transaction, held in its first round trip.
			conns = &claimConns{err: e, hold: true, held: make(chan struct{}), release: make(chan struct{})}
			db = tidbLedger(t, conns)
			var (
				mu      sync.Mutex
				batches []sqlcore.ClaimBatchStats
				queued  = make(chan string, 8)
			)
			db.OnClaimBatch = func(b sqlcore.ClaimBatchStats) {
				mu.Lock()
				batches = append(batches, b)
				mu.Unlock()
			}
			db.ClaimHook = func(at sqlcore.ClaimPoint, req ledger.ClaimRequest) error {
				if at == sqlcore.ClaimQueued {
					queued <- req.Client
				}
				return nil
			}
			claim := func(client string, out *ledger.ClaimOutcome, err *error, done *sync.WaitGroup) {
				done.Go(func() {
					*out, *err = db.LinkClaim(ctx, hash, ledger.ClaimRequest{Kind: ledger.KindStream, Client: client}, false)
				})
			}
			var wg sync.WaitGroup
			var blocked ledger.ClaimOutcome
			var blockedErr error
			claim("blocker", &blocked, &blockedErr, &wg)
			<-conns.held
			const k = 3
			outs, errs := make([]ledger.ClaimOutcome, k), make([]error, k)
			for i := range k {
				claim(fmt.Sprintf("queued-%d", i), &outs[i], &errs[i], &wg)
				select {
				case <-queued:
				case <-time.After(10 * time.Second):
					t.Fatal("a claim did not queue behind the transaction in flight")
				}
			}
			close(conns.release)
			wg.Wait()
			wantUnavailable(t, "the blocker's claim", e, blockedErr)
			for i := range k {
				wantUnavailable(t, fmt.Sprintf("queued claim %d", i), e, errs[i])
				if outs[i].Grant != nil {
					t.Errorf("queued claim %d meeting %d granted %+v", i, e.Number, outs[i].Grant)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			var batch *sqlcore.ClaimBatchStats
			for i, b := range batches {
				if b.Size == k {
					batch = &batches[i]
				}
			}
			var me *gomysql.MySQLError
			switch {
			case batch == nil:
				t.Errorf("claim transactions %+v; want one batch of the %d queued claims", batches, k)
			case !errors.As(batch.Err, &me) || me.Number != e.Number || !d.IsRetryable(batch.Err):
				t.Errorf("the batch's error %v; want the driver's %d, retryable", batch.Err, e.Number)
			case len(batch.QueueWaits) != 0:
				t.Errorf("the failed batch reported queue waits %v; its claims' waits go with the transactions that decided them", batch.QueueWaits)
			}
			// Each claim of the failed batch went alone, and ran again:
			// the batch's one query, then at least two each.
			if n := conns.queries.Load(); n < 2+2*k {
				t.Errorf("%d claim transactions ran; want the blocker's, the batch's and each queued claim's alone, run again", n)
			}
		})
	}
}
