package gateway_test

import (
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/dlgate/dlgate/config"
)

// grantJSON is a grant as GET /v1/links/{id}/grants shows it.
type grantJSON struct {
	ID       string `json:"id"`
	Kind     string `json:"kind"`
	Status   string `json:"status"`
	Delivery struct {
		Status        string  `json:"status"`
		BytesAcked    int64   `json:"bytes_acked"`
		Coverage      float64 `json:"coverage"`
		Attempts      int     `json:"attempts"`
		DeliveredAt   *string `json:"delivered_at"`
		InterruptedAt *string `json:"interrupted_at"`
		Measured      bool    `json:"measured"`
	} `json:"delivery"`
}

// MustGrants lists a link's grants through the admin API, newest first;
// query is appended to the path ("" or "?delivery=…").
func (h *Harness) MustGrants(tb testing.TB, linkID, query string) []grantJSON {
	tb.Helper()
	resp, body := h.AdminDo(tb, http.MethodGet, "/v1/links/"+linkID+"/grants"+query, nil, nil)
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("GET grants%s = %d %s", query, resp.StatusCode, body)
	}
	return mustJSON[struct {
		Grants []grantJSON `json:"grants"`
	}](tb, body).Grants
}

// mustOnlyGrant is the link's one grant.
func (h *Harness) mustOnlyGrant(tb testing.TB, linkID string) grantJSON {
	tb.Helper()
	gs := h.MustGrants(tb, linkID, "")
	if len(gs) != 1 {
		tb.Fatalf("the link has %d grants, want 1: %+v", len(gs), gs)
	}
	return gs[0]
}

func TestAWholeStreamDownloadIsRecordedCompleteOnce(t *testing.T) {
	h := MustHarness(t)
	data := testData(3 << 20)
	l := h.MustObjectLink(t, "whole.bin", data, map[string]any{"downloads": 2})
	on, wait := connAware(t, h)

	resp, body := h.Do(t, http.MethodGet, on(l.URL), nil)
	if resp.StatusCode != http.StatusOK || len(body) != len(data) {
		t.Fatalf("GET = %d with %d bytes, want 200 and %d", resp.StatusCode, len(body), len(data))
	}
	wait()
	g := h.mustOnlyGrant(t, l.ID)
	d := g.Delivery
	if d.Status != "complete" || d.BytesAcked != int64(len(data)) || d.Coverage != 1 || d.Attempts != 1 || !d.Measured ||
		d.DeliveredAt == nil || d.InterruptedAt != nil {
		t.Errorf("delivery = %+v, want complete, every byte acknowledged and measured, one attempt, delivered_at set", d)
	}
	if n := h.Ledger.Calls("GrantDeliveryRecord"); n != 1 {
		t.Errorf("%d delivery records for one response, want 1", n)
	}
	st := h.MustShowLink(t, l.ID)
	if st.Deliveries["complete"] != 1 || st.Deliveries["partial"] != 0 || st.Deliveries["none"] != 0 {
		t.Errorf("the link's deliveries = %v, want 1 complete", st.Deliveries)
	}
	if gs := h.MustGrants(t, l.ID, "?delivery=partial"); len(gs) != 0 {
		t.Errorf("?delivery=partial listed %d grants of a link whose one grant is complete", len(gs))
	}
	if gs := h.MustGrants(t, l.ID, "?delivery=complete"); len(gs) != 1 {
		t.Errorf("?delivery=complete listed %d grants, want 1", len(gs))
	}
	line := lastAccessLine(t, h, "link", http.MethodGet, http.StatusOK)
	if line["delivery"] != "complete" || line["bytes_acked"] != float64(len(data)) || line["measured"] != nil {
		t.Errorf("access line = %v, want delivery=complete bytes_acked=%d (measured)", line, len(data))
	}
}

// lastAccessLine is the last access line of a request on route with
// method that was answered status.
func lastAccessLine(tb testing.TB, h *Harness, route, method string, status int) map[string]any {
	tb.Helper()
	var found map[string]any
	for _, rec := range h.Logs.Records(tb, "http") {
		if rec["route"] == route && rec["method"] == method && rec["status"] == float64(status) {
			found = rec
		}
	}
	if found == nil {
		tb.Fatalf("no access line of a %s answered %d", method, status)
	}
	return found
}

func TestWithoutTheSocketsCountersADownloadIsWhatWasWrittenAndSaysSo(t *testing.T) {
	// The harness's own listener gives the gateway no connection
	// (ConnContext unset), as a platform without the counters would.
	h := MustHarness(t)
	data := testData(100_000)
	l := h.MustObjectLink(t, "unmeasured.bin", data, nil)
	if resp, _ := h.Do(t, http.MethodGet, l.URL, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET = %d", resp.StatusCode)
	}
	h.WaitIdle()
	d := h.mustOnlyGrant(t, l.ID).Delivery
	if d.Status != "complete" || d.BytesAcked != int64(len(data)) || d.Measured {
		t.Errorf("delivery = %+v, want complete by what was written, not measured", d)
	}
	line := lastAccessLine(t, h, "link", http.MethodGet, http.StatusOK)
	if line["delivery"] != "complete" || line["measured"] != false {
		t.Errorf("access line = %v, want delivery=complete measured=false", line)
	}
}

