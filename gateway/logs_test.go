package gateway_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestEveryRecordOfARequestCarriesItsRequestID(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "log.bin", testData(1000), map[string]any{"downloads": 1})
	resp, _ := h.Do(t, http.MethodGet, l.URL, http.Header{"User-Agent": {"curl/7.88.1"}})
	id := resp.Header.Get("X-Request-Id")
	h.WaitIdle()
	streamed := h.Logs.Records(t, "streamed")
	if len(streamed) != 1 || streamed[0]["request_id"] != id || streamed[0]["route"] != "link" {
		t.Fatalf("streamed records %v, want one with request_id %s and route link", streamed, id)
	}
	var access map[string]any
	for _, rec := range h.Logs.Records(t, "http") {
		if rec["request_id"] == id {
			access = rec
		}
	}
	if access == nil || access["level"] != "INFO" || access["client"] != "127.0.0.1" || access["user_agent"] != "curl/7.88.1" || access["status"] != float64(200) {
		t.Fatalf("access line %v, want INFO with client 127.0.0.1 and the user agent", access)
	}
	// Refusals are at info too, so "who tried this link" has an answer.
	resp, _ = h.Do(t, http.MethodGet, l.URL, nil)
	id = resp.Header.Get("X-Request-Id")
	h.WaitIdle()
	for _, rec := range h.Logs.Records(t, "http") {
		if rec["request_id"] == id && (rec["level"] != "INFO" || rec["status"] != float64(404)) {
			t.Fatalf("access line of a refusal %v, want INFO 404", rec)
		}
	}
}

func TestMetricLabelsStayBounded(t *testing.T) {
	h := MustHarness(t)
	for _, m := range []string{"BREW", "PROPFIND", "X-" + strings.Repeat("A", 40)} {
		req, _ := http.NewRequest(m, h.Public.URL+"/d/x", nil)
		mustDo(t, h.Client, req)
	}
	h.WaitIdle()
	_, body := mustDo(t, http.DefaultClient, mustRequest(t, http.MethodGet, h.Admin.URL+"/metrics"))
	m := string(body)
	if strings.Contains(m, "BREW") || strings.Contains(m, "PROPFIND") || !strings.Contains(m, `method="other"`) {
		t.Errorf("unknown methods are not folded into method=\"other\"")
	}
	if !strings.Contains(m, "gateway_build_info{") {
		t.Errorf("/metrics lacks gateway_build_info")
	}
}
