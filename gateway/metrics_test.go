package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/dlgate/dlgate/storage"
)

func TestMetricsAndLogsCountEverythingAndLeakNoToken(t *testing.T) {
	h := MustHarness(t)
	data := testData(20_000)
	stream := h.MustObjectLink(t, "m/stream.bin", data, map[string]any{"downloads": 1})
	session := h.MustObjectLink(t, "m/session.bin", data, map[string]any{"delivery": "session", "downloads": 2})
	broken := h.MustObjectLink(t, "m/broken.bin", data, nil)

	// A full flow: a stream, its refusal, a redirect to a session, ranges,
	// a keyed mint and its replay, a Range refused on the link, a storage
	// failure with its refund, revocation.
	h.Do(t, http.MethodGet, stream.URL, nil)
	h.Do(t, http.MethodGet, stream.URL, nil)
	h.Do(t, http.MethodHead, stream.URL, nil)
	h.Do(t, http.MethodGet, stream.URL, http.Header{"Range": {"bytes=0-1"}})
	resp, _ := h.Do(t, http.MethodGet, session.URL, nil)
	sessionURL := resp.Header.Get("Location")
	h.Do(t, http.MethodGet, sessionURL, http.Header{"Range": {"bytes=0-99,200-299"}})
	h.Do(t, http.MethodGet, sessionURL, http.Header{"Range": {"bytes=999999-"}})
	h.Do(t, http.MethodHead, sessionURL, nil)
	_, body := h.Do(t, http.MethodPost, session.URL+"/sessions", http.Header{"Idempotency-Key": {"k1"}})
	keyed := mustJSON[sessionJSON](t, body)
	h.Do(t, http.MethodPost, session.URL+"/sessions", http.Header{"Idempotency-Key": {"k1"}})
	h.Do(t, http.MethodGet, keyed.SessionURL, nil)
	h.Store.OpenFunc = func(context.Context, storage.Version, int64, int64) (io.ReadCloser, error) {
		return nil, fmt.Errorf("down: %w", storage.ErrUnavailable)
	}
	h.Do(t, http.MethodGet, broken.URL, nil)
	h.Store.OpenFunc = nil
	h.AdminDo(t, http.MethodPost, "/v1/links/"+session.ID+"/revoke", nil, nil)
	h.Do(t, http.MethodGet, sessionURL, nil)
	h.Do(t, http.MethodGet, session.URL, nil)
	h.WaitIdle()

	resp, body = mustDo(t, http.DefaultClient, mustRequest(t, http.MethodGet, h.Admin.URL+"/metrics"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics = %d", resp.StatusCode)
	}
	metrics := string(body)
	for _, want := range []string{
		`gateway_claims_total{kind="stream",result="granted"} 2`,
		`gateway_claims_total{kind="stream",result="exhausted"} 1`,
		`gateway_claims_total{kind="session",result="granted"} 2`,
		`gateway_claims_total{kind="session",result="revoked"} 1`,
		`gateway_refunds_total{cause="storage_error"} 1`,
		`gateway_sessions_minted_total{outcome="created"} 2`,
		`gateway_sessions_minted_total{outcome="replayed"} 1`,
		`gateway_http_requests_total{method="GET",route="link",status="409"} 1`,
		`gateway_http_requests_total{method="GET",route="link",status="502"} 1`,
		`gateway_http_requests_total{method="GET",route="session",status="206"} 1`,
		`gateway_http_requests_total{method="HEAD",route="session",status="200"} 1`,
		`gateway_streams_in_flight 0`,
		`gateway_http_request_duration_seconds_bucket{route="session",le="+Inf"}`,
		`gateway_budget_draws_total`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	logs := h.Logs.String()
	secrets := map[string]string{
		"stream link token":   stream.Token,
		"session link token":  session.Token,
		"broken link token":   broken.Token,
		"session token":       strings.Split(strings.TrimPrefix(sessionURL, h.Server.PublicURL+"/s/"), "/")[0],
		"keyed session token": strings.TrimPrefix(keyed.SessionURL, h.Server.PublicURL+"/s/"),
	}
	for what, tok := range secrets {
		if !isToken(tok) {
			t.Fatalf("%s %q is not a token: the leak check would prove nothing", what, tok)
		}
		if strings.Contains(metrics, tok) {
			t.Errorf("/metrics contains the %s", what)
		}
		if strings.Contains(logs, tok) {
			t.Errorf("the logs contain the %s", what)
		}
	}
	// The logs name rows by id instead, with the precise refusal reasons.
	for _, want := range []string{stream.ID, session.ID, broken.ID, keyed.SessionID, `"reason":"exhausted"`, `"reason":"revoked"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the logs lack %s", want)
		}
	}
}
