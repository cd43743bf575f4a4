package gateway_test

import (
	"net/http"
	"strings"
	"testing"
)

func TestProfilesAreOnTheAdminListenerBehindTheToken(t *testing.T) {
	h := MustHarness(t)
	resp, _ := mustDo(t, http.DefaultClient, mustRequest(t, http.MethodGet, h.Admin.URL+"/debug/pprof/"))
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("pprof without the token = %d, want 401", resp.StatusCode)
	}
	for _, p := range []string{"/debug/pprof/", "/debug/pprof/heap?debug=1", "/debug/pprof/goroutine?debug=1", "/debug/pprof/cmdline"} {
		resp, body := h.AdminDo(t, http.MethodGet, p, nil, nil)
		if resp.StatusCode != http.StatusOK || len(body) == 0 {
			t.Errorf("GET %s with the token = %d (%d bytes), want 200", p, resp.StatusCode, len(body))
		}
		if p == "/debug/pprof/heap?debug=1" && !strings.Contains(string(body), "heap profile") {
			t.Errorf("heap profile body %.100q", body)
		}
	}
	resp, _ = h.Do(t, http.MethodGet, h.Public.URL+"/debug/pprof/", nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("pprof on the public listener = %d, want 404", resp.StatusCode)
	}
}
