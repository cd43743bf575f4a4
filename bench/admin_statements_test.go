package bench

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/gateway/admin"
	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/ledger/mysql"
	"github.com/dlgate/dlgate/storage/fs"
)

// TestAnAuthenticatedAdminCallCostsNoExtraStatement counts, on MariaDB,
// the statements the server receives for admin calls made with an API key
// (SPEC §6, issue 24: "no more statements than today, except the audit
// insert on changes"). The baseline is the ledger calls the handlers make,
// made directly without an actor; once the key is verified and touched
// (last_used_at), a read costs exactly its baseline and a change its
// baseline and the audit INSERT. A key not in the process's cache costs
// one lookup more, and its first use in a minute one touch more.
//
//	PATH=$PWD/bin:$PATH GATEWAY_TEST_STRICT=1 go test -count=1 -run TestAnAuthenticatedAdminCallCostsNoExtraStatement -v ./bench/
func TestAnAuthenticatedAdminCallCostsNoExtraStatement(t *testing.T) {
	ctx := context.Background()
	dsn := testenv.SharedMariaDB(t).NewDatabase(t)
	db, err := mysql.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := mysql.Migrate(ctx, db.SQL()); err != nil {
		t.Fatal(err)
	}
	status, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { status.Close() })
	status.SetMaxOpenConns(1)
	// The server's count of statements from every client; this test is
	// the only one of its server. The reading is one statement itself.
	questions := func() int64 {
		t.Helper()
		var (
			name string
			n    int64
		)
		if err := status.QueryRow(`SHOW GLOBAL STATUS LIKE 'Questions'`).Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	cost := func(f func()) int64 {
		t.Helper()
		before := questions()
		f()
		return questions() - before - 1
	}

	store, err := fs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	// The gateway's clock stands still, so that the key's cache entry and
	// its touch stay fresh however slow the machine is; the database's
	// clock is its own.
	clock := &stillClock{t: time.Now()}
	srv, err := gateway.New(gateway.Options{Ledger: db, Store: store, Secret: bytes.Repeat([]byte("k"), 32), PublicURL: "http://unused",
		AdminToken: "admin", Logger: slog.New(slog.DiscardHandler), Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	adm := httptest.NewServer(srv.AdminHandler())
	t.Cleanup(adm.Close)
	call := func(token, method, path, body string, want int) []byte {
		t.Helper()
		return adminCall(t, adm.URL, token, method, path, body, want)
	}
	var key struct{ Key string }
	json.Unmarshal(call("admin", http.MethodPost, "/v1/keys", `{"name":"bench","scopes":["links:read","links:write","objects:write"]}`, http.StatusCreated), &key)
	var obj struct {
		VersionID string `json:"version_id"`
	}
	json.Unmarshal(call("admin", http.MethodPut, "/v1/objects/bench.bin", "bench", http.StatusCreated), &obj)
	newLink := func() string {
		var l struct{ ID string }
		json.Unmarshal(call("admin", http.MethodPost, "/v1/links", `{"object":{"key":"bench.bin","version_id":"`+obj.VersionID+`"},"downloads":1,"expires_in":3600}`, http.StatusCreated), &l)
		return l.ID
	}
	read, change, direct := newLink(), newLink(), newLink()

	// The baselines: the ledger calls of each handler, without an actor.
	readBase := cost(func() {
		if _, err := db.LinkGet(ctx, direct); err != nil {
			t.Fatal(err)
		}
	})
	changeBase := cost(func() {
		if err := db.AllowanceAdd(ctx, direct, 1, "bench"); err != nil {
			t.Fatal(err)
		}
		if _, err := db.LinkGet(ctx, direct); err != nil { // the handler answers the link
			t.Fatal(err)
		}
	})

	// The key's first use: one lookup, one touch.
	first := cost(func() { call(key.Key, http.MethodGet, "/v1/links/"+read, "", http.StatusOK) })
	const n = 20
	reads := cost(func() {
		for range n {
			call(key.Key, http.MethodGet, "/v1/links/"+read, "", http.StatusOK)
		}
	})
	changes := cost(func() {
		for range n {
			call(key.Key, http.MethodPost, "/v1/links/"+change+"/allowance", `{"add":1,"reason":"bench"}`, http.StatusOK)
		}
	})
	bootstrapReads := cost(func() {
		for range n {
			call("admin", http.MethodGet, "/v1/links/"+read, "", http.StatusOK)
		}
	})
	// Past the cache's lifetime, within the minute: a lookup, no touch.
	clock.Advance(admin.KeyCacheTTL)
	relooked := cost(func() { call(key.Key, http.MethodGet, "/v1/links/"+read, "", http.StatusOK) })

	t.Logf("statements: GET /v1/links/{id} %d (ledger alone %d); POST …/allowance %d (ledger alone %d); "+
		"first use of a key +%d; after %v +%d; with the bootstrap token %d",
		reads/n, readBase, changes/n, changeBase, first-readBase, admin.KeyCacheTTL, relooked-readBase, bootstrapReads/n)
	if reads != n*readBase {
		t.Errorf("%d reads with a key cost %d statements, want %d × %d: the key's check costs nothing once verified", n, reads, n, readBase)
	}
	if changes != n*(changeBase+1) {
		t.Errorf("%d changes with a key cost %d statements, want %d × (%d + the audit INSERT)", n, changes, n, changeBase)
	}
	if bootstrapReads != n*readBase {
		t.Errorf("%d reads with the bootstrap token cost %d statements, want %d × %d", n, bootstrapReads, n, readBase)
	}
	if first != readBase+2 {
		t.Errorf("the key's first use cost %d statements, want %d + the lookup + the touch", first, readBase)
	}
	if relooked != readBase+1 {
		t.Errorf("a use past the cache's lifetime cost %d statements, want %d + the lookup (no touch within the minute)", relooked, readBase)
	}
}

// stillClock is a clock that moves only when told.
type stillClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *stillClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *stillClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// adminCall sends method path with body to the admin listener at base as
// token's bearer and returns the answer's body, failing tb unless its
// status is want.
func adminCall(tb testing.TB, base, token, method, path, body string, want int) []byte {
	tb.Helper()
	req, _ := http.NewRequest(method, base+path, bytes.NewReader([]byte(body)))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		tb.Fatalf("%s %s = %d %s, want %d", method, path, resp.StatusCode, b, want)
	}
	return b
}
