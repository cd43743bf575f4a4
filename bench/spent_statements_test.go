package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/dlgate/dlgate/config"
	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/ledger/mysql"
	"github.com/dlgate/dlgate/storage/fs"
)

// TestGETsOfASpentLinkCostWhatDecidesBeforeTheRefusal counts, on MariaDB,
// the statements the gateway sends for GETs of links it saw unclaimable
// (SPEC §1 "Refusals may be cached, grants never", issue 22: "GETs of a
// spent link: ≤ 0.1 statements per request after the first"), each GET
// from a client of its own (another User-Agent), after the link's first
// refusal in the process:
//
//   - a spent session-delivery link: one, the client's affinity lookup
//     (SPEC §5: a client with a usable session of it is sent there, so
//     the lookup stays); none with GATEWAY_SESSION_AFFINITY=off, and none
//     for a revoked one, whose sessions are all dead. Before the mint
//     used the refusal cache: the lookup and a claim transaction, 6;
//   - a spent stream link with retries: one, GrantRetryBegin's read of
//     the client's interrupted grant (SPEC §1 "Retries": served while the
//     link lives, whatever remains), then the cache's refusal;
//   - a spent stream link: none.
//
// The ledger runs on one connection, so the session's counter is the
// gateway's own statements.
//
//	PATH=$PWD/bin:$PATH GATEWAY_TEST_STRICT=1 go test -count=1 -run TestGETsOfASpentLinkCostWhatDecidesBeforeTheRefusal -v ./bench/
func TestGETsOfASpentLinkCostWhatDecidesBeforeTheRefusal(t *testing.T) {
	ctx := context.Background()
	db, err := mysql.Open(ctx, testenv.SharedMariaDB(t).NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := mysql.Migrate(ctx, db.SQL()); err != nil {
		t.Fatal(err)
	}
	db.SQL().SetMaxOpenConns(1)
	questions := func() int64 {
		t.Helper()
		var (
			name string
			n    int64
		)
		if err := db.SQL().QueryRow(`SHOW SESSION STATUS LIKE 'Questions'`).Scan(&name, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	store, err := fs.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })

	// Two gateways on the one ledger (and its refusal cache): session
	// affinity by client, and off.
	start := func(affinity string) (*gateway.Server, *httptest.Server) {
		pub := httptest.NewUnstartedServer(nil)
		srv, err := gateway.New(gateway.Options{Ledger: db, Store: store, Secret: bytes.Repeat([]byte("k"), 32),
			PublicURL: "http://" + pub.Listener.Addr().String(), AdminToken: "admin", Logger: slog.New(slog.DiscardHandler),
			Sessions: config.Sessions{Affinity: affinity}})
		if err != nil {
			t.Fatal(err)
		}
		pub.Config.Handler = srv.PublicHandler()
		pub.Start()
		t.Cleanup(pub.Close)
		return srv, pub
	}
	client, clientPub := start(gateway.AffinityClient)
	_, off := start(gateway.AffinityOff)
	adm := httptest.NewServer(client.AdminHandler())
	t.Cleanup(adm.Close)

	call := func(method, path, body string, want int) []byte {
		t.Helper()
		return adminCall(t, adm.URL, "admin", method, path, body, want)
	}
	call(http.MethodPut, "/v1/objects/spent.bin", "spent", http.StatusCreated)
	newLink := func(extra string) (id, path string) {
		var l struct{ ID, URL string }
		json.Unmarshal(call(http.MethodPost, "/v1/links", `{"object":{"key":"spent.bin"},"downloads":1,"expires_in":3600`+extra+`}`, http.StatusCreated), &l) //nolint:errcheck // checked by its use
		i := bytes.Index([]byte(l.URL), []byte("/d/"))
		if i < 0 {
			t.Fatalf("link URL %q", l.URL)
		}
		return l.ID, l.URL[i:]
	}
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(base, path, ua string, want int) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("User-Agent", ua)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body) //nolint:errcheck // only the status matters
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Fatalf("GET %s by %s = %d, want %d", path, ua, resp.StatusCode, want)
		}
	}
	// perGET is the statements of n GETs of path by clients of their own,
	// each answered want, per GET.
	const n = 20
	perGET := func(base, path string, want int) float64 {
		t.Helper()
		before := questions()
		for i := range n {
			get(base, path, fmt.Sprintf("crowd-%d", i), want)
		}
		return float64(questions()-before-1) / n // less the first SHOW
	}

	session, sessionPath := newLink(`,"delivery":"session"`)
	get(clientPub.URL, sessionPath, "first", http.StatusSeeOther) // the one download
	get(clientPub.URL, sessionPath, "second", http.StatusNotFound)
	get(off.URL, sessionPath, "second", http.StatusNotFound)
	spentSession := perGET(clientPub.URL, sessionPath, http.StatusNotFound)
	spentSessionOff := perGET(off.URL, sessionPath, http.StatusNotFound)
	// The client that has a session of the spent link is still sent to
	// it (SPEC §5).
	get(clientPub.URL, sessionPath, "first", http.StatusSeeOther)

	revoked, revokedPath := newLink(`,"delivery":"session"`)
	get(clientPub.URL, revokedPath, "first", http.StatusSeeOther)
	call(http.MethodPost, "/v1/links/"+revoked+"/revoke", "", http.StatusOK)
	get(clientPub.URL, revokedPath, "first", http.StatusNotFound)
	revokedSession := perGET(clientPub.URL, revokedPath, http.StatusNotFound)

	_, retriesPath := newLink(`,"retries":1`)
	get(clientPub.URL, retriesPath, "first", http.StatusOK)
	client.WaitDeliveries() // its delivery record written
	get(clientPub.URL, retriesPath, "second", http.StatusNotFound)
	spentRetries := perGET(clientPub.URL, retriesPath, http.StatusNotFound)

	_, streamPath := newLink(``)
	get(clientPub.URL, streamPath, "first", http.StatusOK)
	client.WaitDeliveries()
	get(clientPub.URL, streamPath, "second", http.StatusNotFound)
	spentStream := perGET(clientPub.URL, streamPath, http.StatusNotFound)

	t.Logf("statements per GET after the first refusal, %d GETs each by clients of their own: spent session link %.2f (affinity off %.2f), "+
		"revoked session link %.2f, spent stream link with retries %.2f, spent stream link %.2f (link %s)",
		n, spentSession, spentSessionOff, revokedSession, spentRetries, spentStream, session)
	for _, c := range []struct {
		what      string
		got, want float64
	}{
		{"a spent session link (the client's affinity lookup)", spentSession, 1},
		{"a spent session link, affinity off", spentSessionOff, 0},
		{"a revoked session link", revokedSession, 0},
		{"a spent stream link with retries (the client's retry read)", spentRetries, 1},
		{"a spent stream link", spentStream, 0},
	} {
		if c.got != c.want {
			t.Errorf("a GET of %s cost %.2f statements, want %v", c.what, c.got, c.want)
		}
	}
}
