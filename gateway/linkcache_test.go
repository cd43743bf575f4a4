package gateway_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestEveryClaimIsOneLedgerCall(t *testing.T) {
	h := MustHarness(t)
	data := testData(1000)
	l := h.MustObjectLink(t, "seen.bin", data, map[string]any{"downloads": 3})
	for i := range 2 {
		before := h.Ledger.Calls("")
		resp, body := h.Do(t, http.MethodGet, l.URL, nil)
		if resp.StatusCode != http.StatusOK || string(body) != string(data) {
			t.Fatalf("GET %d = %d", i, resp.StatusCode)
		}
		h.WaitIdle()
		// The claim by token reads the link and claims it: one call,
		// cached or not; and the response's end records its delivery:
		// one more, after the last byte (SPEC §1).
		if n, byToken, records := h.Ledger.Calls("")-before, h.Ledger.Calls("LinkClaim"), h.Ledger.Calls("GrantDeliveryRecord"); n != 2 || byToken != i+1 || records != i+1 {
			t.Errorf("GET %d made %d ledger calls (%d claims by token, %d delivery records in all), want 2: the claim and the record", i, n, byToken, records)
		}
	}
	// A refusal is one call too: the claim explains it from the row it
	// read.
	h.MustObjectLink(t, "spent.bin", data, nil)
	spent := h.MustObjectLink(t, "spent.bin", data, map[string]any{"downloads": 1})
	h.Do(t, http.MethodGet, spent.URL, nil)
	h.WaitIdle()
	before := h.Ledger.Calls("")
	resp, body := h.Do(t, http.MethodGet, spent.URL, nil)
	mustProblem(t, resp, body, http.StatusNotFound, "link-unavailable")
	if n := h.Ledger.Calls("") - before; n != 1 {
		t.Errorf("a refused GET made %d ledger calls, want 1", n)
	}
	if !strings.Contains(h.Logs.String(), `"reason":"exhausted"`) {
		t.Errorf("the refusal's reason is not in the log")
	}
	// A session link this process has seen mints at once: one call.
	sl := h.MustObjectLink(t, "session.bin", data, map[string]any{"downloads": 3, "delivery": "session"})
	h.Do(t, http.MethodGet, sl.URL, http.Header{"User-Agent": {"first"}})
	before = h.Ledger.Calls("")
	if resp, _ := h.Do(t, http.MethodGet, sl.URL, http.Header{"User-Agent": {"second"}}); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("GET of a session link = %d, want 303", resp.StatusCode)
	}
	if n, mints := h.Ledger.Calls("")-before, h.Ledger.Calls("SessionMint"); n != 1 || mints != 2 {
		t.Errorf("a session link's second GET made %d ledger calls (%d mints in all), want 1", n, mints)
	}
	// The claim still decides: a revoked link answers 404 at once,
	// cached or not, and HEAD reads the row afresh.
	h.AdminDo(t, http.MethodPost, "/v1/links/"+l.ID+"/revoke", nil, nil)
	if resp, _ := h.Do(t, http.MethodGet, l.URL, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET of the revoked link = %d, want 404", resp.StatusCode)
	}
	if resp, _ := h.Do(t, http.MethodHead, l.URL, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("HEAD of the revoked link = %d, want 404", resp.StatusCode)
	}
	if got := h.MustShowLink(t, l.ID).Remaining; got != 1 {
		t.Fatalf("remaining = %d, want 1", got)
	}
}
