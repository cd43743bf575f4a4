package mysql_test

import (
	"context"
	"database/sql"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore"
)

// streamLink creates a stream link of n downloads on a 1000-byte object.
func streamLink(tb testing.TB, db *sqlcore.DB, n int) *ledger.Link {
	tb.Helper()
	l := &ledger.Link{ID: uuid.Must(uuid.NewV7()).String(), TokenHash: randomHash32(),
		Object:    ledger.Object{Bucket: "b", Key: "k", VersionID: "v1", Size: 1000},
		Allowance: n, Remaining: n, ExpiresAt: time.Now().Add(time.Hour), Delivery: ledger.DeliveryStream}
	if _, _, err := db.LinkCreate(context.Background(), l); err != nil {
		tb.Fatal(err)
	}
	return l
}

// sessionQuestions returns a counter of the statements the server runs on
// the pool's one connection (its session's Questions), less the SHOW that
// reads it.
func sessionQuestions(tb testing.TB, pool *sql.DB) func() int64 {
	return func() int64 {
		tb.Helper()
		var name string
		var n int64
		if err := pool.QueryRowContext(context.Background(), `SHOW SESSION STATUS LIKE 'Questions'`).Scan(&name, &n); err != nil {
			tb.Fatal(err)
		}
		return n
	}
}

// TestAStreamRecordAloneInItsWindowIsOneStatement counts, as gateway
// serve runs it (RecordWindow 50 ms, webhooks off), what the end of a
// lone stream response costs the database: the one UPDATE, no
// transaction around it; records that share a window are one statement
// too, an UPDATE joined to their values.
func TestAStreamRecordAloneInItsWindowIsOneStatement(t *testing.T) {
	db := MustOpen(t, testenv.SharedMariaDB(t).NewDatabase(t), time.Now).(*sqlcore.DB)
	db.RecordWindow = sqlcore.DefaultRecordWindow
	ctx := context.Background()
	l := streamLink(t, db, 3)
	var grants []*ledger.Grant
	for range 3 {
		g, err := claimStream(ctx, db, l)
		if err != nil {
			t.Fatal(err)
		}
		grants = append(grants, g)
	}
	pool := db.SQL()
	pool.SetMaxOpenConns(1) // the ledger's statements and the counter on one connection
	questions := sessionQuestions(t, pool)

	before := questions()
	if err := db.GrantDeliveryRecord(ctx, ledger.StreamDelivery{GrantID: grants[0].ID, Attempt: 1, BytesAcked: 400, Measured: true, Size: 1000}); err != nil {
		t.Fatal(err)
	}
	if n := questions() - before - 1; n != 1 {
		t.Errorf("a lone record in its window: %d statements, want 1 (the UPDATE, autocommitted)", n)
	}

	before = questions()
	var wg sync.WaitGroup
	for _, g := range grants[1:] {
		wg.Go(func() {
			if err := db.GrantDeliveryRecord(ctx, ledger.StreamDelivery{GrantID: g.ID, Attempt: 1, BytesAcked: 1000, Measured: true, Size: 1000}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	// Two records within one window are one statement; on a machine so
	// slow that they fell in two windows, two lone UPDATEs (2).
	if n := questions() - before - 1; n != 1 && n != 2 {
		t.Errorf("two records at once: %d statements, want 1 (an UPDATE joined to both) or 2", n)
	}
	for i, want := range []ledger.DeliveryStatus{ledger.DeliveryPartial, ledger.DeliveryComplete, ledger.DeliveryComplete} {
		p, err := db.GrantList(ctx, ledger.GrantQuery{LinkID: l.ID, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range p.Grants {
			if g.ID == grants[i].ID && g.Delivery.Status != want {
				t.Errorf("grant %d: %s, want %s", i, g.Delivery.Status, want)
			}
		}
	}
}

// TestAStreamRecordNeverLocksItsLinksRow holds a link's row as a claim
// transaction does (FOR UPDATE) and records the ends of its downloads,
// alone and together, webhooks off: each record completes while the row
// is held. A record that read the link's row inside its statement (the
// version's size, in a subquery) would take a shared lock on it under
// REPEATABLE READ, waiting here for the claim to commit and, inside a
// transaction of several records, making the next claims of a hot link
// wait for the records' COMMIT. Then, from inside such a transaction
// (BeforeCommit), another connection takes the link's row with NOWAIT.
func TestAStreamRecordNeverLocksItsLinksRow(t *testing.T) {
	db := MustOpen(t, testenv.SharedMariaDB(t).NewDatabase(t), time.Now).(*sqlcore.DB)
	db.Timeout = 3 * time.Second // a record blocked on the row fails after it
	ctx := context.Background()
	l := streamLink(t, db, 8)
	var grants []*ledger.Grant
	for range 5 {
		g, err := claimStream(ctx, db, l)
		if err != nil {
			t.Fatal(err)
		}
		grants = append(grants, g)
	}
	record := func(g *ledger.Grant, acked int64) error {
		return db.GrantDeliveryRecord(ctx, ledger.StreamDelivery{GrantID: g.ID, Attempt: 1, BytesAcked: acked, Measured: true, Size: l.Object.Size})
	}
	lockLink := func(nowait bool) (*sql.Tx, error) {
		tx, err := db.SQL().BeginTx(ctx, nil)
		if err != nil {
			return nil, err
		}
		q := `SELECT id FROM links WHERE id = ? FOR UPDATE`
		if nowait {
			q += ` NOWAIT`
		}
		var id string
		if err := tx.QueryRowContext(ctx, q, l.ID).Scan(&id); err != nil {
			tx.Rollback() //nolint:errcheck // the error is the answer
			return nil, err
		}
		return tx, nil
	}

	claim, err := lockLink(false)
	if err != nil {
		t.Fatal(err)
	}
	if err := record(grants[0], 400); err != nil {
		t.Errorf("a record while a claim holds its link's row: %v", err)
	}
	db.RecordWindow = 500 * time.Millisecond
	var wg sync.WaitGroup
	for _, g := range grants[1:3] {
		wg.Go(func() {
			if err := record(g, 1000); err != nil {
				t.Errorf("records in one window while a claim holds their link's row: %v", err)
			}
		})
	}
	wg.Wait()
	if err := claim.Rollback(); err != nil {
		t.Fatal(err)
	}

	var (
		mu     sync.Mutex
		inside []error
	)
	db.BeforeCommit = func(context.Context, *sql.Tx) error {
		tx, err := lockLink(true)
		if err == nil {
			err = tx.Rollback()
		}
		mu.Lock()
		inside = append(inside, err)
		mu.Unlock()
		return nil
	}
	for _, g := range grants[3:5] {
		wg.Go(func() {
			if err := record(g, 1000); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	db.BeforeCommit = nil
	if len(inside) > 1 {
		t.Errorf("two records in one window made %d transactions", len(inside))
	}
	for _, err := range inside {
		if err != nil {
			t.Errorf("the link's row, taken from inside a transaction of records: %v", err)
		}
	}
	p, err := db.GrantList(ctx, ledger.GrantQuery{LinkID: l.ID, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	complete := 0
	for _, g := range p.Grants {
		if g.Delivery.Status == ledger.DeliveryComplete {
			complete++
		}
	}
	if complete != 4 {
		t.Errorf("%d grants complete, want 4", complete)
	}
}
