package gateway_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/dlgate/dlgate/gateway"
)

// skewedHarness is a gateway whose own clock is off the database's by d
// (the harness's Clock is the database's).
func skewedHarness(t *testing.T, d time.Duration) *Harness {
	return MustHarness(t, func(o *gateway.Options) {
		db := o.Now
		o.Now = func() time.Time { return db().Add(d) }
	})
}

// Checks made on a row judge time by the database's clock, like the
// statements that decide: a gateway whose clock is off agrees with the
// database on what is alive.
func TestAGatewayWithASkewedClockJudgesLinksByTheDatabasesClock(t *testing.T) {
	h := skewedHarness(t, -2*time.Hour)
	// The admin API took "in an hour" by the gateway's clock: by the
	// database's, the link expired an hour ago.
	l := h.MustObjectLink(t, "skew.bin", testData(100), map[string]any{"expires_in": 3600})
	if resp, _ := h.Do(t, http.MethodHead, l.URL, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("HEAD = %d, want 404: the link expired by the database's clock", resp.StatusCode)
	}
}

func TestAGatewayWithASkewedClockJudgesSessionsByTheDatabasesClock(t *testing.T) {
	h := skewedHarness(t, 2*time.Hour)
	data := testData(2000)
	l := h.MustObjectLink(t, "skew.bin", data, map[string]any{"expires_in": 10 * 3600})
	x := h.MustMint(t, l)
	if got, want := x.ExpiresAt, h.Clock.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano); got != want {
		t.Errorf("session expires_at %s, want the database's now + 1 h = %s", got, want)
	}
	// By the gateway's clock that expiry passed an hour ago.
	resp, body := h.Do(t, http.MethodGet, x.SessionURL, http.Header{"Range": {"bytes=0-9"}})
	if resp.StatusCode != http.StatusPartialContent || string(body) != string(data[:10]) {
		t.Fatalf("range = %d, want 206: the session is live by the database's clock", resp.StatusCode)
	}
}
