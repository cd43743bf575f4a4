package gateway_test

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlgate/dlgate/gateway"
)

// ua is a request header of one client program.
func ua(agent string) http.Header { return http.Header{"User-Agent": {agent}} }

// affinityCookieOf returns the client cookie of a 303, or nil.
func affinityCookieOf(resp *http.Response) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == "dlgate_client" {
			return c
		}
	}
	return nil
}

func TestClientAffinitySendsOneClientBackToItsSession(t *testing.T) {
	h := MustHarness(t)
	data := testData(64 << 10)
	l := h.MustObjectLink(t, "film.mkv", data, map[string]any{"downloads": 2, "delivery": "session"})

	// Nothing to resume yet: a Range claims nothing.
	resp, _ := h.Do(t, http.MethodGet, l.URL, withHeader(ua("aria2/1.36.0"), "Range", "bytes=0-99"))
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("Range before any session = %d, want 409", resp.StatusCode)
	}
	resp, _ = h.Do(t, http.MethodGet, l.URL, ua("aria2/1.36.0"))
	first := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || first == "" {
		t.Fatalf("first GET = %d Location %q, want 303", resp.StatusCode, first)
	}
	ck := affinityCookieOf(resp)
	tok := strings.TrimPrefix(l.URL, h.Public.URL+"/d/")
	if ck == nil || !ck.HttpOnly || ck.Secure || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/d/"+tok ||
		len(ck.Value) != 22 || strings.Contains(ck.Value, tok) || ck.MaxAge < 3000 {
		t.Fatalf("client cookie = %+v, want an opaque HttpOnly, SameSite=Lax id on /d/{token} for the session's life", ck)
	}

	// The same program from the same address, without the cookie (a
	// download manager's resume), with Range, HEAD, the named URL; and a
	// browser with the cookie whatever its User-Agent: all sent to the
	// one session, nothing claimed.
	cookie := http.Header{"Cookie": {"dlgate_client=" + ck.Value}, "User-Agent": {"Mozilla/5.0 other"}}
	for _, c := range []struct {
		method, url string
		header      http.Header
	}{
		{http.MethodGet, l.URL, ua("aria2/1.36.0")},
		{http.MethodGet, l.URL, withHeader(ua("aria2/1.36.0"), "Range", "bytes=100-199")},
		{http.MethodGet, l.URL, withHeader(ua("aria2/1.36.0"), "Range", "bytes=-5")},
		{http.MethodHead, l.URL, ua("aria2/1.36.0")},
		{http.MethodHead, l.URL, withHeader(ua("aria2/1.36.0"), "Range", "bytes=0-1")},
		{http.MethodGet, l.NamedURL, ua("aria2/1.36.0")},
		{http.MethodGet, l.URL, cookie},
		{http.MethodGet, l.URL, withHeader(cookie, "Range", "bytes=5-")},
	} {
		resp, _ := h.Do(t, c.method, c.url, c.header)
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != first {
			t.Fatalf("%s (Range %q, User-Agent %q) = %d Location %q, want 303 to the first session", c.method, c.header.Get("Range"), c.header.Get("User-Agent"), resp.StatusCode, loc)
		}
		if affinityCookieOf(resp) != nil {
			t.Fatalf("%s sent back to the session set the cookie again", c.method)
		}
	}
	if got := h.MustShowLink(t, l.ID).Remaining; got != 1 {
		t.Fatalf("remaining = %d after ten requests of one client, want 1 (one claim)", got)
	}
	if !strings.Contains(h.Logs.String(), `"affinity":"reused"`) || !strings.Contains(h.Logs.String(), `"affinity":"minted"`) {
		t.Errorf("the access lines do not record affinity=minted and affinity=reused")
	}
	resp, body := h.Do(t, http.MethodGet, first, withHeader(ua("aria2/1.36.0"), "Range", "bytes=100-199"))
	if resp.StatusCode != http.StatusPartialContent || string(body) != string(data[100:200]) {
		t.Fatalf("range on the session = %d", resp.StatusCode)
	}

	// Another program is another client: its own claim, then none left.
	resp, _ = h.Do(t, http.MethodGet, l.URL, ua("Wget/1.21.3"))
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc == first {
		t.Fatalf("another client's GET = %d Location %q, want a session of its own", resp.StatusCode, loc)
	}
	resp, body = h.Do(t, http.MethodGet, l.URL, ua("curl/7.88.1"))
	mustProblem(t, resp, body, http.StatusNotFound, "link-unavailable")
	// The first client still has its session.
	resp, _ = h.Do(t, http.MethodGet, l.URL, ua("aria2/1.36.0"))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != first {
		t.Fatalf("first client after the link ran out = %d, want 303 to its session", resp.StatusCode)
	}
	// The grant of the first client's session counts the nine requests
	// sent to it instead of claiming.
	_, body = h.AdminDo(t, http.MethodGet, "/v1/links/"+l.ID+"/grants", nil, nil)
	reuses := map[int64]int{}
	for _, g := range mustJSON[grantsPage](t, body).Grants {
		reuses[g.AffinityReuses]++
	}
	if reuses[9] != 1 || reuses[0] != 1 {
		t.Errorf("grants' affinity_reuses %v, want 9 for the first client's session and 0 for the other", reuses)
	}
	// An explicit mint keeps its own semantics: a claim (refused here).
	resp, body = h.Do(t, http.MethodPost, l.URL+"/sessions", ua("aria2/1.36.0"))
	mustProblem(t, resp, body, http.StatusNotFound, "link-unavailable")
}

