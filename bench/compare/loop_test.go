package compare

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger/mysql"
	"github.com/dlgate/dlgate/token"
)

// The claim as issue 8 measured it, five statements: the link lookup by
// token hash, START TRANSACTION, the conditional decrement, the grant's
// INSERT and COMMIT (ledger/sqlcore before the fast path). The loop runs
// them as they were, whatever the gateway does now.
const (
	loopLookupSQL = `SELECT id, token_hash, bucket, object_key, version_id, size, etag, content_type,
  last_modified, filename, account_id, allowance, remaining, expires_at, revoked_at,
  created_at, delivery, confirm, session_ttl_ms, session_byte_budget,
  session_max_concurrency, idempotency_key FROM links WHERE token_hash = ?`
	loopClaimSQL = `UPDATE links SET remaining = remaining - 1
WHERE id = ? AND remaining > 0 AND revoked_at IS NULL AND expires_at > COALESCE(CAST(? AS DATETIME(6)), UTC_TIMESTAMP(6))
  AND (account_id IS NULL OR account_id = ?)`
	loopGrantSQL = `INSERT INTO grants (id, link_id, kind, account_id, status, created_at, client, session_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
)

// claimLoop runs the five statements on the gateway's database, with the
// gateway's connection settings (interpolated parameters: one round trip
// per statement).
type claimLoop struct {
	db *sql.DB
	op func(context.Context, link) error // claim, unless set
}

func openLoopDB(tb testing.TB, g *gatewayProc) claimLoop {
	tb.Helper()
	dsn := g.env["GATEWAY_DB_DSN"]
	cfg, err := mysql.Config(dsn)
	if err != nil {
		tb.Fatal(err)
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	db := sql.OpenDB(conn)
	db.SetMaxOpenConns(64)
	db.SetMaxIdleConns(64)
	tb.Cleanup(func() { db.Close() })
	return claimLoop{db: db}
}

// run claims each of links once from clients goroutines and returns the
// rate and the 99th percentile of one claim's time.
func (c claimLoop) run(ctx context.Context, links []link, clients int) (float64, time.Duration, error) {
	var (
		next atomic.Int64
		mu   sync.Mutex
		lat  []time.Duration
		errs []error
		wg   sync.WaitGroup
	)
	start := time.Now()
	for range clients {
		wg.Go(func() {
			var mine []time.Duration
			for {
				i := next.Add(1) - 1
				if i >= int64(len(links)) {
					break
				}
				t := time.Now()
				op := c.op
				if op == nil {
					op = c.claim
				}
				if err := op(ctx, links[i]); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					continue
				}
				mine = append(mine, time.Since(t))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	var p99 time.Duration
	if len(lat) > 0 {
		p99 = lat[min(len(lat)-1, int(0.99*float64(len(lat))))]
	}
	return float64(len(lat)) / elapsed.Seconds(), p99, errors.Join(errs...)
}

func (c claimLoop) claim(ctx context.Context, l link) error {
	rows, err := c.db.QueryContext(ctx, loopLookupSQL, token.Hash(l.Token))
	if err != nil {
		return err
	}
	cols, _ := rows.Columns()
	dest := make([]any, len(cols))
	for i := range dest {
		dest[i] = new(sql.RawBytes)
	}
	found := rows.Next()
	if found {
		err = rows.Scan(dest...)
	}
	rows.Close()
	if err != nil || !found {
		return fmt.Errorf("lookup of link %s: found %v, %v", l.ID, found, err)
	}
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit a no-op
	res, err := tx.ExecContext(ctx, loopClaimSQL, l.ID, nil, nil)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 1 {
		return fmt.Errorf("claim of link %s: %d rows", l.ID, n)
	}
	_, err = tx.ExecContext(ctx, loopGrantSQL, uuid.Must(uuid.NewV7()).String(), l.ID, "stream", nil, "granted",
		time.Now().UTC().Truncate(time.Microsecond), "bench loop", nil)
	if err != nil {
		return err
	}
	return tx.Commit()
}

// refuse runs the statements a refusal of the spent link l took before
// the claim path was one call (issue 15): the lookup, START TRANSACTION,
// the decrement that matches nothing and ROLLBACK, after which the old
// path asked again for the reason; the loop stops at the minimum.
func (c claimLoop) refuse(ctx context.Context, l link) error {
	var id string
	if err := c.db.QueryRowContext(ctx, `SELECT id FROM links WHERE token_hash = ?`, token.Hash(l.Token)).Scan(&id); err != nil {
		return fmt.Errorf("lookup of link %s: %v", l.ID, err)
	}
	tx, err := c.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // the refusal's end
	res, err := tx.ExecContext(ctx, loopClaimSQL, id, nil, nil)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n != 0 {
		return fmt.Errorf("refusal of spent link %s: %d rows", l.ID, n)
	}
	return tx.Rollback()
}

// runEach is run with op for each link.
func (c claimLoop) runEach(ctx context.Context, links []link, clients int, op func(context.Context, link) error) (float64, time.Duration, error) {
	c.op = op // on this copy
	return c.run(ctx, links, clients)
}

// latency claims each of links once, one after another, and returns the
// median time of one claim.
func (c claimLoop) latency(ctx context.Context, links []link) (time.Duration, error) {
	lat := make([]time.Duration, 0, len(links))
	for _, l := range links {
		t := time.Now()
		if err := c.claim(ctx, l); err != nil {
			return 0, err
		}
		lat = append(lat, time.Since(t))
	}
	slices.Sort(lat)
	if len(lat) == 0 {
		return 0, nil
	}
	return lat[len(lat)/2], nil
}
