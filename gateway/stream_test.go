package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlgate/dlgate/storage"
)

func TestStreamDeliverySendsTheWholeObject(t *testing.T) {
	h := MustHarness(t)
	data := testData(300<<10 + 7)
	obj := h.MustPutObject(t, "big/archive.tar", "application/x-tar", data)
	l := h.MustCreateLink(t, map[string]any{"object": map[string]any{"key": "big/archive.tar"}, "downloads": 2, "expires_in": 600})

	resp, body := h.Do(t, http.MethodGet, l.URL, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET = %d %s, want 200", resp.StatusCode, body)
	}
	if !bytes.Equal(body, data) {
		t.Fatalf("body: %d bytes, differs from the %d uploaded", len(body), len(data))
	}
	want := map[string]string{
		"Content-Length":      strconv.Itoa(len(data)),
		"ETag":                obj.ETag,
		"Content-Type":        "application/x-tar",
		"Accept-Ranges":       "none",
		"Last-Modified":       h.Clock.Now().Format(http.TimeFormat),
		"Content-Disposition": `attachment; filename="archive.tar"`,
	}
	for k, v := range want {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	if obj.ETag == "" || !strings.HasPrefix(obj.ETag, `"`) {
		t.Errorf("stored ETag %q is not a strong quoted ETag", obj.ETag)
	}
	got := h.MustShowLink(t, l.ID)
	if got.Remaining != 1 || got.Grants["granted"] != 1 || got.Grants["refunded"] != 0 {
		t.Errorf("after one GET: remaining %d, grants %v; want 1 and one granted", got.Remaining, got.Grants)
	}
}

var (
	fallbackParam = regexp.MustCompile(`(?:^|; )filename="([^"\\]*)"`)
	starParam     = regexp.MustCompile(`(?i:; filename\*=UTF-8'')([A-Za-z0-9!#$&+\-.^_\x60|~%]*)(?:;|$)`)
)

func TestStreamDeliveryNamesTheFileSafely(t *testing.T) {
	h := MustHarness(t)
	h.MustPutObject(t, "dir/object.bin", "application/octet-stream", []byte("x"))
	cases := []struct {
		name     string
		filename string
		want     string // the name a client saves under
	}{
		{"Plain", "report.pdf", "report.pdf"},
		{"Quotes", `say "hi".txt`, `say "hi".txt`},
		{"Percent", "100%.txt", "100%.txt"},
		{"CRLFInjection", "a.txt\r\nSet-Cookie: x=1", "a.txtSet-Cookie: x=1"},
		{"Backslashes", `..\..\windows\evil.exe`, "evil.exe"},
		{"ParentDirectory", "../x", "x"},
		{"NonASCII", "résumé 📄.pdf", "résumé 📄.pdf"},
		{"EmptyUsesTheKey", "", "object.bin"},
		{"OnlyDots", "..", "download"},
		{"BidiOverride", "abc\u202Etxt.exe", "abctxt.exe"},
		{"VeryLong", strings.Repeat("a", 1000), strings.Repeat("a", 255)},
		{"VeryLongNonASCII", strings.Repeat("é", 500), strings.Repeat("é", 127)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			l := h.MustCreateLink(t, map[string]any{"object": map[string]any{"key": "dir/object.bin"}, "downloads": 1,
				"expires_in": 60, "filename": c.filename})
			resp, _ := h.Do(t, http.MethodGet, l.URL, nil)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET = %d, want 200", resp.StatusCode)
			}
			cd := resp.Header.Values("Content-Disposition")
			if len(cd) != 1 {
				t.Fatalf("Content-Disposition = %q, want one value", cd)
			}
			if got := mustSavedName(t, cd[0]); got != c.want {
				t.Errorf("saved name = %q, want %q (header %q)", got, c.want, cd[0])
			}
			if resp.Header.Get("Set-Cookie") != "" {
				t.Errorf("a filename injected a header: %v", resp.Header)
			}
		})
	}
}

