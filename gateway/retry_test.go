package gateway_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/storage"
)

// cutGet sends GET target with the extra header lines hdr on a fresh
// connection with a small receive buffer, reads the answer's header and
// want body bytes, waits for the gateway's writes to stall, then resets
// the connection, as the kernel does for a killed client with bytes
// unread. It returns the answer's header.
func cutGet(t *testing.T, target, hdr string, want int) http.Header {
	t.Helper()
	conn := dialGet(t, target, hdr)
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 4096), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET = %d, want 200", resp.StatusCode)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, want)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the server fills its send queue and stalls
	conn.SetLinger(0)                  //nolint:errcheck // a reset
	conn.Close()
	return resp.Header
}

// clientCookie is the dlgate_client cookie a response set, nil for none.
func clientCookie(h http.Header) *http.Cookie {
	for _, c := range (&http.Response{Header: h}).Cookies() {
		if c.Name == "dlgate_client" {
			return c
		}
	}
	return nil
}

func TestAnInterruptedDownloadIsServedAgainToItsClientUnderTheSameGrant(t *testing.T) {
	h := MustHarness(t)
	data := testData(8 << 20)
	l := h.MustObjectLink(t, "retried.bin", data, map[string]any{"downloads": 1, "retries": 1})
	if l.Retries != 1 {
		t.Fatalf("the link shows retries %d, want 1", l.Retries)
	}
	on, wait := connAware(t, h)
	const ua = "User-Agent: retrying-client/1.0\r\n"
	hdr := cutGet(t, on(l.URL), ua, 100_000)
	wait()
	// The 200 set the client's cookie, for the link's life and path.
	ck := clientCookie(hdr)
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteLaxMode || ck.Path != "/d/"+l.Token || ck.MaxAge <= 0 || ck.Secure {
		t.Errorf("Set-Cookie of the first 200: %+v, want dlgate_client, HttpOnly, SameSite=Lax, Path=/d/{token}, expiring with the link, not Secure over http", ck)
	}
	g := h.mustOnlyGrant(t, l.ID)
	if g.Delivery.Status != "partial" || g.Delivery.Attempts != 1 {
		t.Fatalf("after the cut: delivery %+v, want partial, attempt 1", g.Delivery)
	}
	claims := h.Ledger.Calls("LinkClaim")

	// The same client (address and User-Agent) again: the whole object,
	// nothing claimed.
	resp, body := h.Do(t, http.MethodGet, on(l.URL), http.Header{"User-Agent": {"retrying-client/1.0"}})
	if resp.StatusCode != http.StatusOK || string(body) != string(data) {
		t.Fatalf("the retry = %d with %d bytes, want 200 and the object", resp.StatusCode, len(body))
	}
	wait()
	if n := h.Ledger.Calls("LinkClaim") - claims; n != 0 {
		t.Errorf("the retry made %d claims, want none: the link's row came from the cache and the retry decided", n)
	}
	if n := h.Ledger.Calls("GrantRetryBegin"); n != 2 {
		t.Errorf("GrantRetryBegin called %d times, want 2: the first GET asked and found none, the second was served", n)
	}
	g = h.mustOnlyGrant(t, l.ID)
	if d := g.Delivery; d.Status != "complete" || d.Attempts != 2 || d.BytesAcked != int64(len(data)) || !d.Measured {
		t.Errorf("after the retry: delivery %+v, want complete, 2 attempts, every byte", d)
	}
	if st := h.MustShowLink(t, l.ID); st.Remaining != 0 || st.Grants["granted"] != 1 {
		t.Errorf("after the retry: remaining %d, grants %v; want 0 and the one grant", st.Remaining, st.Grants)
	}
	// Another client, and the same one a third time (its grant is
	// complete): each claims, and the link has nothing left.
	for _, agent := range []string{"someone-else/2.0", "retrying-client/1.0"} {
		resp, body := h.Do(t, http.MethodGet, on(l.URL), http.Header{"User-Agent": {agent}})
		mustProblem(t, resp, body, http.StatusNotFound, "link-unavailable")
	}
	if n := h.Ledger.Calls("LinkClaim") - claims; n != 2 {
		t.Errorf("%d claims for the two refused GETs, want 2", n)
	}
}

