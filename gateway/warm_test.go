package gateway_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/dlgate/dlgate/gateway"
)

// sessionCalls are the ledger calls a range request can cost.
var sessionCalls = []string{"SessionGetByTokenHash", "SlotAcquire", "SlotRenew", "SlotRelease", "BudgetDraw", "BudgetReturn", "SessionDeliveryRecord"}

func (h *Harness) callsOf(names ...string) int {
	n := 0
	for _, m := range names {
		n += h.Ledger.Calls(m)
	}
	return n
}

func TestBackToBackRangesCostFewStatements(t *testing.T) {
	h := MustHarness(t)
	const size, part = 8 << 20, 64 << 10
	data := testData(size)
	l := h.MustObjectLink(t, "ranges.bin", data, nil)
	x := h.MustMint(t, l)
	before := h.callsOf(sessionCalls...)
	const n = 100
	for i := range n {
		off := (i * part) % size
		resp, body := h.Do(t, http.MethodGet, x.SessionURL, http.Header{"Range": {fmt.Sprintf("bytes=%d-%d", off, off+part-1)}})
		if resp.StatusCode != http.StatusPartialContent || string(body) != string(data[off:off+part]) {
			t.Fatalf("range %d = %d (%d bytes)", i, resp.StatusCode, len(body))
		}
	}
	h.WaitIdle()
	calls := h.callsOf(sessionCalls...) - before
	t.Logf("%d back-to-back 64 KiB ranges: %d ledger calls (%.2f per request)", n, calls, float64(calls)/n)
	if calls > n*3/2 {
		t.Errorf("%d ranges made %d ledger calls, want at most 1.5 per request", n, calls)
	}
	// Nothing is lost: once the warm window ends, exactly what was sent
	// is drawn and the slot is free.
	h.Server.Flush()
	if got := h.MustSession(t, x.SessionID).BytesDrawn; got != n*part {
		t.Errorf("bytes_drawn = %d after %d bytes sent, want equal", got, n*part)
	}
	var leased int
	h.DB.SQL().QueryRowContext(context.Background(), "SELECT COUNT(*) FROM session_slots WHERE session_id = ? AND holder IS NOT NULL", x.SessionID).Scan(&leased) //nolint:errcheck // checked below
	if leased != 0 {
		t.Errorf("%d slots still leased after Flush, want 0", leased)
	}
}

func TestARevocationReachesAWarmSession(t *testing.T) {
	h := MustHarness(t, func(o *gateway.Options) { o.WarmRowTTL = 200 * time.Millisecond })
	l := h.MustObjectLink(t, "w.bin", testData(4096), map[string]any{"downloads": 3})
	ranged := http.Header{"Range": {"bytes=0-9"}}
	serve := func(x sessionJSON) int {
		resp, _ := h.Do(t, http.MethodGet, x.SessionURL, ranged)
		return resp.StatusCode
	}
	// Through this process's admin API: at once.
	x := h.MustMint(t, l)
	if st := serve(x); st != http.StatusPartialContent {
		t.Fatalf("first range = %d", st)
	}
	h.AdminDo(t, http.MethodDelete, "/v1/sessions/"+x.SessionID, nil, nil)
	if st := serve(x); st != http.StatusNotFound {
		t.Fatalf("range right after DELETE /v1/sessions = %d, want 404", st)
	}
	// By another process (straight in the database): within WarmRowTTL.
	y := h.MustMint(t, l)
	if st := serve(y); st != http.StatusPartialContent {
		t.Fatalf("first range = %d", st)
	}
	if err := h.DB.SessionRevoke(context.Background(), y.SessionID); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for serve(y) != http.StatusNotFound {
		if time.Now().After(deadline) {
			t.Fatal("a session revoked elsewhere still serves here after 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
