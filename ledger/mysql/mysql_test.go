package mysql_test

import (
	"context"
	"database/sql/driver"
	"fmt"
	"os"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/ledgertest"
	"github.com/dlgate/dlgate/ledger/mysql"
	"github.com/dlgate/dlgate/ledger/sqlcore"
)

func TestMain(m *testing.M) {
	if dsn := os.Getenv(migrateChildEnv); dsn != "" {
		os.Exit(migrateChild(dsn)) // a process of TestMigrationByEightProcessesAtOnce
	}
	testenv.Main(m)
}

func TestConformance(t *testing.T) {
	server := testenv.SharedMariaDB(t)
	ledgertest.Exercise(t, func(t *testing.T, clock ledger.Clock) ledger.Ledger {
		return MustOpen(t, server.NewDatabase(t), clock)
	})
}

// TestConformanceWithoutGrouping runs the suite again with group claims
// off (ClaimBatch 1, GATEWAY_CLAIM_BATCH=1): every claim a transaction of
// its own.
func TestConformanceWithoutGrouping(t *testing.T) {
	server := testenv.SharedMariaDB(t)
	ledgertest.Exercise(t, func(t *testing.T, clock ledger.Clock) ledger.Ledger {
		db := MustOpen(t, server.NewDatabase(t), clock).(*sqlcore.DB)
		db.ClaimBatch = 1
		return db
	})
}

func TestClaimsAcrossProcesses(t *testing.T) {
	ledgertest.ExerciseClaimsAcrossProcesses(t, processesOn(testenv.SharedMariaDB(t), false))
}

func TestAcrossProcesses(t *testing.T) {
	ledgertest.ExerciseAcrossProcesses(t, processesOn(testenv.SharedMariaDB(t), true))
}

// TestClaimsConformanceWithWebhooks runs the claims again with webhooks
// on, where every claim transaction writes its outbox rows too.
func TestClaimsConformanceWithWebhooks(t *testing.T) {
	server := testenv.SharedMariaDB(t)
	ledgertest.ExerciseClaims(t, func(t *testing.T, clock ledger.Clock) ledger.Ledger {
		db := MustOpen(t, server.NewDatabase(t), clock).(*sqlcore.DB)
		db.Webhooks = true
		return db
	})
}

// MustOpen opens a migrated ledger on dsn.
func MustOpen(tb testing.TB, dsn string, clock ledger.Clock, opts ...mysql.Option) ledger.Ledger {
	tb.Helper()
	db, err := mysql.Open(context.Background(), dsn, opts...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	if err := mysql.Migrate(context.Background(), db.SQL()); err != nil {
		tb.Fatal(err)
	}
	// The suite moves time for the database's decisions and the records alike.
	db.Now, db.DBClock = clock, clock
	// The suites test what the ledger decides, not how fast a loaded
	// machine's MariaDB commits (a COMMIT of 5 s was seen with the whole
	// tree's tests at once): the tests of deadlines set their own.
	db.Timeout = 30 * time.Second
	return db
}

func TestClockSkew(t *testing.T) {
	ledgertest.ExerciseClockSkew(t, processesOn(testenv.SharedMariaDB(t), false))
}

// processesOn returns a factory of ledgers, one per clock, each its own
// pool on one fresh database, as separate gateway processes would be,
// writing webhook events when webhooks is set. DBClock stays nil: the
// server's clock decides; each clock only stamps.
func processesOn(server *testenv.MariaDB, webhooks bool, opts ...mysql.Option) ledgertest.OpenShared {
	return processesWith(server, func(tb testing.TB, dsn string) *sqlcore.DB {
		db, err := mysql.Open(context.Background(), dsn, opts...)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { db.Close() })
		if err := mysql.Migrate(context.Background(), db.SQL()); err != nil {
			tb.Fatal(err)
		}
		db.Webhooks = webhooks
		return db
	})
}

// processesWith is processesOn with the ledgers opened by open.
func processesWith(server *testenv.MariaDB, open func(tb testing.TB, dsn string) *sqlcore.DB) ledgertest.OpenShared {
	return func(t *testing.T, clocks ...ledger.Clock) []ledger.Ledger {
		dsn := server.NewDatabase(t)
		var out []ledger.Ledger
		for _, clock := range clocks {
			db := open(t, dsn)
			db.Now = clock
			out = append(out, db)
		}
		return out
	}
}

