// Package bench measures the session range path end to end (HTTP, ledger,
// storage) on both databases: `make bench PKGS=./bench/`.
package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	mathrand "math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/go-sql-driver/mysql"

	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/mysql"
	"github.com/dlgate/dlgate/ledger/sqlite"
	"github.com/dlgate/dlgate/storage/fs"
)

func TestMain(m *testing.M) { testenv.Main(m) }

const (
	objectSize = 64 << 20
	rangeSize  = 64 << 10
	concurrent = 16
)

// BenchmarkSessionRange64KiB: one session, 64 KiB ranges at random
// offsets, 16 requests in flight. Reports ranges/s and, on MySQL, the
// statements (each one network round trip) the server saw per request.
func BenchmarkSessionRange64KiB(b *testing.B) {
	eachLedger(b, runRanges)
}

// BenchmarkLinkClaim: GET /d/{token} of a 1 KiB object on one link with a
// large allowance, 16 requests in flight: each is a full claim (lookup,
// conditional decrement and grant insert in one transaction) plus the
// stream. Reports claims/s and, on MySQL, statements per claim.
func BenchmarkLinkClaim(b *testing.B) {
	eachLedger(b, runClaims)
}

// eachLedger runs bench on a migrated SQLite file and on a migrated
// database of a private MariaDB. questions, when not nil, reads the
// server's statement counter.
func eachLedger(b *testing.B, bench func(b *testing.B, l ledger.Ledger, questions func() int64)) {
	b.Run("sqlite", func(b *testing.B) {
		path := filepath.Join(b.TempDir(), "gateway.db")
		db, err := sqlite.Open(context.Background(), path)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		if err := sqlite.Migrate(context.Background(), db.SQL(), path); err != nil {
			b.Fatal(err)
		}
		bench(b, db, nil)
	})
	b.Run("mysql", func(b *testing.B) {
		server := testenv.SharedMariaDB(b)
		dsn := server.NewDatabase(b)
		db, err := mysql.Open(context.Background(), dsn)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		if err := mysql.Migrate(context.Background(), db.SQL()); err != nil {
			b.Fatal(err)
		}
		status, err := sql.Open("mysql", dsn)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { status.Close() })
		status.SetMaxOpenConns(1)
		bench(b, db, func() int64 {
			var name string
			var n int64
			if err := status.QueryRow(`SHOW GLOBAL STATUS LIKE 'Questions'`).Scan(&name, &n); err != nil {
				b.Fatal(err)
			}
			return n
		})
	})
}

// fixture is a gateway on l and a fresh fs store, served by httptest.
type fixture struct {
	pub, adm *httptest.Server
}

func newFixture(b *testing.B, l ledger.Ledger) *fixture {
	store, err := fs.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	srv, err := gateway.New(gateway.Options{
		Ledger: l, Store: store, Secret: bytes.Repeat([]byte("k"), 32), PublicURL: "http://unused",
		AdminToken: "admin", Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		b.Fatal(err)
	}
	f := &fixture{pub: httptest.NewServer(srv.PublicHandler()), adm: httptest.NewServer(srv.AdminHandler())}
	b.Cleanup(f.pub.Close)
	b.Cleanup(f.adm.Close)
	return f
}

// admin calls the admin API and decodes its JSON answer into out.
func (f *fixture) admin(b *testing.B, method, path string, body []byte, out any) {
	req, _ := http.NewRequest(method, f.adm.URL+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer admin")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(resp.Body)
		b.Fatalf("%s %s: %s %s", method, path, resp.Status, msg)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		b.Fatal(err)
	}
}

// link uploads size random bytes and creates a link with the given JSON
// fields added; it returns the link token.
func (f *fixture) link(b *testing.B, size int, fields string) string {
	data := make([]byte, size)
	rand.Read(data)
	var obj struct {
		VersionID string `json:"version_id"`
	}
	f.admin(b, http.MethodPut, "/v1/objects/bench.bin", data, &obj)
	var link struct{ Token string }
	f.admin(b, http.MethodPost, "/v1/links", []byte(fmt.Sprintf(
		`{"object":{"key":"bench.bin","version_id":%q},"expires_in":3600,%s}`, obj.VersionID, fields)), &link)
	return link.Token
}

// measure runs do from ~16 goroutines and reports rate (per successful
// call, under name) and, on MySQL, statements per call.
func measure(b *testing.B, name string, questions func() int64, do func(buf []byte) (ok bool)) {
	b.SetParallelism((concurrent + 1) / 2) // × GOMAXPROCS (2 here) ≈ 16 in flight
	var before int64
	if questions != nil {
		before = questions()
	}
	var refused atomic.Int64
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		buf := make([]byte, 32<<10)
		for pb.Next() {
			if !do(buf) {
				refused.Add(1)
			}
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(int64(b.N)-refused.Load())/elapsed.Seconds(), name+"/s")
	b.ReportMetric(float64(refused.Load())/float64(b.N), "429s/op")
	if questions != nil {
		// Minus the one status query itself.
		b.ReportMetric(float64(questions()-before-1)/float64(b.N), "statements/"+name)
	}
}

func newClient(b *testing.B) *http.Client {
	c := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrent * 2, MaxConnsPerHost: concurrent}}
	b.Cleanup(c.CloseIdleConnections)
	return c
}

func runClaims(b *testing.B, l ledger.Ledger, questions func() int64) {
	f := newFixture(b, l)
	const size = 1 << 10
	url := f.pub.URL + "/d/" + f.link(b, size, `"downloads":1000000`)
	client := newClient(b)
	b.SetBytes(size)
	measure(b, "claims", questions, func(buf []byte) bool {
		resp, err := client.Get(url)
		if err != nil {
			b.Error(err)
			return true
		}
		n, _ := io.CopyBuffer(io.Discard, resp.Body, buf)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || n != size {
			b.Errorf("claim answered %s with %d bytes", resp.Status, n)
		}
		return true
	})
}

func runRanges(b *testing.B, l ledger.Ledger, questions func() int64) {
	f := newFixture(b, l)
	tok := f.link(b, objectSize, fmt.Sprintf(`"downloads":1,"delivery":"session","session":{"byte_budget":%d,"max_concurrency":%d}`, int64(1)<<50, concurrent))
	resp, err := http.Post(f.pub.URL+"/d/"+tok+"/sessions", "", nil)
	if err != nil {
		b.Fatal(err)
	}
	var sess struct {
		SessionURL string `json:"session_url"`
	}
	json.NewDecoder(resp.Body).Decode(&sess)
	resp.Body.Close()
	sessionURL := f.pub.URL + strings.TrimPrefix(sess.SessionURL, "http://unused")
	client := newClient(b)
	b.SetBytes(rangeSize)
	measure(b, "ranges", questions, func(buf []byte) bool {
		off := mathrand.Int64N(objectSize - rangeSize)
		req, _ := http.NewRequest(http.MethodGet, sessionURL, nil)
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+rangeSize-1))
		resp, err := client.Do(req)
		if err != nil {
			b.Error(err)
			return true
		}
		n, _ := io.CopyBuffer(io.Discard, resp.Body, buf)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			// A goroutine can move to another kept-alive connection while
			// its previous handler is still releasing the slot.
			return false
		}
		if resp.StatusCode != http.StatusPartialContent || n != rangeSize {
			b.Errorf("range answered %s with %d bytes", resp.Status, n)
		}
		return true
	})
}