// mustSavedName checks a Content-Disposition value the way a careful client
// reads it, and returns the name it would save under: filename* when
// present, else filename.
func mustSavedName(tb testing.TB, cd string) string {
	tb.Helper()
	if strings.ContainsAny(cd, "\r\n\x00") {
		tb.Fatalf("Content-Disposition %q contains CR, LF or NUL", cd)
	}
	disp, params, err := mime.ParseMediaType(cd)
	if err != nil || disp != "attachment" {
		tb.Fatalf("mime.ParseMediaType(%q) = %q, %v, %v; want attachment", cd, disp, params, err)
	}
	m := fallbackParam.FindStringSubmatch(cd)
	if m == nil {
		tb.Fatalf("Content-Disposition %q has no quoted filename= fallback", cd)
	}
	fallback := m[1]
	for _, r := range fallback {
		if r < 0x20 || r > 0x7e || r == '%' {
			tb.Errorf("fallback filename %q holds %q: want printable ASCII without %%", fallback, r)
		}
	}
	name := params["filename"] // ParseMediaType prefers the decoded filename*
	if m := starParam.FindStringSubmatch(cd); m != nil {
		// RFC 8187 §3.2: ext-value = charset "'" [ language ] "'" value-chars
		star, err := url.PathUnescape(m[1])
		if err != nil {
			tb.Errorf("filename* in %q is not an RFC 8187 UTF-8 ext-value: %v", cd, err)
		}
		if name != star {
			tb.Errorf("filename* in %q decodes to %q, but a MIME parser reads %q", cd, star, name)
		}
	} else {
		if strings.Contains(cd, "filename*") {
			tb.Errorf("filename* in %q is not an RFC 8187 UTF-8 ext-value", cd)
		}
		if name != fallback {
			tb.Errorf("filename = %q, fallback %q", name, fallback)
		}
	}
	if !utf8.ValidString(name) || name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\\\x00") {
		tb.Errorf("saved name %q is not a safe file name", name)
	}
	return name
}

// storageFailures are the ways a store can fail before the first body
// byte, with the answer each must give.
var storageFailures = []struct {
	name   string
	status int
	suffix string
	open   func(real storage.Store) func(context.Context, storage.Version, int64, int64) (io.ReadCloser, error)
}{
	{
		name: "OpenUnavailableIs502", status: http.StatusBadGateway, suffix: "storage-unavailable",
		open: func(storage.Store) func(context.Context, storage.Version, int64, int64) (io.ReadCloser, error) {
			return func(context.Context, storage.Version, int64, int64) (io.ReadCloser, error) {
				return nil, fmt.Errorf("connection refused: %w", storage.ErrUnavailable)
			}
		},
	},
	{
		name: "OpenTimeoutIs504", status: http.StatusGatewayTimeout, suffix: "storage-timeout",
		open: func(storage.Store) func(context.Context, storage.Version, int64, int64) (io.ReadCloser, error) {
			return func(context.Context, storage.Version, int64, int64) (io.ReadCloser, error) {
				return nil, fmt.Errorf("no answer: %w: %w", storage.ErrTimeout, context.DeadlineExceeded)
			}
		},
	},
	{
		name: "VanishedVersionIs502", status: http.StatusBadGateway, suffix: "storage-unavailable",
		open: func(storage.Store) func(context.Context, storage.Version, int64, int64) (io.ReadCloser, error) {
			return func(context.Context, storage.Version, int64, int64) (io.ReadCloser, error) {
				return nil, fmt.Errorf("gone: %w", storage.ErrNotFound)
			}
		},
	},
	{
		name: "FirstReadFailsIs502", status: http.StatusBadGateway, suffix: "storage-unavailable",
		open: func(storage.Store) func(context.Context, storage.Version, int64, int64) (io.ReadCloser, error) {
			return func(context.Context, storage.Version, int64, int64) (io.ReadCloser, error) {
				return &readerFunc{ReadFunc: func([]byte) (int, error) {
					return 0, fmt.Errorf("connection reset: %w", storage.ErrUnavailable)
				}}, nil
			}
		},
	},
	{
		name: "FirstReadTimesOutIs504", status: http.StatusGatewayTimeout, suffix: "storage-timeout",
		open: func(storage.Store) func(context.Context, storage.Version, int64, int64) (io.ReadCloser, error) {
			return func(context.Context, storage.Version, int64, int64) (io.ReadCloser, error) {
				return &readerFunc{ReadFunc: func([]byte) (int, error) {
					return 0, fmt.Errorf("read: %w", storage.ErrTimeout)
				}}, nil
			}
		},
	},
	{
		name: "EmptyBodyIs502", status: http.StatusBadGateway, suffix: "storage-unavailable",
		open: func(storage.Store) func(context.Context, storage.Version, int64, int64) (io.ReadCloser, error) {
			return func(context.Context, storage.Version, int64, int64) (io.ReadCloser, error) {
				return &readerFunc{ReadFunc: func([]byte) (int, error) { return 0, io.EOF }}, nil
			}
		},
	},
	{
		name: "ShortFirstReadIs502", status: http.StatusBadGateway, suffix: "storage-unavailable",
		open: func(real storage.Store) func(context.Context, storage.Version, int64, int64) (io.ReadCloser, error) {
			return func(ctx context.Context, v storage.Version, off, n int64) (io.ReadCloser, error) {
				rc, err := real.Open(ctx, v, off, n)
				if err != nil {
					return nil, err
				}
				left := 10
				return &readerFunc{ReadFunc: func(p []byte) (int, error) {
					if left == 0 {
						return 0, io.ErrUnexpectedEOF
					}
					k, err := rc.Read(p[:min(len(p), left)])
					left -= k
					return k, err
				}, CloseFunc: rc.Close}, nil
			}
		},
	},
}