func TestClientAffinityEndsWithTheSession(t *testing.T) {
	h := MustHarness(t)
	data := testData(4 << 10)
	l := h.MustObjectLink(t, "a.bin", data, map[string]any{"downloads": 3, "delivery": "session",
		"session": map[string]any{"byte_budget": len(data)}})
	resp, _ := h.Do(t, http.MethodGet, l.URL, nil)
	loc := resp.Header.Get("Location")
	// The whole budget drawn: the client's session has none left, so a
	// Range finds nothing and a GET claims anew.
	if resp, body := h.Do(t, http.MethodGet, loc, nil); resp.StatusCode != http.StatusOK || len(body) != len(data) {
		t.Fatalf("GET of the session = %d", resp.StatusCode)
	}
	h.WaitIdle()
	h.Server.Flush()
	resp, _ = h.Do(t, http.MethodGet, l.URL, http.Header{"Range": {"bytes=0-1"}})
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("Range after the budget was spent = %d, want 409", resp.StatusCode)
	}
	resp, _ = h.Do(t, http.MethodGet, l.URL, nil)
	second := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || second == loc {
		t.Fatalf("GET after the budget was spent = %d Location %q, want a new session", resp.StatusCode, second)
	}
	// A revoked session is not reused either.
	x := mustJSON[sessionJSON](t, must(h.Do(t, http.MethodGet, l.URL, nil)))
	h.AdminDo(t, http.MethodDelete, "/v1/sessions/"+x.SessionID, nil, nil)
	resp, _ = h.Do(t, http.MethodGet, l.URL, nil)
	if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc == second {
		t.Fatalf("GET after the revocation = %d Location %q, want a new session", resp.StatusCode, loc)
	}
	if got := h.MustShowLink(t, l.ID).Remaining; got != 0 {
		t.Fatalf("remaining = %d, want 0 (three claims)", got)
	}
	// And a revoked link ends it: the generic 404.
	h.AdminDo(t, http.MethodPost, "/v1/links/"+l.ID+"/revoke", nil, nil)
	resp, body := h.Do(t, http.MethodGet, l.URL, nil)
	mustProblem(t, resp, body, http.StatusNotFound, "link-unavailable")
	resp, _ = h.Do(t, http.MethodGet, l.URL, http.Header{"Range": {"bytes=0-1"}})
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("Range on a revoked link = %d, want 409", resp.StatusCode)
	}
}

func TestTwentySimultaneousFirstGetsOfOneClientMakeOneClaim(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "a.bin", testData(1000), map[string]any{"downloads": 5, "delivery": "session"})
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		locs = map[string]int{}
	)
	start := make(chan struct{})
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, l.URL, nil)
			req.Header.Set("User-Agent", "Mozilla/5.0 double-click")
			resp, err := h.Client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			mu.Lock()
			locs[resp.Header.Get("Location")]++
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	if len(locs) != 1 || locs[""] != 0 {
		t.Fatalf("20 simultaneous first GETs of one client went to %v, want one session", locs)
	}
	if got := h.MustShowLink(t, l.ID).Remaining; got != 4 {
		t.Fatalf("remaining = %d, want 4 (one claim)", got)
	}
}

