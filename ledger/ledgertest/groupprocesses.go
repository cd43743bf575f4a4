package ledgertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore"
)

// ExerciseClaimsAcrossProcesses runs the claim sentences that need two
// processes (two ledgers with pools of their own on one database): their
// batches never deadlock each other, and a top-up through one is seen by
// the other within its RefusalCache.
func ExerciseClaimsAcrossProcesses(t *testing.T, open OpenShared) {
	t.Run("BatchesOfManyLinksOnTwoProcessesNeverDeadlock", func(t *testing.T) {
		t.Parallel()
		ls := open(t, time.Now, time.Now)
		ctx := context.Background()
		const (
			links  = 12
			rounds = 8
		)
		var all []*ledger.Link
		for range links {
			l := &ledger.Link{ID: uuid.Must(uuid.NewV7()).String(), TokenHash: randomHash(t),
				Object:    ledger.Object{Bucket: "b", Key: "many", VersionID: "v1", Size: 1},
				Allowance: 2 * rounds, Remaining: 2 * rounds, ExpiresAt: time.Now().Add(time.Hour), Delivery: ledger.DeliveryStream}
			if _, _, err := ls[0].LinkCreate(ctx, l); err != nil {
				t.Fatal(err)
			}
			all = append(all, l)
		}
		var (
			mu      sync.Mutex
			failed  []error
			largest int
		)
		for _, l := range ls {
			dbOf(t, l).OnClaimBatch = func(b sqlcore.ClaimBatchStats) {
				mu.Lock()
				defer mu.Unlock()
				largest = max(largest, b.Size)
				if b.Err != nil {
					failed = append(failed, b.Err)
				}
			}
		}
		// Each round, every link is claimed once by each process, the
		// claims arriving in opposite orders on the two: batches that
		// locked rows as their claims arrived would hold some rows the
		// other wants next.
		for round := range rounds {
			releaseAll(t, 2*links, func(i int) error {
				p, k := i%2, i/2
				if p == 1 {
					k = links - 1 - k
				}
				o, err := ls[p].LinkClaim(ctx, all[k].TokenHash, ledger.ClaimRequest{Kind: ledger.KindStream,
					Client: fmt.Sprintf("round-%d-process-%d", round, p)}, false)
				switch {
				case err != nil:
					return fmt.Errorf("process %d, link %d: %w", p, k, err)
				case o.Grant == nil:
					return fmt.Errorf("process %d, link %d: %+v; want a grant", p, k, o)
				}
				return nil
			})
		}
		for _, l := range all {
			if st, err := ls[0].LinkGet(ctx, l.ID); err != nil || st.Remaining != 0 || st.Grants[ledger.StatusGranted] != 2*rounds {
				t.Fatalf("link after the rounds: %+v, %v; want every download granted once", st, err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if len(failed) > 0 {
			t.Fatalf("%d claim transactions failed (a deadlock retries its claims alone); first: %v", len(failed), failed[0])
		}
		t.Logf("largest batch: %d claims", largest)
	})

	t.Run("ATopUpThroughAnotherProcessIsSeenWithinTheRefusalCache", func(t *testing.T) {
		t.Parallel()
		ls := open(t, time.Now, time.Now)
		ctx := context.Background()
		a, b := ls[0], dbOf(t, ls[1])
		b.RefusalCache = time.Minute
		l := mustCreate(t, a, time.Now().Add(time.Hour))
		claim := func(x ledger.Ledger) (ledger.ClaimOutcome, error) {
			return x.LinkClaim(ctx, l.TokenHash, ledger.ClaimRequest{Kind: ledger.KindStream, Client: "test"}, false)
		}
		if o, err := claim(a); err != nil || o.Grant == nil {
			t.Fatalf("claim = %+v, %v", o, err)
		}
		if o, err := claim(b); err != nil || o.Refusal != ledger.ReasonExhausted {
			t.Fatalf("the other process's claim of the spent link = %+v, %v; want exhausted", o, err)
		}
		if err := a.AllowanceAdd(ctx, l.ID, 1, "one more"); err != nil {
			t.Fatal(err)
		}
		// Within its RefusalCache the other process may still refuse.
		if o, err := claim(b); err != nil || o.Refusal != ledger.ReasonExhausted || o.Link.Remaining != 0 {
			t.Fatalf("the other process at once after the top-up = %+v, %v; want its cached refusal", o, err)
		}
		b.RefusalCache = 50 * time.Millisecond
		time.Sleep(b.RefusalCache)
		o, err := claim(b)
		if err != nil || o.Grant == nil {
			t.Fatalf("the other process once its RefusalCache passed = %+v, %v; want the top-up's grant", o, err)
		}
		st, err := a.LinkGet(ctx, l.ID)
		if err != nil || st.Remaining != 0 || st.Grants[ledger.StatusGranted] != 2 {
			t.Fatalf("link after the top-up's claim: %+v, %v", st, err)
		}
		if o.Grant.LinkID != l.ID {
			t.Fatalf("grant of link %s, want %s", o.Grant.LinkID, l.ID)
		}
	})
}