func TestTheCookieNamesTheClientOfARetryWhateverItsUserAgent(t *testing.T) {
	h := MustHarness(t)
	data := testData(8 << 20)
	l := h.MustObjectLink(t, "cookie.bin", data, map[string]any{"downloads": 1, "retries": 2})
	on, wait := connAware(t, h)
	ck := clientCookie(cutGet(t, on(l.URL), "User-Agent: browser/1\r\n", 50_000))
	wait()
	if ck == nil {
		t.Fatal("the first 200 set no dlgate_client cookie")
	}
	// The browser updated itself: another User-Agent, the same cookie.
	resp, body := h.Do(t, http.MethodGet, on(l.URL), http.Header{"User-Agent": {"browser/2"}, "Cookie": {"dlgate_client=" + ck.Value}})
	if resp.StatusCode != http.StatusOK || string(body) != string(data) {
		t.Fatalf("the retry with the cookie = %d with %d bytes, want 200 and the object", resp.StatusCode, len(body))
	}
	if resp.Header.Get("Set-Cookie") != "" {
		t.Errorf("a client that sent its cookie was given another: %q", resp.Header.Get("Set-Cookie"))
	}
	wait()
	if d := h.mustOnlyGrant(t, l.ID).Delivery; d.Attempts != 2 || d.Status != "complete" {
		t.Errorf("delivery %+v, want complete at attempt 2", d)
	}
}

