package mysql_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/ledgertest"
	"github.com/dlgate/dlgate/ledger/sqlcore"
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
	l := &ledger.Link{ID: uuid.Must(uuid.NewV7()).String(), TokenHash: make([]byte, 32),
		Object:    ledger.Object{Bucket: "b", Key: "k", VersionID: "v1", Size: 1000},
		Allowance: grants, Remaining: grants, ExpiresAt: time.Now().Add(time.Hour), Delivery: ledger.DeliveryStream}
	if _, _, err := db.LinkCreate(ctx, l); err != nil {
		t.Fatal(err)
	}
	for i := range grants {
		g, err := db.Claim(ctx, ledger.ClaimRequest{LinkID: l.ID, Kind: ledger.KindStream, Client: "test"})
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
