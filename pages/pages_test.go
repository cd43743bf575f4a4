package pages

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

var now = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func render(tb testing.TB, method string, f func(http.ResponseWriter, *http.Request)) *httptest.ResponseRecorder {
	tb.Helper()
	w := httptest.NewRecorder()
	f(w, httptest.NewRequest(method, "/d/x", nil))
	if got := w.Header().Get("Content-Security-Policy"); got != CSP {
		tb.Errorf("Content-Security-Policy = %q, want %q", got, CSP)
	}
	if got := w.Header().Get("Content-Type"); got != "text/html; charset=utf-8" {
		tb.Errorf("Content-Type = %q", got)
	}
	return w
}

func TestEveryValueIsEscaped(t *testing.T) {
	const evil = `<script>alert(1)</script>"'.pdf`
	file := File{Name: evil, Size: 1, ExpiresAt: now.Add(time.Hour), Now: now}
	pages := map[string]func(http.ResponseWriter, *http.Request){
		"landing": func(w http.ResponseWriter, r *http.Request) { WriteLanding(w, r, Landing{file}) },
		"preview": func(w http.ResponseWriter, r *http.Request) { WritePreview(w, r, Preview{File: file, Details: true}) },
		"error": func(w http.ResponseWriter, r *http.Request) {
			WriteError(w, r, Error{Status: 404, Title: evil, Message: evil, Type: evil, RequestID: evil})
		},
	}
	for name, f := range pages {
		body := render(t, http.MethodGet, f).Body.String()
		if strings.Contains(body, "<script") || strings.Contains(body, `"'.pdf`) {
			t.Errorf("%s page shows a value unescaped:\n%s", name, body)
		}
		if !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
			t.Errorf("%s page lost the escaped name:\n%s", name, body)
		}
	}
}

func TestPagesNeedNothingFromOutside(t *testing.T) {
	w := render(t, http.MethodGet, func(w http.ResponseWriter, r *http.Request) {
		WriteLanding(w, r, Landing{File{Name: "a.pdf", Size: 3 << 20, ExpiresAt: now.Add(70 * time.Minute), Now: now}})
	})
	body := w.Body.String()
	for _, bad := range []string{"<script", "src=", "href=", "@import", "url("} {
		if strings.Contains(body, bad) {
			t.Errorf("landing page contains %q: it must be self-contained", bad)
		}
	}
	for _, want := range []string{"a.pdf", "3.0 MiB", "in 1 hour", "1 Dec 2026 11:10 UTC", `<form method="post">`, `name="viewport"`} {
		if !strings.Contains(body, want) {
			t.Errorf("landing page lacks %q:\n%s", want, body)
		}
	}
}

func TestPreviewWithoutDetailsNamesNothing(t *testing.T) {
	w := render(t, http.MethodGet, func(w http.ResponseWriter, r *http.Request) {
		WritePreview(w, r, Preview{File: File{Name: "secret-plans.pdf", Size: 12345}})
	})
	if body := w.Body.String(); strings.Contains(body, "secret-plans") || strings.Contains(body, "12.1 KiB") {
		t.Errorf("preview without details shows the file:\n%s", body)
	}
	w = render(t, http.MethodGet, func(w http.ResponseWriter, r *http.Request) {
		WritePreview(w, r, Preview{File: File{Name: "plans.pdf", Size: 12345}, Details: true, FormMethod: "post"})
	})
	for _, want := range []string{`<meta property="og:title" content="plans.pdf">`, `content="12.1 KiB · download link"`, `<form method="post">`} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("preview lacks %q:\n%s", want, w.Body.String())
		}
	}
}

func TestHeadGetsHeadersOnly(t *testing.T) {
	get := render(t, http.MethodGet, func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, r, Error{Status: 404, Title: "Gone", Message: "m", Type: "t"})
	})
	head := render(t, http.MethodHead, func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, r, Error{Status: 404, Title: "Gone", Message: "m", Type: "t"})
	})
	if head.Code != 404 || head.Body.Len() != 0 {
		t.Errorf("HEAD: status %d, %d body bytes; want 404 and none", head.Code, head.Body.Len())
	}
	if head.Header().Get("Content-Length") != get.Header().Get("Content-Length") || get.Header().Get("Content-Length") == "" {
		t.Errorf("Content-Length HEAD %q, GET %q", head.Header().Get("Content-Length"), get.Header().Get("Content-Length"))
	}
}

func TestHumanSize(t *testing.T) {
	cases := []struct {
		in   int64
		want string
	}{
		{0, "0 bytes"}, {1, "1 byte"}, {1023, "1023 bytes"}, {1024, "1.0 KiB"}, {1536, "1.5 KiB"},
		{40 << 20, "40.0 MiB"}, {5 << 30, "5.0 GiB"}, {3 << 40, "3.0 TiB"},
	}
	for _, c := range cases {
		if got := HumanSize(c.in); got != c.want {
			t.Errorf("HumanSize(%d) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestRelative(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want string
	}{
		{29 * time.Second, "now"}, {time.Minute, "in 1 minute"}, {59 * time.Minute, "in 59 minutes"},
		{59*time.Minute + 40*time.Second, "in 1 hour"}, {time.Hour, "in 1 hour"}, {47 * time.Hour, "in 47 hours"},
		{72 * time.Hour, "in 3 days"}, {72*time.Hour - time.Millisecond, "in 3 days"}, {90 * time.Minute, "in 2 hours"},
		{-2 * time.Hour, "2 hours ago"},
	}
	for _, c := range cases {
		if got := Relative(now, now.Add(c.d)); got != c.want {
			t.Errorf("Relative(now, now+%v) = %q, want %q", c.d, got, c.want)
		}
	}
}
