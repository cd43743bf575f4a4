package tlsserve

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestRedirect(t *testing.T) {
	h := Redirect("https://dl.example.com/", nil)
	for _, tc := range []struct {
		method, target, host, want string
	}{
		{"GET", "/d/TOKEN", "dl.example.com", "https://dl.example.com/d/TOKEN"},
		{"POST", "/d/TOKEN/sessions?x=1", "dl.example.com", "https://dl.example.com/d/TOKEN/sessions?x=1"},
		{"HEAD", "/s/TOKEN", "evil.example", "https://dl.example.com/s/TOKEN"},
		{"OPTIONS", "*", "dl.example.com", "https://dl.example.com/"},
		{"GET", "http://other.example/d/T", "other.example", "https://dl.example.com/d/T"},
	} {
		req := httptest.NewRequest(tc.method, tc.target, nil)
		req.Host = tc.host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusPermanentRedirect || rec.Header().Get("Location") != tc.want {
			t.Errorf("%s %s (Host %s) = %d to %q, want 308 to %q", tc.method, tc.target, tc.host, rec.Code, rec.Header().Get("Location"), tc.want)
		}
		if rec.Header().Get("Strict-Transport-Security") != "" {
			t.Errorf("%s %s: Strict-Transport-Security over plain HTTP (RFC 6797 §7.2)", tc.method, tc.target)
		}
	}
	req := httptest.NewRequest("POST", "/d/T", strings.NewReader("body"))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Header().Get("Connection") != "close" {
		t.Errorf("a request with an unread body: Connection %q, want close", rec.Header().Get("Connection"))
	}
}
