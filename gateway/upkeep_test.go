package gateway_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/ledger"
)

// TestRetentionPurgesOldAuditEntriesAndDeadKeys: GATEWAY_AUDIT_RETENTION
// applies to the audit trail and to keys revoked that long ago, as to
// links; the sweeper's metrics count both.
func TestRetentionPurgesOldAuditEntriesAndDeadKeys(t *testing.T) {
	const audit = 24 * time.Hour
	h := MustHarness(t, func(o *gateway.Options) { o.AuditRetention = audit })
	gone := h.MustKey(t, "gone", "links:read")
	if resp, _ := h.AdminDo(t, http.MethodDelete, "/v1/keys/"+gone.ID, nil, nil); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE = %d", resp.StatusCode)
	}
	h.Clock.Advance(audit)
	kept := h.MustKey(t, "kept", "links:read")
	h.Server.Retain(context.Background())

	entries := mustJSON[auditPage](t, mustBody(t, h, http.MethodGet, "/v1/audit")).Entries
	if len(entries) != 1 || entries[0].Target.ID != kept.ID {
		t.Errorf("audit after the retention = %+v, want only the entry of the key made since", entries)
	}
	keys := mustJSON[struct {
		Keys []keyJSON `json:"keys"`
	}](t, mustBody(t, h, http.MethodGet, "/v1/keys")).Keys
	if len(keys) != 1 || keys[0].ID != kept.ID {
		t.Errorf("keys after the retention = %+v, want only %s", keys, kept.ID)
	}
	metrics := string(mustBody(t, h, http.MethodGet, "/metrics"))
	for _, line := range []string{`gateway_sweeper_rows_total{what="audit_entries_purged"} 2`, `gateway_sweeper_rows_total{what="keys_purged"} 1`} {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("/metrics has no line %q", line)
		}
	}
}

// TestRetentionGoesOnWhileAnyPurgeFillsItsBatch: a round of retention asks
// for another batch while links, tombstones, audit entries or keys came
// back a full batch, and stops at the first round where none did.
func TestRetentionGoesOnWhileAnyPurgeFillsItsBatch(t *testing.T) {
	h := MustHarness(t, func(o *gateway.Options) { o.AuditRetention = time.Hour })
	results := []ledger.PurgeResult{{Audit: 100, Links: 2}, {Keys: 100}, {Tombstones: 100, Audit: 40}, {Keys: 3}, {Audit: 100}}
	var limits []int
	h.Ledger.LinkPurgeFunc = func(_ context.Context, _ time.Duration, limit int) (ledger.PurgeResult, error) {
		limits = append(limits, limit)
		res := results[0]
		results = results[1:]
		return res, nil
	}
	h.Server.Retain(context.Background())
	if len(limits) != 4 || limits[0] != 100 {
		t.Fatalf("LinkPurge called with limits %v, want 4 batches of 100 (the 4th came back short)", limits)
	}
	metrics := string(mustBody(t, h, http.MethodGet, "/metrics"))
	for _, line := range []string{
		`gateway_sweeper_rows_total{what="audit_entries_purged"} 140`,
		`gateway_sweeper_rows_total{what="keys_purged"} 103`,
		`gateway_sweeper_rows_total{what="links_purged"} 2`,
		`gateway_sweeper_rows_total{what="tombstones_purged"} 100`,
	} {
		if !strings.Contains(metrics, line+"\n") {
			t.Errorf("/metrics has no line %q", line)
		}
	}
}

// TestTheSweeperCountsConsoleSessionsItPurged: console sessions deleted by
// SessionSweep are counted, and a full batch of them is followed by
// another.
func TestTheSweeperCountsConsoleSessionsItPurged(t *testing.T) {
	h := MustHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	results := []ledger.SweepResult{{ConsoleSessionsPurged: 500, SessionsEnded: 1}, {ConsoleSessionsPurged: 7}}
	h.Ledger.SessionSweepFunc = func(context.Context, int) (ledger.SweepResult, error) {
		res := results[0]
		if results = results[1:]; len(results) == 0 {
			cancel() // RunSweeper returns after this round
		}
		return res, nil
	}
	h.Server.RunSweeper(ctx, time.Hour)
	if n := h.Ledger.Calls("Sweep"); n != 2 {
		t.Errorf("SessionSweep called %d times, want 2 (a full batch, then a short one)", n)
	}
	metrics := string(mustBody(t, h, http.MethodGet, "/metrics"))
	if line := `gateway_sweeper_rows_total{what="console_sessions_purged"} 507`; !strings.Contains(metrics, line+"\n") {
		t.Errorf("/metrics has no line %q", line)
	}
}
