package mysql_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/mysql"
	"github.com/dlgate/dlgate/ledger/sqlcore"
)

// BenchmarkHotLinkClaims claims one link from 64 goroutines spread over 1
// or 3 pools (processes) on one MariaDB, with grouping off and on: the
// ledger's share of the hot-link row without HTTP, to tell whether the
// link's row lock bounds the rate (which would call for its allowance
// split over several rows) or the rest of the request does. It checks
// that every claim was granted and that remaining plus the grants is the
// allowance. Run it with
//
//	PATH=$PWD/bin:$PATH go test -run '^$' -bench HotLinkClaims -benchtime 20000x ./ledger/mysql/
func BenchmarkHotLinkClaims(b *testing.B) {
	for _, procs := range []int{1, 3} {
		for _, batch := range []int{1, 64} {
			b.Run(fmt.Sprintf("processes=%d/claim_batch=%d", procs, batch), func(b *testing.B) {
				benchmarkClaims(b, procs, batch, 1, 64)
			})
		}
	}
}

// BenchmarkLoneClaims claims links of one download each from a single
// goroutine: every claim a transaction of its own, its time the latency
// of a claim at low load.
func BenchmarkLoneClaims(b *testing.B) {
	benchmarkClaims(b, 1, 64, b.N, 1)
}

// BenchmarkDistinctLinkClaims is BenchmarkHotLinkClaims on links of one
// download each, every claim another link.
func BenchmarkDistinctLinkClaims(b *testing.B) {
	for _, procs := range []int{1, 3} {
		for _, batch := range []int{1, 64} {
			b.Run(fmt.Sprintf("processes=%d/claim_batch=%d", procs, batch), func(b *testing.B) {
				benchmarkClaims(b, procs, batch, b.N, 64)
			})
		}
	}
}

func benchmarkClaims(b *testing.B, procs, batch, links, clients int) {
	ctx := context.Background()
	server := testenv.SharedMariaDB(b)
	dsn := server.NewDatabase(b)
	var (
		dbs              []*sqlcore.DB
		batches, inBatch atomic.Int64
	)
	for range procs {
		db, err := mysql.Open(ctx, dsn)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		db.ClaimBatch = batch
		db.OnClaimBatch = func(s sqlcore.ClaimBatchStats) {
			batches.Add(1)
			inBatch.Add(int64(s.Size))
		}
		dbs = append(dbs, db)
	}
	if err := mysql.Migrate(ctx, dbs[0].SQL()); err != nil {
		b.Fatal(err)
	}
	allowance := b.N
	if links > 1 {
		allowance = 1
	}
	made := make([]*ledger.Link, links)
	for i := range made {
		l := &ledger.Link{ID: uuid.Must(uuid.NewV7()).String(), TokenHash: hash32(),
			Object:    ledger.Object{Bucket: "b", Key: "hot", VersionID: "v1", Size: 1024},
			Allowance: allowance, Remaining: allowance, ExpiresAt: time.Now().Add(time.Hour), Delivery: ledger.DeliveryStream}
		if _, _, err := dbs[0].LinkCreate(ctx, l); err != nil {
			b.Fatal(err)
		}
		made[i] = l
	}
	var (
		next, refused atomic.Int64
	)
	b.SetParallelism(max(1, clients/runtime.GOMAXPROCS(0)))
	lockWait := func() float64 { // ms InnoDB spent waiting for row locks, all sessions
		var name string
		var ms float64
		if err := dbs[0].SQL().QueryRowContext(ctx, `SHOW GLOBAL STATUS LIKE 'Innodb_row_lock_time'`).Scan(&name, &ms); err != nil {
			b.Fatal(err)
		}
		return ms
	}
	wait0 := lockWait()
	batches.Store(0)
	inBatch.Store(0)
	cpu0, db0 := cpuSeconds(os.Getpid()), cpuSeconds(server.Pid())
	claim := func(i int64) {
		l := made[int(i)%len(made)]
		o, err := dbs[int(i)%procs].LinkClaim(ledger.WithWait(ctx), l.TokenHash,
			ledger.ClaimRequest{Kind: ledger.KindStream, Client: "bench"}, false)
		if err != nil || o.Grant == nil {
			refused.Add(1)
		}
	}
	b.ResetTimer()
	if clients == 1 {
		for i := range b.N {
			claim(int64(i))
		}
	} else {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				claim(next.Add(1) - 1)
			}
		})
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "claims/s")
	// CPU per claim of the ledger (this process) and of MariaDB, and the
	// cores both kept busy: near the machine's cores, the rate is the
	// CPU's, not a lock's.
	ledgerCPU, dbCPU := cpuSeconds(os.Getpid())-cpu0, cpuSeconds(server.Pid())-db0
	b.ReportMetric(ledgerCPU/float64(b.N)*1e6, "ledger-µs/claim")
	b.ReportMetric(dbCPU/float64(b.N)*1e6, "mariadb-µs/claim")
	b.ReportMetric((ledgerCPU+dbCPU)/b.Elapsed().Seconds(), "cores")
	if n := batches.Load(); n > 0 {
		b.ReportMetric(float64(inBatch.Load())/float64(n), "claims/batch")
	}
	// How many claim transactions waited for a row lock at a time, on
	// average: near procs-1 on the hot link, the row is never free.
	b.ReportMetric((lockWait()-wait0)/1e3/b.Elapsed().Seconds(), "lock-waiters")
	if n := refused.Load(); n > 0 {
		b.Errorf("%d of %d claims not granted", n, b.N)
	}
	granted := 0
	for _, l := range made {
		st, err := dbs[0].LinkGet(ctx, l.ID)
		if err != nil {
			b.Fatal(err)
		}
		if st.Remaining+st.Grants[ledger.StatusGranted] != st.Allowance {
			b.Fatalf("link %s: remaining %d + granted %d != allowance %d", l.ID, st.Remaining, st.Grants[ledger.StatusGranted], st.Allowance)
		}
		granted += st.Grants[ledger.StatusGranted]
	}
	if granted != b.N {
		b.Fatalf("%d grants for %d claims", granted, b.N)
	}
}

// cpuSeconds is the CPU time (user + system) process pid used so far.
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return float64(utime+stime) / 100 // USER_HZ
}

func hash32() []byte {
	b := make([]byte, 32)
	rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return b
}
