package e2e

import (
	"net/http"
	"testing"

	"github.com/dlgate/dlgate/internal/testenv"
)

func TestStorageOutageRefundsTheClaim(t *testing.T) {
	t.Parallel()
	s3 := testenv.StartS3(t)
	c := MustStartCluster(t, ClusterOptions{Processes: 1, S3: s3})
	admin := c.Admin()
	obj := admin.MustUpload(t, "outage/file.bin", 256<<10)
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 2})

	s3.Stop()
	r := MustFetch(t, http.MethodGet, link.URL)
	switch r.Status {
	case http.StatusBadGateway:
		checkProblem(t, r, http.StatusBadGateway, "storage-unavailable")
	case http.StatusGatewayTimeout:
		checkProblem(t, r, http.StatusGatewayTimeout, "storage-timeout")
	default:
		t.Fatalf("%v with the S3 server stopped, want 502 or 504; body %.300q", r, r.Body)
	}
	t.Logf("with the S3 server stopped: %v (%s)", r, r.Header.Get("Content-Type"))
	// The claim was refunded: the allowance is intact, the grant marked.
	admin.checkCounts(t, link.ID, 2, 0, 1)

	s3.Restart(t)
	checkBody(t, MustFetch(t, http.MethodGet, link.URL), obj)
	admin.checkCounts(t, link.ID, 1, 1, 1)
	checkNoTokenInLogs(t, c.Gateways...)
}