func TestAffinityModes(t *testing.T) {
	for _, mode := range []string{gateway.AffinityAccount, gateway.AffinityOff} {
		t.Run(mode, func(t *testing.T) {
			h := MustHarness(t, func(o *gateway.Options) { o.Affinity = mode })
			l := h.MustObjectLink(t, "a.bin", testData(1000), map[string]any{"downloads": 3, "delivery": "session"})
			var locs []string
			for i := 0; i < 2; i++ {
				resp, _ := h.Do(t, http.MethodGet, l.URL, ua("aria2/1.36.0"))
				if resp.StatusCode != http.StatusSeeOther || affinityCookieOf(resp) != nil {
					t.Fatalf("GET %d = %d (cookie %v), want 303 and no cookie", i, resp.StatusCode, affinityCookieOf(resp))
				}
				locs = append(locs, resp.Header.Get("Location"))
			}
			if locs[0] == locs[1] {
				t.Fatalf("two GETs of one anonymous client shared a session under %q", mode)
			}
			before := h.Ledger.Calls("")
			resp, _ := h.Do(t, http.MethodGet, l.URL, withHeader(ua("aria2/1.36.0"), "Range", "bytes=0-1"))
			if resp.StatusCode != http.StatusConflict || h.Ledger.Calls("") != before {
				t.Fatalf("anonymous Range = %d with %d ledger calls, want 409 and none", resp.StatusCode, h.Ledger.Calls("")-before)
			}
			if got := h.MustShowLink(t, l.ID).Remaining; got != 1 {
				t.Fatalf("remaining = %d, want 1", got)
			}
		})
	}
}

// claimCalls counts the ledger calls that can spend an allowance.
func (h *Harness) claimCalls() int {
	return h.Ledger.Calls("Claim") + h.Ledger.Calls("LinkClaim") + h.Ledger.Calls("SessionMint")
}

// TestQuickWholeGetsOfOneClientReuseItsSessionWhileItsBudgetCoversTheObject
// fetches a 17 MiB object (two 8 MiB chunks and a 1 MiB tail) whole
// through its link three times in a row, as curl -L with a cookie jar
// does, on a session link with the default budget (twice the size).
// Every whole response draws only what it sends: the second GET finds
// exactly the object's size undrawn and goes back to the session, and
// only the third, with nothing left, claims anew. The process keeps
// whatever it drew warm for the whole test (WarmIdle of an hour), which
// forces the race window of a quick second click without a sleep: a
// tail drawn ahead of the response's end would be held here and missed
// by the database's count, and the second GET would claim the link's
// second download.
func TestQuickWholeGetsOfOneClientReuseItsSessionWhileItsBudgetCoversTheObject(t *testing.T) {
	h := MustHarness(t, func(o *gateway.Options) { o.WarmIdle = time.Hour })
	data := testData(17 << 20)
	l := h.MustObjectLink(t, "big.iso", data, map[string]any{"downloads": 2, "delivery": "session"})
	if l.Session.ByteBudget != 2*int64(len(data)) {
		t.Fatalf("byte budget %d, want twice the size", l.Session.ByteBudget)
	}
	var cookie string
	get := func(i int) sessionJSON {
		t.Helper()
		hdr := ua("curl/8.5.0")
		if cookie != "" {
			hdr.Set("Cookie", "dlgate_client="+cookie)
		}
		resp, body := h.Do(t, http.MethodGet, l.URL, hdr)
		if resp.StatusCode != http.StatusSeeOther {
			t.Fatalf("whole GET %d of the link = %d %s, want 303", i, resp.StatusCode, body)
		}
		if ck := affinityCookieOf(resp); ck != nil {
			cookie = ck.Value
		}
		x := mustJSON[sessionJSON](t, body)
		resp, got := h.Do(t, http.MethodGet, resp.Header.Get("Location"), hdr)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(got, data) {
			t.Fatalf("whole GET %d of the session = %d with %d bytes, want 200 and the object", i, resp.StatusCode, len(got))
		}
		h.WaitIdle()
		return x
	}
	first := get(1)
	if x := h.MustSession(t, first.SessionID); x.BytesDrawn != int64(len(data)) {
		t.Errorf("after one whole response bytes_drawn = %d, want the size %d: nothing drawn past its end", x.BytesDrawn, len(data))
	}
	if second := get(2); second.SessionID != first.SessionID {
		t.Fatalf("the second quick whole GET went to session %s, want the first, %s, whose undrawn budget covers the object", second.SessionID, first.SessionID)
	}
	if got := h.MustShowLink(t, l.ID).Remaining; got != 1 {
		t.Fatalf("remaining = %d after two whole GETs of one client, want 1 (one claim)", got)
	}
	if x := h.MustSession(t, first.SessionID); x.BytesDrawn != x.ByteBudget {
		t.Errorf("after two whole responses bytes_drawn = %d, want the whole budget %d", x.BytesDrawn, x.ByteBudget)
	}
	if third := get(3); third.SessionID == first.SessionID {
		t.Fatalf("the third whole GET went back to the spent session")
	}
	if got := h.MustShowLink(t, l.ID).Remaining; got != 0 {
		t.Fatalf("remaining = %d after the third whole GET, want 0 (a second claim)", got)
	}
}