// TestOfTwoConcurrentRetriesOfOneGrantOneIsServedTheOtherRefused holds
// the first retry of an interrupted download in flight (in the store's
// open) and sends the same client's second: on a link with downloads to
// spare, where a claim would show, it is refused 409 retry-in-progress
// (HTML for a browser), nothing claimed; the first is served whole.
func TestOfTwoConcurrentRetriesOfOneGrantOneIsServedTheOtherRefused(t *testing.T) {
	h := MustHarness(t)
	data := testData(4 << 20)
	l := h.MustObjectLink(t, "twice.bin", data, map[string]any{"downloads": 3, "retries": 3})
	on, wait := connAware(t, h)
	// The User-Agent of the harness's client: the same client retries.
	cutGet(t, on(l.URL), "User-Agent: Go-http-client/1.1\r\n", 50_000)
	wait()
	grant := h.mustOnlyGrant(t, l.ID).ID
	// The first retry is held in the store's open, in flight.
	opened, release := make(chan struct{}), make(chan struct{})
	real := h.Store.Store
	var opens atomic.Int32
	h.Store.OpenFunc = func(ctx context.Context, v storage.Version, off, n int64) (io.ReadCloser, error) {
		rc, err := real.Open(ctx, v, off, n)
		if err != nil || opens.Add(1) > 1 {
			return rc, err
		}
		return gatedReader(ctx, rc, opened, release), nil
	}
	first := h.Go(http.MethodGet, on(l.URL), nil)
	<-opened
	claims := h.claimCalls()
	resp, body := h.Do(t, http.MethodGet, on(l.URL), nil)
	p := mustProblem(t, resp, body, http.StatusConflict, "retry-in-progress")
	if ra, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || ra < 1 || ra > int(ledger.DefaultRetryLease/time.Second) {
		t.Errorf("Retry-After %q, want 1 to %v in seconds: the lease of the retry in flight", resp.Header.Get("Retry-After"), ledger.DefaultRetryLease)
	}
	if p.Detail == "" {
		t.Errorf("the refusal has no detail")
	}
	// A person's browser gets the page other refusals get.
	resp, body = h.Do(t, http.MethodGet, on(l.URL), http.Header{"Accept": {"text/html,application/xhtml+xml"}})
	if resp.StatusCode != http.StatusConflict || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(string(body), "already in progress") {
		t.Errorf("the browser's refusal = %d %q, want 409 and the HTML page", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if n := h.claimCalls() - claims; n != 0 {
		t.Errorf("the refused retries made %d claim calls, want none", n)
	}
	if st := h.MustShowLink(t, l.ID); st.Remaining != 2 || st.Grants["granted"] != 1 {
		t.Errorf("while the first retry streams: remaining %d, grants %v; want 2 and the one grant", st.Remaining, st.Grants)
	}
	close(release)
	if r := mustResult(t, first); r.resp.StatusCode != http.StatusOK || string(r.body) != string(data) {
		t.Fatalf("the first retry = %d with %d bytes, want 200 and the object", r.resp.StatusCode, len(r.body))
	}
	wait()
	if g := h.mustOnlyGrant(t, l.ID); g.ID != grant || g.Delivery.Attempts != 2 || g.Delivery.Status != "complete" {
		t.Errorf("grant %s delivery %+v, want grant %s complete at attempt 2: one retry served", g.ID, g.Delivery, grant)
	}
	if st := h.MustShowLink(t, l.ID); st.Remaining != 2 {
		t.Errorf("after the retry: remaining %d, want 2 (unchanged)", st.Remaining)
	}
}

// TestARangeOnAStreamLinkWithRetriesStays409 resumes a cut download as
// curl -C - and wget -c do, with a Range on the link URL: 409
// range-requires-session, nothing claimed and no attempt begun, so the
// plain GET that follows is still the client's retry.
func TestARangeOnAStreamLinkWithRetriesStays409(t *testing.T) {
	h := MustHarness(t)
	data := testData(4 << 20)
	l := h.MustObjectLink(t, "resumed.bin", data, map[string]any{"downloads": 2, "retries": 1})
	on, wait := connAware(t, h)
	ck := clientCookie(cutGet(t, on(l.URL), "User-Agent: curl/8.5.0\r\n", 60_000))
	wait()
	if ck == nil {
		t.Fatal("the first 200 set no dlgate_client cookie")
	}
	calls := h.Ledger.Calls("")
	for _, hdr := range []http.Header{
		{"User-Agent": {"curl/8.5.0"}, "Range": {"bytes=60000-"}},
		{"User-Agent": {"curl/8.5.0"}, "Range": {"bytes=60000-"}, "Cookie": {"dlgate_client=" + ck.Value}},
		{"User-Agent": {"Wget/1.21.3"}, "Range": {"bytes=0-"}},
	} {
		for _, method := range []string{http.MethodGet, http.MethodHead} {
			resp, body := h.Do(t, method, on(l.URL), hdr)
			if resp.StatusCode != http.StatusConflict || resp.Header.Get("Accept-Ranges") != "none" {
				t.Fatalf("%s with Range %q = %d, want 409 with Accept-Ranges: none", method, hdr.Get("Range"), resp.StatusCode)
			}
			if method == http.MethodGet {
				mustProblem(t, resp, body, http.StatusConflict, "range-requires-session")
			}
		}
	}
	if n := h.Ledger.Calls("") - calls; n != 0 {
		t.Errorf("the Range requests made %d ledger calls, want none", n)
	}
	g := h.mustOnlyGrant(t, l.ID)
	if g.Delivery.Attempts != 1 || g.Delivery.Status != "partial" {
		t.Fatalf("after the Range requests: delivery %+v, want partial at attempt 1", g.Delivery)
	}
	if st := h.MustShowLink(t, l.ID); st.Remaining != 1 {
		t.Fatalf("after the Range requests: remaining %d, want 1", st.Remaining)
	}
	// curl without -C: the whole object again, under the same grant.
	resp, body := h.Do(t, http.MethodGet, on(l.URL), http.Header{"User-Agent": {"curl/8.5.0"}})
	if resp.StatusCode != http.StatusOK || string(body) != string(data) {
		t.Fatalf("the retry = %d with %d bytes, want 200 and the object", resp.StatusCode, len(body))
	}
	wait()
	if g := h.mustOnlyGrant(t, l.ID); g.Delivery.Attempts != 2 || g.Delivery.Status != "complete" {
		t.Errorf("after the retry: delivery %+v, want complete at attempt 2", g.Delivery)
	}
	if st := h.MustShowLink(t, l.ID); st.Remaining != 1 {
		t.Errorf("after the retry: remaining %d, want 1 (unchanged)", st.Remaining)
	}
}

// pausedReader gives the first at bytes of rc, then waits for release
// before the rest.
func pausedReader(ctx context.Context, rc io.ReadCloser, at int64, paused chan<- struct{}, release <-chan struct{}) io.ReadCloser {
	var read int64
	var once atomic.Bool
	return &readerFunc{ReadFunc: func(p []byte) (int, error) {
		if read >= at && once.CompareAndSwap(false, true) {
			close(paused)
			select {
			case <-release:
			case <-ctx.Done():
				return 0, ctx.Err()
			}
		}
		if read < at {
			p = p[:min(int64(len(p)), at-read)]
		}
		k, err := rc.Read(p)
		read += int64(k)
		return k, err
	}, CloseFunc: rc.Close}
}

func TestARetryKeepsItsLeaseWhileItStreamsAndStopsWhenItIsLost(t *testing.T) {
	const lease = 300 * time.Millisecond
	h := MustHarness(t, func(o *gateway.Options) { o.RetryLease = lease })
	data := testData(4 << 20)
	l := h.MustObjectLink(t, "leased.bin", data, map[string]any{"downloads": 1, "retries": 3})
	on, wait := connAware(t, h)
	cutGet(t, on(l.URL), "User-Agent: Go-http-client/1.1\r\n", 50_000)
	wait()
	grant := h.mustOnlyGrant(t, l.ID).ID
	real := h.Store.Store
	pause := func() (paused chan struct{}, release chan struct{}) {
		paused, release = make(chan struct{}), make(chan struct{})
		h.Store.OpenFunc = func(ctx context.Context, v storage.Version, off, n int64) (io.ReadCloser, error) {
			rc, err := real.Open(ctx, v, off, n)
			if err != nil {
				return nil, err
			}
			return pausedReader(ctx, rc, 1<<20, paused, release), nil
		}
		return paused, release
	}

	// A retry that stalls in the middle for four leases keeps its lease.
	paused, release := pause()
	before := h.Ledger.Calls("GrantRetryRenew")
	held := h.Go(http.MethodGet, on(l.URL), nil)
	<-paused
	time.Sleep(4 * lease)
	renewals := h.Ledger.Calls("GrantRetryRenew") - before
	close(release)
	if r := mustResult(t, held); r.resp.StatusCode != http.StatusOK || string(r.body) != string(data) {
		t.Fatalf("the held retry = %d with %d bytes, want 200 and the object", r.resp.StatusCode, len(r.body))
	}
	if renewals < 4 {
		t.Errorf("%d lease renewals in four leases of a retry, want at least 4 (one every third of it)", renewals)
	}

	// One whose attempt another took meanwhile (its lease lapsed, and a
	// second retry began elsewhere) stops at the next renewal.
	if _, err := h.DB.SQL().ExecContext(context.Background(), `UPDATE grants SET delivery_status = 'partial', attempts_ended = attempts WHERE id = ?`, grant); err != nil {
		t.Fatal(err)
	}
	paused, release = pause()
	lost := h.Go(http.MethodGet, on(l.URL), nil)
	<-paused
	if _, err := h.DB.SQL().ExecContext(context.Background(), `UPDATE grants SET attempts = attempts + 1 WHERE id = ?`, grant); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * lease)
	close(release)
	r := <-lost
	if r.err == nil && len(r.body) >= len(data) {
		t.Errorf("a retry whose lease was lost sent the whole object")
	}
	wait()
	if !strings.Contains(h.Logs.String(), "lease was lost") {
		t.Errorf("no log line says the retry's lease was lost")
	}
}

// TestAnotherCookieHolderIsNotTheClientOfARetryByItsAddress: a grant cut
// for a client without the gateway's cookie records its new cookie and
// its address with User-Agent. Another browser from the same address with
// the same User-Agent but a cookie of its own is another client (SPEC §5:
// the cookie, else address and User-Agent): it claims a download of its
// own instead of taking the first one's retry, which stays the first
// one's.
func TestAnotherCookieHolderIsNotTheClientOfARetryByItsAddress(t *testing.T) {
	h := MustHarness(t)
	data := testData(4 << 20)
	l := h.MustObjectLink(t, "shared-nat.bin", data, map[string]any{"downloads": 3, "retries": 1})
	on, wait := connAware(t, h)
	const agent = "Mozilla/5.0 same-browser"
	ck := clientCookie(cutGet(t, on(l.URL), "User-Agent: "+agent+"\r\n", 50_000))
	wait()
	if ck == nil {
		t.Fatal("the first 200 set no dlgate_client cookie")
	}
	first := h.mustOnlyGrant(t, l.ID).ID
	other := strings.Repeat("B", 22) // a client id of the gateway's shape, another browser's
	resp, body := h.Do(t, http.MethodGet, on(l.URL), http.Header{"User-Agent": {agent}, "Cookie": {"dlgate_client=" + other}})
	if resp.StatusCode != http.StatusOK || string(body) != string(data) {
		t.Fatalf("the other browser's GET = %d with %d bytes, want 200 and the object", resp.StatusCode, len(body))
	}
	wait()
	if st := h.MustShowLink(t, l.ID); st.Remaining != 1 || st.Grants["granted"] != 2 {
		t.Fatalf("after the other browser's GET: remaining %d, grants %v; want 1 and two grants (a claim of its own)", st.Remaining, st.Grants)
	}
	for _, g := range h.MustGrants(t, l.ID, "") {
		if g.ID == first && (g.Delivery.Attempts != 1 || g.Delivery.Status != "partial") {
			t.Fatalf("the first browser's grant: delivery %+v, want partial at attempt 1: its retry is its own", g.Delivery)
		}
	}
	// The first browser, by its cookie, still has its retry.
	resp, body = h.Do(t, http.MethodGet, on(l.URL), http.Header{"User-Agent": {agent}, "Cookie": {"dlgate_client=" + ck.Value}})
	if resp.StatusCode != http.StatusOK || string(body) != string(data) {
		t.Fatalf("the first browser's retry = %d with %d bytes, want 200 and the object", resp.StatusCode, len(body))
	}
	wait()
	if st := h.MustShowLink(t, l.ID); st.Remaining != 1 {
		t.Errorf("after the first browser's retry: remaining %d, want 1 (unchanged)", st.Remaining)
	}
	for _, g := range h.MustGrants(t, l.ID, "") {
		if g.ID == first && (g.Delivery.Attempts != 2 || g.Delivery.Status != "complete") {
			t.Errorf("the first browser's grant: delivery %+v, want complete at attempt 2", g.Delivery)
		}
	}
}