func TestStorageFailureBeforeTheFirstByteRefundsTheClaim(t *testing.T) {
	for _, c := range storageFailures {
		t.Run(c.name, func(t *testing.T) {
			h := MustHarness(t)
			l := h.MustObjectLink(t, "f.bin", testData(1000), map[string]any{"downloads": 3})
			h.Store.OpenFunc = c.open(h.Store.Store)

			resp, body := h.Do(t, http.MethodGet, l.URL, nil)
			p := mustProblem(t, resp, body, c.status, c.suffix)
			if strings.Contains(string(body), "refused") || strings.Contains(string(body), "reset") || strings.Contains(p.Detail, "storage:") {
				t.Errorf("problem body leaks the error text: %s", body)
			}
			for _, k := range []string{"ETag", "Content-Disposition", "Last-Modified"} {
				if v := resp.Header.Get(k); v != "" {
					t.Errorf("error answer carries %s: %q", k, v)
				}
			}
			got := h.MustShowLink(t, l.ID)
			if got.Remaining != 3 || got.Grants["refunded"] != 1 || got.Grants["granted"] != 0 {
				t.Errorf("after a storage failure: remaining %d, grants %v; want 3 and {refunded:1}", got.Remaining, got.Grants)
			}
			if n := h.Ledger.Calls("Refund"); n != 1 {
				t.Errorf("Refund calls = %d, want 1", n)
			}
			// A refunded grant delivered nothing and records nothing.
			h.WaitIdle()
			if n := h.Ledger.Calls("GrantDeliveryRecord"); n != 0 {
				t.Errorf("a refunded claim made %d delivery records, want none", n)
			}
			if d := h.mustOnlyGrant(t, l.ID).Delivery; d.Status != "none" || d.BytesAcked != 0 || d.Attempts != 1 {
				t.Errorf("the refunded grant's delivery = %+v, want none", d)
			}

			// The store recovers: the refunded allowance is usable.
			h.Store.OpenFunc = nil
			if resp, _ := h.Do(t, http.MethodGet, l.URL, nil); resp.StatusCode != http.StatusOK {
				t.Errorf("GET after recovery = %d, want 200", resp.StatusCode)
			}
			if got := h.MustShowLink(t, l.ID); got.Remaining != 2 {
				t.Errorf("remaining after recovery = %d, want 2", got.Remaining)
			}
		})
	}
}

func TestStorageFailureAfterTheFirstByteKeepsTheClaim(t *testing.T) {
	h := MustHarness(t)
	data := testData(200 << 10)
	l := h.MustObjectLink(t, "late.bin", data, map[string]any{"downloads": 2})
	h.Store.OpenFunc = func(ctx context.Context, v storage.Version, off, n int64) (io.ReadCloser, error) {
		rc, err := h.Store.Store.Open(ctx, v, off, n)
		if err != nil {
			return nil, err
		}
		sent := 0
		return &readerFunc{ReadFunc: func(p []byte) (int, error) {
			if sent >= 100<<10 {
				return 0, fmt.Errorf("disk error: %w", storage.ErrUnavailable)
			}
			k, err := rc.Read(p[:min(len(p), 100<<10-sent)])
			sent += k
			return k, err
		}, CloseFunc: rc.Close}, nil
	}
	req, _ := http.NewRequest(http.MethodGet, l.URL, nil)
	resp, err := h.Client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !errors.Is(err, io.ErrUnexpectedEOF) || n >= int64(len(data)) {
		t.Errorf("GET = %d, %d bytes, %v; want 200 cut short with io.ErrUnexpectedEOF", resp.StatusCode, n, err)
	}
	h.WaitIdle()
	got := h.MustShowLink(t, l.ID)
	if got.Remaining != 1 || got.Grants["granted"] != 1 || got.Grants["refunded"] != 0 {
		t.Errorf("after a failure mid-body: remaining %d, grants %v; want 1 and one granted", got.Remaining, got.Grants)
	}
}