func TestACutStreamIsPartialWithWhatTheClientAcknowledged(t *testing.T) {
	h := MustHarness(t)
	data := testData(8 << 20)
	l := h.MustObjectLink(t, "cut.bin", data, map[string]any{"downloads": 1})
	on, wait := connAware(t, h)

	conn, received := stalledGet(t, on(l.URL), 100_000)
	rcvbuf := mustReceiveBuffer(t, conn)
	conn.SetLinger(0) //nolint:errcheck // a reset, as the kernel sends for a killed client with unread bytes
	conn.Close()
	wait()
	g := h.mustOnlyGrant(t, l.ID)
	d := g.Delivery
	t.Logf("the client read %d bytes of the body and reset with a %d-byte receive buffer; bytes_acked %d", received, rcvbuf, d.BytesAcked)
	if d.Status != "partial" || !d.Measured || d.InterruptedAt == nil || d.DeliveredAt != nil || d.Attempts != 1 {
		t.Errorf("delivery = %+v, want partial, measured, interrupted", d)
	}
	// Its kernel acknowledged what the client read and at most what its
	// receive buffer held besides.
	if d.BytesAcked < int64(received) || d.BytesAcked > int64(received)+rcvbuf {
		t.Errorf("bytes_acked = %d, want between the %d bytes the client read and that plus its %d-byte receive buffer", d.BytesAcked, received, rcvbuf)
	}
	if g.Status != "granted" {
		t.Errorf("grant status = %q, want granted: the claim stands", g.Status)
	}
	line := lastAccessLine(t, h, "link", http.MethodGet, http.StatusOK)
	if line["delivery"] != "partial" || line["bytes_acked"] != float64(d.BytesAcked) {
		t.Errorf("access line = %v, want delivery=partial bytes_acked=%d", line, d.BytesAcked)
	}
}

// mustReceiveBuffer is c's SO_RCVBUF: the most its kernel may hold
// acknowledged and unread.
func mustReceiveBuffer(tb testing.TB, c interface {
	SyscallConn() (syscall.RawConn, error)
}) int64 {
	tb.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		tb.Fatal(err)
	}
	var (
		n    int
		serr error
	)
	if err := rc.Control(func(fd uintptr) { n, serr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF) }); err != nil {
		tb.Fatal(err)
	}
	if serr != nil {
		tb.Fatal(serr)
	}
	return int64(n)
}

func TestASessionsGrantCoversTheRangesItsClientsAcknowledged(t *testing.T) {
	h := MustHarness(t)
	const size = 1 << 20
	data := testData(size)
	l := h.MustObjectLink(t, "covered.bin", data, map[string]any{"delivery": "session"})
	x := h.MustMint(t, l)
	on, wait := connAware(t, h)
	get := func(ranges string) {
		t.Helper()
		resp, body := h.Do(t, http.MethodGet, on(x.SessionURL), http.Header{"Range": {"bytes=" + ranges}})
		if resp.StatusCode != http.StatusPartialContent || len(body) == 0 {
			t.Fatalf("GET bytes=%s = %d", ranges, resp.StatusCode)
		}
	}
	// A quarter, then two eighths in one multipart answer (its framing
	// is not the object's).
	get("0-262143")
	get("262144-393215,524288-655359")
	wait()
	h.Server.Flush() // as the idle second does: the process reports what it gathered
	d := h.mustOnlyGrant(t, l.ID).Delivery
	if d.Status != "partial" || d.BytesAcked != size/2 || d.Coverage != 0.5 || !d.Measured || d.DeliveredAt != nil {
		t.Errorf("after half the file in three ranges: delivery %+v, want partial, %d bytes, coverage 0.5, measured", d, size/2)
	}
	// The rest, one range closed and one open-ended.
	get("393216-524287")
	get("655360-")
	wait()
	h.Server.Flush()
	d = h.mustOnlyGrant(t, l.ID).Delivery
	if d.Status != "complete" || d.BytesAcked != size || d.Coverage != 1 || !d.Measured || d.DeliveredAt == nil || d.Attempts != 1 {
		t.Errorf("after every byte: delivery %+v, want complete, measured, delivered_at set", d)
	}
	if st := h.MustShowLink(t, l.ID); st.Deliveries["complete"] != 1 {
		t.Errorf("the link's deliveries = %v, want 1 complete", st.Deliveries)
	}
	line := lastAccessLine(t, h, "session", http.MethodGet, http.StatusPartialContent)
	if line["delivery"] != "complete" || line["bytes_acked"] != float64(size-655360) {
		t.Errorf("the last range's access line = %v, want delivery=complete bytes_acked=%d (that response's)", line, size-655360)
	}
}

func TestASessionsRangesAreReportedWithItsBudgetReturnsNotOnePerRange(t *testing.T) {
	h := MustHarness(t)
	const size, part, n = 8 << 20, 64 << 10, 100
	data := testData(size)
	l := h.MustObjectLink(t, "reported.bin", data, map[string]any{"delivery": "session"})
	x := h.MustMint(t, l)
	start := time.Now()
	for i := range n {
		off := i * part
		if resp, _ := h.Do(t, http.MethodGet, x.SessionURL, http.Header{"Range": {fmt.Sprintf("bytes=%d-%d", off, off+part-1)}}); resp.StatusCode != http.StatusPartialContent {
			t.Fatalf("range %d = %d", i, resp.StatusCode)
		}
	}
	h.WaitIdle()
	took := time.Since(start)
	reports := h.Ledger.Calls("SessionDeliveryRecord")
	// At most one report a second while requests run, the first at once;
	// the rest waits for the idle second.
	if most := 1 + int(took/config.DefaultReportEvery); reports > most {
		t.Errorf("%d ranges in %v made %d delivery reports, want at most %d: one a second", n, took, reports, most)
	}
	h.Server.Flush()
	d := h.mustOnlyGrant(t, l.ID).Delivery
	if d.BytesAcked != n*part || d.Status != "partial" {
		t.Errorf("delivery = %+v after %d ranges from byte 0, want %d bytes, partial", d, n, n*part)
	}
	t.Logf("%d back-to-back 64 KiB ranges in %v: %d delivery reports before the flush", n, took.Round(time.Millisecond), reports)
}
