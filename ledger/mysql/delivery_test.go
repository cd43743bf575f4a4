package mysql_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/ledgertest"
	"github.com/dlgate/dlgate/ledger/sqlcore"
	"github.com/dlgate/dlgate/sessions"
)

func TestDeliveryConformance(t *testing.T) {
	server := testenv.SharedMariaDB(t)
	ledgertest.ExerciseDelivery(t, func(t *testing.T, clock ledger.Clock, events bool) ledger.Ledger {
		l := MustOpen(t, server.NewDatabase(t), clock)
		l.(*sqlcore.DB).Webhooks = events
		return l
	}, processesOn(server, true))
}

// TestGrantsFilteredByDeliveryAreOneIndexRangeScan lists a page of a
// link's partial grants among 300 and counts the rows the server read for
// it (the session's Handler_read_* counters, on the pool's one
// connection): a range scan of grants_link_delivery reads the page's
// entries and the row after it, where a scan of the link's grants in
// (created_at, id) order filtering on the status would read all 300.
func TestGrantsFilteredByDeliveryAreOneIndexRangeScan(t *testing.T) {
	db := MustOpen(t, testenv.SharedMariaDB(t).NewDatabase(t), time.Now).(*sqlcore.DB)
	ctx := context.Background()
	const grants, partial = 300, 3
	l := &ledger.Link{ID: uuid.Must(uuid.NewV7()).String(), TokenHash: randomHash32(),
		Object:    ledger.Object{Bucket: "b", Key: "k", VersionID: "v1", Size: 1000},
		Allowance: grants, Remaining: grants, ExpiresAt: time.Now().Add(time.Hour), Delivery: ledger.DeliveryStream}
	if _, _, err := db.LinkCreate(ctx, l); err != nil {
		t.Fatal(err)
	}
	for i := range grants {
		g, err := claimStream(ctx, db, l)
		if err != nil {
			t.Fatal(err)
		}
		acked := int64(1000)
		if i%(grants/partial) == 0 {
			acked = 10
		}
		if err := db.GrantDeliveryRecord(ctx, ledger.StreamDelivery{GrantID: g.ID, Attempt: 1, BytesAcked: acked, Measured: true}); err != nil {
			t.Fatal(err)
		}
	}
	pool := db.SQL()
	pool.SetMaxOpenConns(1) // the ledger's statements and the counters on one connection
	reads := func(list func() (ledger.Page, error)) (int64, int) {
		t.Helper()
		if _, err := pool.ExecContext(ctx, `FLUSH STATUS`); err != nil {
			t.Fatal(err)
		}
		p, err := list()
		if err != nil {
			t.Fatal(err)
		}
		return handlerReads(t, pool), len(p.Grants)
	}
	partialPage := func() (ledger.Page, error) {
		return db.GrantList(ctx, ledger.GrantQuery{LinkID: l.ID, Limit: 10, Delivery: ledger.DeliveryPartial})
	}
	// Once unmeasured: the server's first use of a table after its rows
	// changed reads its persistent statistics, which the counters count.
	reads(partialPage)
	base, _ := reads(func() (ledger.Page, error) { return ledger.Page{}, nil })
	filtered, n := reads(partialPage)
	if n != partial {
		t.Fatalf("the filtered page has %d grants, want %d", n, partial)
	}
	all, _ := reads(func() (ledger.Page, error) { return db.GrantList(ctx, ledger.GrantQuery{LinkID: l.ID, Limit: 10}) })
	t.Logf("rows read: %d for the partial page, %d for the first page unfiltered (SHOW STATUS alone: %d)", filtered-base, all-base, base)
	if filtered-base > 20 || all-base > 30 {
		t.Fatalf("a page of the %d grants read %d rows filtered, %d unfiltered: not a range scan stopped by the LIMIT", grants, filtered-base, all-base)
	}
}

// handlerReads sums the session's Handler_read_* counters.
func handlerReads(tb testing.TB, db *sql.DB) int64 {
	tb.Helper()
	rows, err := db.Query(`SHOW SESSION STATUS LIKE 'Handler_read%'`)
	if err != nil {
		tb.Fatal(err)
	}
	defer rows.Close()
	var sum int64
	for rows.Next() {
		var name string
		var n int64
		if err := rows.Scan(&name, &n); err != nil {
			tb.Fatal(err)
		}
		if strings.HasPrefix(name, "Handler_read") {
			sum += n
		}
	}
	if err := rows.Err(); err != nil {
		tb.Fatal(err)
	}
	return sum
}

