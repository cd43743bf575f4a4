// Package ledgertest is the conformance suite every ledger backend runs:
// the same sentences against SQLite and against a real MariaDB/MySQL.
package ledgertest

import (
	"context"
	"crypto/rand"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
)

// NewLedger returns a fresh, migrated, empty ledger whose every decision
// reads the time from clock. It registers its own cleanup.
type NewLedger func(t *testing.T, clock ledger.Clock) ledger.Ledger

// Clock is a settable clock for the suite.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock starts at the current time, truncated to microseconds.
func NewClock() *Clock { return &Clock{t: ledger.Micro(time.Now())} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Set moves the clock to t.
func (c *Clock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

type env struct {
	l     ledger.Ledger
	clock *Clock
	ctx   context.Context
}

func setup(t *testing.T, newLedger NewLedger) *env {
	t.Helper()
	c := NewClock()
	return &env{l: newLedger(t, c.Now), clock: c, ctx: context.Background()}
}

func randomHash(testing.TB) []byte {
	b := make([]byte, 32)
	rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return b
}

// MustLink creates a link with n downloads expiring in an hour (edit sets
// other fields before insertion).
func (e *env) MustLink(tb testing.TB, n int, edit ...func(*ledger.Link)) *ledger.Link {
	tb.Helper()
	l := &ledger.Link{
		ID:        uuid.Must(uuid.NewV7()).String(),
		TokenHash: randomHash(tb),
		Object: ledger.Object{Bucket: "b", Key: "docs/report.pdf", VersionID: "v1", Size: 1000,
			ETag: `"abc"`, ContentType: "application/pdf", LastModified: e.clock.Now().Add(-time.Hour)},
		Filename:  "report.pdf",
		Allowance: n,
		Remaining: n,
		ExpiresAt: e.clock.Now().Add(time.Hour),
		Delivery:  ledger.DeliveryStream,
	}
	for _, f := range edit {
		f(l)
	}
	out, created, err := e.l.LinkCreate(e.ctx, l)
	if err != nil || !created {
		tb.Fatalf("LinkCreate = %v, %v", created, err)
	}
	return out
}

func (e *env) mustStatus(tb testing.TB, id string) *ledger.LinkStatus {
	tb.Helper()
	st, err := e.l.LinkGet(e.ctx, id)
	if err != nil {
		tb.Fatalf("Link(%s): %v", id, err)
	}
	return st
}

// mustBeSpent fails unless link id has no allowance left and exactly k
// granted claims.
func (e *env) mustBeSpent(tb testing.TB, id string, k int) {
	tb.Helper()
	if st := e.mustStatus(tb, id); st.Remaining != 0 || st.Grants[ledger.StatusGranted] != k {
		tb.Fatalf("remaining=%d grants=%v, want 0 and %d granted", st.Remaining, st.Grants, k)
	}
}

// claim claims l by its token hash for account, as a GET of its URL does
// once any retry was asked for (RetriesChecked: a link with retries is
// claimed like any other), and returns the grant, or the refusal as an
// error (ErrRefused with its reason).
func (e *env) claim(l *ledger.Link, account string) (*ledger.Grant, error) {
	return grantOf(e.l.LinkClaim(e.ctx, l.TokenHash, ledger.ClaimRequest{AccountID: account, Kind: ledger.KindStream, Client: "test", RetriesChecked: true}, false))
}

// grantOf is a claim's outcome as a grant or an error: the refusal as
// ErrRefused with its reason.
func grantOf(o ledger.ClaimOutcome, err error) (*ledger.Grant, error) {
	switch {
	case err != nil:
		return o.Grant, err
	case o.Grant != nil:
		return o.Grant, nil
	case o.Refusal != "":
		return nil, ledger.Refused(o.Refusal)
	}
	return nil, fmt.Errorf("ledgertest: the link is not claimed at once (delivery %q, confirm %v)", o.Link.Delivery, o.Link.Confirm)
}

func wantReason(tb testing.TB, err error, want ledger.Reason) {
	tb.Helper()
	if got := ledger.ReasonOf(err); got != want {
		tb.Fatalf("refusal = %v (reason %q), want reason %q", err, got, want)
	}
}

// releaseAll runs fn(0) … fn(n-1) in n goroutines released at the same
// instant, waits for all of them, and fails the test with the first error
// any of them returned.
func releaseAll(tb testing.TB, n int, fn func(i int) error) {
	tb.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if err := fn(i); err != nil {
				errs <- err
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	if err, failed := <-errs; failed {
		tb.Fatalf("%d of %d concurrent calls failed, first: %v", len(errs)+1, n, err)
	}
}
