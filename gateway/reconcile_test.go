package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/ledger"
)

// lostCommit answers every stream claim as a COMMIT whose answer was lost
// (ledger.ErrAmbiguous with the grant): after the claim took effect when
// committed is set, without it otherwise.
type lostCommit struct {
	ledger.Ledger
	committed bool
}

func (l *lostCommit) LinkClaim(ctx context.Context, hash []byte, req ledger.ClaimRequest, confirmed bool) (ledger.ClaimOutcome, error) {
	if l.committed {
		o, err := l.Ledger.LinkClaim(ctx, hash, req, confirmed)
		if err != nil || o.Grant == nil {
			return o, err
		}
		return o, fmt.Errorf("%w: connection reset during COMMIT", ledger.ErrAmbiguous)
	}
	lk, err := l.Ledger.LinkGetByTokenHash(ctx, hash)
	if err != nil {
		return ledger.ClaimOutcome{}, err
	}
	g := &ledger.Grant{ID: uuid.Must(uuid.NewV7()).String(), LinkID: lk.ID, Kind: ledger.KindStream, Status: ledger.StatusGranted}
	return ledger.ClaimOutcome{Link: lk, Grant: g}, fmt.Errorf("%w: connection reset during COMMIT", ledger.ErrAmbiguous)
}

// SessionMint answers every mint as a COMMIT whose answer was lost, with
// the session the claim may have minted.
func (l *lostCommit) SessionMint(ctx context.Context, req ledger.MintRequest) (*ledger.Session, bool, error) {
	lost := fmt.Errorf("%w: connection reset during COMMIT", ledger.ErrAmbiguous)
	if l.committed {
		x, created, err := l.Ledger.SessionMint(ctx, req)
		if err != nil || !created {
			return x, created, err
		}
		return x, false, lost
	}
	return &ledger.Session{ID: req.SessionID, LinkID: req.Claim.LinkID, GrantID: uuid.Must(uuid.NewV7()).String()}, false, lost
}

func TestAMintWhoseCommitOutcomeIsUnknownIsNeverLeftSpent(t *testing.T) {
	for _, committed := range []bool{true, false} {
		t.Run(map[bool]string{true: "ItHadCommitted", false: "ItHadNot"}[committed], func(t *testing.T) {
			h := MustHarness(t, func(o *gateway.Options) { o.Ledger = &lostCommit{Ledger: o.Ledger, committed: committed} })
			l := h.MustObjectLink(t, "lost.bin", testData(10<<10), map[string]any{"downloads": 3, "delivery": "session"})
			key := http.Header{"Idempotency-Key": {"retry-me"}}
			resp, body := h.Do(t, http.MethodPost, l.URL+"/sessions", key)
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("mint whose claim's outcome is unknown = %d %s, want 503", resp.StatusCode, body)
			}
			got := h.MustShowLink(t, l.ID)
			if got.Remaining != 3 || got.ActiveSessions == nil || *got.ActiveSessions != 0 {
				t.Errorf("remaining %d, active sessions %v after a 503; want 3 and 0: the client got nothing", got.Remaining, got.ActiveSessions)
			}
			if committed && got.Grants["refunded"] != 1 {
				t.Errorf("grants = %v, want the committed grant refunded", got.Grants)
			}
			if !committed && got.Grants["granted"]+got.Grants["refunded"] != 0 {
				t.Errorf("grants = %v, want none", got.Grants)
			}
		})
	}
}

func TestAClaimWhoseCommitOutcomeIsUnknownIsNeverLeftSpent(t *testing.T) {
	for _, committed := range []bool{true, false} {
		t.Run(map[bool]string{true: "ItHadCommitted", false: "ItHadNot"}[committed], func(t *testing.T) {
			h := MustHarness(t, func(o *gateway.Options) { o.Ledger = &lostCommit{Ledger: o.Ledger, committed: committed} })
			l := h.MustObjectLink(t, "lost.bin", testData(10<<10), map[string]any{"downloads": 3})
			resp, body := h.Do(t, http.MethodGet, l.URL, nil)
			if resp.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("GET whose claim's outcome is unknown = %d %s, want 503", resp.StatusCode, body)
			}
			got := h.MustShowLink(t, l.ID)
			if got.Remaining != 3 {
				t.Errorf("remaining = %d after a 503, want 3: the client got nothing, so nothing may be spent", got.Remaining)
			}
			if committed && got.Grants["refunded"] != 1 {
				t.Errorf("grants = %v, want the committed grant refunded", got.Grants)
			}
			if !committed && got.Grants["granted"]+got.Grants["refunded"] != 0 {
				t.Errorf("grants = %v, want none", got.Grants)
			}
		})
	}
}
