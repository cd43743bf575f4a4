package gateway_test

import (
	"strings"
	"testing"

	"github.com/dlgate/dlgate/gateway/httpx"
)

var dispositionTests = []struct {
	in, want string
}{
	{"report.pdf", `attachment; filename="report.pdf"`},
	{"a;b=c.txt", `attachment; filename="a;b=c.txt"`},
	{`say "hi".txt`, `attachment; filename="say _hi_.txt"; filename*=UTF-8''say%20%22hi%22.txt`},
	{"100%.txt", `attachment; filename="100_.txt"; filename*=UTF-8''100%25.txt`},
	{"résumé 📄.pdf", `attachment; filename="r_sum_ _.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%F0%9F%93%84.pdf`},
	{"a.txt\r\nSet-Cookie: x=1", `attachment; filename="a.txtSet-Cookie: x=1"`},
	{"a\x00b\x7fc", `attachment; filename="abc"`},
	{`C:\Users\me\evil.exe`, `attachment; filename="evil.exe"`},
	{"../../etc/passwd", `attachment; filename="passwd"`},
	{"dir/", `attachment; filename="dir"`},
	{"", `attachment; filename="download"`},
	{"..", `attachment; filename="download"`},
	{"   ", `attachment; filename="download"`},
	{"abc\u202Etxt.exe", `attachment; filename="abctxt.exe"`},
	{"a\xffb", `attachment; filename="a_b"`},
	{"it's*(1).txt", `attachment; filename="it's*(1).txt"`},
	{"日本語", `attachment; filename="___"; filename*=UTF-8''%E6%97%A5%E6%9C%AC%E8%AA%9E`},
	{strings.Repeat("a", 300), `attachment; filename="` + strings.Repeat("a", 255) + `"`},
	// 255 bytes cut at a rune boundary: 127 two-byte runes.
	{strings.Repeat("é", 200), `attachment; filename="` + strings.Repeat("_", 127) + `"; filename*=UTF-8''` + strings.Repeat("%C3%A9", 127)},
}

func TestContentDisposition(t *testing.T) {
	for _, tt := range dispositionTests {
		if got := httpx.ContentDisposition(tt.in); got != tt.want {
			t.Errorf("ContentDisposition(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestContentDispositionIsAlwaysSafe(t *testing.T) {
	for _, tt := range dispositionTests {
		mustSavedName(t, httpx.ContentDisposition(tt.in))
	}
}

func FuzzContentDisposition(f *testing.F) {
	for _, tt := range dispositionTests {
		f.Add(tt.in)
	}
	f.Fuzz(func(t *testing.T, name string) {
		mustSavedName(t, httpx.ContentDisposition(name))
	})
}