func TestConfigKeepsOperatorParameters(t *testing.T) {
	c, err := mysql.Config("u:p@tcp(db:3306)/gw?readTimeout=7s&sql_mode=%27ANSI%27")
	if err != nil {
		t.Fatal(err)
	}
	if !c.ParseTime || c.Loc.String() != "UTC" || !c.InterpolateParams || !c.ClientFoundRows {
		t.Fatalf("required parameters missing: %+v", c)
	}
	if c.ReadTimeout.String() != "7s" || c.Params["sql_mode"] != "'ANSI'" {
		t.Fatalf("operator parameters lost: readTimeout=%v sql_mode=%q", c.ReadTimeout, c.Params["sql_mode"])
	}
	if _, err := mysql.Config("not a dsn"); err == nil {
		t.Fatal("bad DSN accepted")
	}
}

// TestDialectClassifiesServerErrors feeds the driver's error values of
// MySQL, MariaDB and TiDB to the dialect. What IsRetryable reports is run
// again within the call's deadline and, when it keeps failing, is
// ErrUnavailable (503), like a lock-wait timeout on MariaDB.
func TestDialectClassifiesServerErrors(t *testing.T) {
	d := mysql.Dialect()
	cases := []struct {
		err                           error
		retryable, duplicate, unavail bool
	}{
		{&gomysql.MySQLError{Number: 1213}, true, false, false}, // deadlock
		{&gomysql.MySQLError{Number: 1205}, true, false, false}, // lock wait timeout
		{&gomysql.MySQLError{Number: 1062}, false, true, false}, // duplicate key
		{fmt.Errorf("wrapped: %w", &gomysql.MySQLError{Number: 1213}), true, false, false},
		{&gomysql.MySQLError{Number: 1040}, false, false, true}, // too many connections
		{driver.ErrBadConn, false, false, true},
		{gomysql.ErrInvalidConn, false, false, true},
		{&gomysql.MySQLError{Number: 1064}, false, false, false}, // syntax
		// TiDB: a lock wait that ended answered with the generic 1105, as
		// v8.5.3 did for a top-up and a revocation on held rows.
		{&gomysql.MySQLError{Number: 1105, Message: "lock wait timeout"}, true, false, false},
		{&gomysql.MySQLError{Number: 1105, SQLState: [5]byte{'H', 'Y', '0', '0', '0'}, Message: "Lock wait timeout exceeded; try restarting transaction"}, true, false, false},
		{&gomysql.MySQLError{Number: 1105, Message: "pessimistic lock retry limit reached"}, true, false, false},
		{&gomysql.MySQLError{Number: 1105, Message: "unknown error"}, false, false, false},
		{&gomysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded; try restarting transaction"}, true, false, false}, // TiDB pessimistic
		{&gomysql.MySQLError{Number: 8002, Message: "[executor:8002]can not retry select for update statement"}, true, false, false},
		{&gomysql.MySQLError{Number: 8005, Message: "Write Conflict, txnStartTS is stale"}, true, false, false},
		{&gomysql.MySQLError{Number: 8022, Message: "Error: KV error safe to retry"}, true, false, false},
		{&gomysql.MySQLError{Number: 9007, Message: "Write conflict, txnStartTS=1, conflictStartTS=2"}, true, false, false},
		{fmt.Errorf("sqlcore: %w", &gomysql.MySQLError{Number: 9007}), true, false, false},
	}
	for _, c := range cases {
		if got := d.IsRetryable(c.err); got != c.retryable {
			t.Errorf("IsRetryable(%v) = %v, want %v", c.err, got, c.retryable)
		}
		if got := d.IsDuplicate(c.err); got != c.duplicate {
			t.Errorf("IsDuplicate(%v) = %v, want %v", c.err, got, c.duplicate)
		}
		if got := d.IsUnavailable(c.err); got != c.unavail {
			t.Errorf("IsUnavailable(%v) = %v, want %v", c.err, got, c.unavail)
		}
	}
}
