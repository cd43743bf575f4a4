package gateway_test

import (
	"net/http"
	"testing"
)

func TestAClaimOfALinkThisProcessSawNeedsNoLookup(t *testing.T) {
	h := MustHarness(t)
	data := testData(1000)
	l := h.MustObjectLink(t, "seen.bin", data, map[string]any{"downloads": 3})
	for i := range 2 {
		resp, body := h.Do(t, http.MethodGet, l.URL, nil)
		if resp.StatusCode != http.StatusOK || string(body) != string(data) {
			t.Fatalf("GET %d = %d", i, resp.StatusCode)
		}
	}
	// The first GET looks the link up as it claims it (ClaimByToken), the
	// second claims by id from the cached row: no lookup of its own.
	if lookups, byToken, byID := h.Ledger.Calls("LinkByTokenHash"), h.Ledger.Calls("ClaimByToken"), h.Ledger.Calls("Claim"); lookups != 0 || byToken != 1 || byID != 1 {
		t.Errorf("two claims made %d lookups, %d claims by token, %d by id; want 0, 1 (the first) and 1 (the second, from the cache)", lookups, byToken, byID)
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
