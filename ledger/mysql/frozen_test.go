package mysql_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/internal/testenv"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/mysql"
)

// TestFrozenServerFailsEveryCallWithinTheTimeout stops a private MariaDB
// with SIGSTOP (connections stay open, nothing answers) and checks that
// each kind of call on the request path fails with ErrUnavailable within
// the ledger's Timeout, not the driver's 30 s read timeout, and that the
// same pool works again once the server resumes.
func TestFrozenServerFailsEveryCallWithinTheTimeout(t *testing.T) {
	server := testenv.StartMariaDB(t)
	db, err := mysql.Open(context.Background(), server.NewDatabase(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if err := mysql.Migrate(context.Background(), db.SQL()); err != nil {
		t.Fatal(err)
	}
	db.Timeout = 2 * time.Second
	ctx := context.Background()
	link := &ledger.Link{
		ID: uuid.Must(uuid.NewV7()).String(), TokenHash: make([]byte, 32),
		Object:    ledger.Object{Key: "k", VersionID: "v", Size: 1},
		Allowance: 5, Remaining: 5, ExpiresAt: time.Now().Add(time.Hour), Delivery: ledger.DeliverySession,
	}
	if _, _, err := db.LinkCreate(ctx, link); err != nil {
		t.Fatal(err)
	}
	x, _, err := db.SessionMint(ctx, ledger.MintRequest{
		Claim:     ledger.ClaimRequest{LinkID: link.ID, Kind: ledger.KindSession},
		SessionID: uuid.Must(uuid.NewV7()).String(), TokenHash: []byte(strings.Repeat("s", 32)),
		ByteBudget: 1000, MaxConcurrency: 2, ExpiresAt: time.Now().Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}

	calls := map[string]func(context.Context) error{
		"LinkGetByTokenHash": func(ctx context.Context) error { _, err := db.LinkGetByTokenHash(ctx, link.TokenHash); return err },
		"LinkClaim": func(ctx context.Context) error {
			_, err := db.LinkClaim(ctx, link.TokenHash, ledger.ClaimRequest{Kind: ledger.KindStream}, false)
			return err
		},
		"SessionGetByTokenHash": func(ctx context.Context) error { _, err := db.SessionGetByTokenHash(ctx, x.TokenHash); return err },
		"SlotAcquire":           func(ctx context.Context) error { return db.SlotAcquire(ctx, x.ID, "h", time.Minute) },
		"BudgetDraw":            func(ctx context.Context) error { _, err := db.BudgetDraw(ctx, x.ID, 10); return err },
		"BudgetReturn":          func(ctx context.Context) error { return db.BudgetReturn(ctx, x.ID, 10) },
		"SlotRelease":           func(ctx context.Context) error { return db.SlotRelease(ctx, x.ID, "h") },
		"Ping":                  func(ctx context.Context) error { return db.Ping(ctx) },
	}
	server.Freeze(t)
	var wg sync.WaitGroup
	for name, call := range calls {
		wg.Go(func() {
			start := time.Now()
			// A request's context without a deadline, as net/http's is.
			err := call(ctx)
			took := time.Since(start)
			t.Logf("%s on a frozen server: %v after %v", name, err, took.Round(time.Millisecond))
			if !errors.Is(err, ledger.ErrUnavailable) && !errors.Is(err, ledger.ErrAmbiguous) {
				t.Errorf("%s on a frozen server = %v, want ErrUnavailable", name, err)
			}
			if took < db.Timeout-100*time.Millisecond || took > db.Timeout+2*time.Second {
				t.Errorf("%s gave up after %v, want about the timeout, %v", name, took, db.Timeout)
			}
		})
	}
	wg.Wait()

	// One request's calls in a row (a lookup, a claim, a session read and
	// a slot, as a request may make) wait one timeout in all, not one
	// each.
	start := time.Now()
	reqCtx := ledger.WithWait(ctx)
	for _, name := range []string{"LinkGetByTokenHash", "LinkClaim", "SessionGetByTokenHash", "SlotAcquire"} {
		if err := calls[name](reqCtx); !errors.Is(err, ledger.ErrUnavailable) && !errors.Is(err, ledger.ErrAmbiguous) {
			t.Errorf("%s of one request on a frozen server = %v, want ErrUnavailable", name, err)
		}
	}
	if took := time.Since(start); took > db.Timeout+time.Second {
		t.Errorf("four calls of one request gave up after %v in all, want at most the timeout %v (+1 s)", took, db.Timeout)
	} else {
		t.Logf("four calls of one request on a frozen server: %v in all", took.Round(time.Millisecond))
	}

	server.Thaw()
	deadline := time.Now().Add(30 * time.Second)
	for name, call := range calls {
		for {
			err := call(ctx)
			if err == nil || errors.Is(err, ledger.ErrRefused) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s still fails 30 s after the server resumed: %v", name, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