// TestDeliveryRecordsCostFewStatements counts the statements the server
// runs (its session's Questions, on the pool's one connection) for each
// delivery record, webhooks off: the end of a stream response is one
// UPDATE; a session's report without ranges is the one UPDATE a budget
// return was; with ranges it is a transaction of a locking read and one
// UPDATE, and one UPDATE of the grant more when its status moves.
func TestDeliveryRecordsCostFewStatements(t *testing.T) {
	db := MustOpen(t, testenv.SharedMariaDB(t).NewDatabase(t), time.Now).(*sqlcore.DB)
	ctx := context.Background()
	link := func(delivery string) *ledger.Link {
		l := &ledger.Link{ID: uuid.Must(uuid.NewV7()).String(), TokenHash: randomHash32(),
			Object:    ledger.Object{Bucket: "b", Key: "k", VersionID: "v1", Size: 1000},
			Allowance: 2, Remaining: 2, ExpiresAt: time.Now().Add(time.Hour), Delivery: delivery}
		if _, _, err := db.LinkCreate(ctx, l); err != nil {
			t.Fatal(err)
		}
		return l
	}
	stream := link(ledger.DeliveryStream)
	g, err := claimStream(ctx, db, stream)
	if err != nil {
		t.Fatal(err)
	}
	x, _, err := db.SessionMint(ctx, ledger.MintRequest{Claim: ledger.ClaimRequest{LinkID: link(ledger.DeliverySession).ID, Client: "test"},
		SessionID: uuid.Must(uuid.NewV7()).String(), TokenHash: randomHash32(), ByteBudget: 2000, MaxConcurrency: 1,
		ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.BudgetDraw(ctx, x.ID, 500); err != nil {
		t.Fatal(err)
	}
	pool := db.SQL()
	pool.SetMaxOpenConns(1)
	questions := func(op func() error) int64 {
		t.Helper()
		var name string
		var before, after int64
		if err := pool.QueryRowContext(ctx, `SHOW SESSION STATUS LIKE 'Questions'`).Scan(&name, &before); err != nil {
			t.Fatal(err)
		}
		if err := op(); err != nil {
			t.Fatal(err)
		}
		if err := pool.QueryRowContext(ctx, `SHOW SESSION STATUS LIKE 'Questions'`).Scan(&name, &after); err != nil {
			t.Fatal(err)
		}
		return after - before - 1 // the second SHOW counts itself
	}
	ranges := func(first, last int64) sessions.Coverage {
		var c sessions.Coverage
		c.Add(sessions.Range{Start: first, Length: last - first + 1})
		return c
	}
	for _, c := range []struct {
		what string
		op   func() error
		want int64
	}{
		{"the end of a stream response", func() error {
			return db.GrantDeliveryRecord(ctx, ledger.StreamDelivery{GrantID: g.ID, Attempt: 1, BytesAcked: 400, Measured: true, Size: 1000})
		}, 1},
		{"a session's report without ranges", func() error {
			return db.SessionDeliveryRecord(ctx, ledger.SessionDelivery{SessionID: x.ID, Return: 10})
		}, 1},
		{"a session's report whose ranges move its grant to partial", func() error {
			return db.SessionDeliveryRecord(ctx, ledger.SessionDelivery{SessionID: x.ID, Acked: ranges(0, 99), Return: 10, Measured: true})
		}, 5},
		{"a session's report with ranges", func() error {
			return db.SessionDeliveryRecord(ctx, ledger.SessionDelivery{SessionID: x.ID, Acked: ranges(100, 199), Return: 10, Measured: true})
		}, 4},
	} {
		got := questions(c.op)
		t.Logf("%s: %d statements", c.what, got)
		if got != c.want {
			t.Errorf("%s: %d statements, want %d", c.what, got, c.want)
		}
	}
}

func randomHash32() []byte {
	b := make([]byte, 32)
	rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return b
}

// claimStream claims stream link l as a GET of its URL does.
func claimStream(ctx context.Context, db *sqlcore.DB, l *ledger.Link) (*ledger.Grant, error) {
	o, err := db.LinkClaim(ctx, l.TokenHash, ledger.ClaimRequest{Kind: ledger.KindStream, Client: "test"}, false)
	if err == nil && o.Grant == nil {
		err = fmt.Errorf("claim of %s refused: %s", l.ID, o.Refusal)
	}
	return o.Grant, err
}
