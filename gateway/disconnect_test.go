package gateway_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/dlgate/dlgate/storage"
)

// A client that hangs up between the claim and the first byte is refunded
// (SPEC §1) and logged as a client disconnect, not a server error.
func TestAClientLeavingBeforeTheFirstByteIsRefundedAsADisconnect(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "left.bin", testData(4096), map[string]any{"downloads": 2})
	opening := make(chan struct{})
	h.Store.OpenFunc = func(ctx context.Context, v storage.Version, off, n int64) (io.ReadCloser, error) {
		close(opening)
		<-ctx.Done() // the store is slow; the client gives up first
		return nil, ctx.Err()
	}
	u, _ := url.Parse(l.URL)
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(conn, "GET "+u.RequestURI()+" HTTP/1.1\r\nHost: "+u.Host+"\r\n\r\n")
	<-opening // claimed, now opening the object
	conn.Close()
	h.WaitIdle()

	if got := h.MustShowLink(t, l.ID); got.Remaining != 2 || got.Grants["refunded"] != 1 {
		t.Fatalf("after the disconnect: remaining %d, grants %v; want 2 and one refunded", got.Remaining, got.Grants)
	}
	if recs := h.Logs.Records(t, "client left before the first byte; claim refunded"); len(recs) != 1 || recs[0]["level"] != "INFO" {
		t.Errorf("disconnect records %v, want one at INFO", recs)
	}
	for _, line := range strings.Split(h.Logs.String(), "\n") {
		if strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, `"status":500`) {
			t.Errorf("a client disconnect logged as a server error: %s", line)
		}
	}
	_, body := mustDo(t, http.DefaultClient, mustRequest(t, http.MethodGet, h.Admin.URL+"/metrics"))
	for _, want := range []string{`gateway_refunds_total{cause="client_disconnect"} 1`, `gateway_http_requests_total{method="GET",route="link",status="499"} 1`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
