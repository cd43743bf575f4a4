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
		runRanges(b, db, nil)
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
		runRanges(b, db, func() int64 {
			var name string
			var n int64
			if err := status.QueryRow(`SHOW GLOBAL STATUS LIKE 'Questions'`).Scan(&name, &n); err != nil {
				b.Fatal(err)
			}
			return n
		})
	})
}

func runRanges(b *testing.B, l ledger.Ledger, questions func() int64) {
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
	pub := httptest.NewServer(srv.PublicHandler())
	b.Cleanup(pub.Close)
	adm := httptest.NewServer(srv.AdminHandler())
	b.Cleanup(adm.Close)

	data := make([]byte, objectSize)
	rand.Read(data)
	admin := func(method, path string, body io.Reader, out any) {
		req, _ := http.NewRequest(method, adm.URL+path, body)
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
	var obj struct {
		VersionID string `json:"version_id"`
	}
	admin(http.MethodPut, "/v1/objects/bench.bin", bytes.NewReader(data), &obj)
	var link struct{ Token string }
	admin(http.MethodPost, "/v1/links", bytes.NewReader([]byte(fmt.Sprintf(
		`{"object":{"key":"bench.bin","version_id":%q},"downloads":1,"expires_in":3600,"delivery":"session",
		  "session":{"byte_budget":%d,"max_concurrency":%d}}`, obj.VersionID, int64(1)<<50, concurrent))), &link)
	resp, err := http.Post(pub.URL+"/d/"+link.Token+"/sessions", "", nil)
	if err != nil {
		b.Fatal(err)
	}
	var sess struct {
		SessionURL string `json:"session_url"`
	}
	json.NewDecoder(resp.Body).Decode(&sess)
	resp.Body.Close()
	sessionURL := pub.URL + sess.SessionURL[len("http://unused"):]

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: concurrent * 2, MaxConnsPerHost: concurrent}}
	b.Cleanup(client.CloseIdleConnections)
	b.SetBytes(rangeSize)
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
			off := mathrand.Int64N(objectSize - rangeSize)
			req, _ := http.NewRequest(http.MethodGet, sessionURL, nil)
			req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+rangeSize-1))
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			n, _ := io.CopyBuffer(io.Discard, resp.Body, buf)
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				// A goroutine can move to another kept-alive connection
				// while its previous handler is still releasing the slot.
				refused.Add(1)
				continue
			}
			if resp.StatusCode != http.StatusPartialContent || n != rangeSize {
				b.Errorf("range answered %s with %d bytes", resp.Status, n)
				return
			}
		}
	})
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(int64(b.N)-refused.Load())/elapsed.Seconds(), "ranges/s")
	b.ReportMetric(float64(refused.Load())/float64(b.N), "429s/op")
	if questions != nil {
		// Minus the one status query itself.
		b.ReportMetric(float64(questions()-before-1)/float64(b.N), "statements/range")
	}
}
