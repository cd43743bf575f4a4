package sessions

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testContent returns size bytes that differ at most offsets, so a part
// with the wrong bytes is noticed.
func testContent(size int64) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i*7 + i/251)
	}
	return b
}

// buildBody writes the body m describes for ranges of content, the way the
// gateway streams it.
func buildBody(m *Multipart, ranges []Range, content []byte) []byte {
	var body bytes.Buffer
	for i, r := range ranges {
		body.Write(m.PartHeader(i))
		body.Write(content[r.Start : r.Start+r.Length])
	}
	body.Write(m.Closing())
	return body.Bytes()
}

func TestMultipart(t *testing.T) {
	tests := []struct {
		header      string
		size        int64
		contentType string
		boundary    string
		wantCT      string // the Content-Type parts carry; "" for none
	}{
		{"bytes=0-0,-1", 1000, "text/plain; charset=utf-8", RandomBoundary(), "text/plain; charset=utf-8"},
		{"bytes=0-99,200-299,900-", 1000, "application/octet-stream", RandomBoundary(), "application/octet-stream"},
		{rangeList(0, 16, 2), 1000, "video/mp4", RandomBoundary(), "video/mp4"},
		{"bytes=0-0", 1, "application/pdf", RandomBoundary(), "application/pdf"},
		{"bytes=10-19,30-", 40, "", RandomBoundary(), ""},
		{"bytes=0-4,10-14", 20, "text/plain\r\nX-Evil: 1", RandomBoundary(), "application/octet-stream"},
		{"bytes=0-4,10-14", 20, "image/png", "a", "image/png"},
		{"bytes=0-4,10-14", 20, "image/png", "weird but valid: '()+_,-./=?", "image/png"},
		{"bytes=0-4,10-14", 20, "image/png", strings.Repeat("b", 70), "image/png"},
	}
	for _, test := range tests {
		ranges, err := ParseRange(test.header, test.size)
		if err != nil {
			t.Fatalf("ParseRange(%q, %d): %v", test.header, test.size, err)
		}
		content := testContent(test.size)
		m := NewMultipart(ranges, test.size, test.contentType, test.boundary)
		body := buildBody(m, ranges, content)

		if got := int64(len(body)); got != m.ContentLength() {
			t.Errorf("%q: len(body) = %d, ContentLength() = %d", test.header, got, m.ContentLength())
		}
		mediaType, params, err := mime.ParseMediaType(m.ContentType())
		if err != nil || mediaType != "multipart/byteranges" || params["boundary"] != test.boundary {
			t.Errorf("%q: ContentType() = %q: parsed as %q, %v, %v", test.header, m.ContentType(), mediaType, params, err)
			continue
		}

		mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
		for i, r := range ranges {
			p, err := mr.NextRawPart()
			if err != nil {
				t.Fatalf("%q: part %d: %v\nbody:\n%q", test.header, i, err, body)
			}
			if got, want := p.Header.Get("Content-Range"), r.ContentRange(test.size); got != want {
				t.Errorf("%q: part %d Content-Range = %q, want %q", test.header, i, got, want)
			}
			if got, ok := p.Header["Content-Type"]; test.wantCT == "" && ok || test.wantCT != "" && (len(got) != 1 || got[0] != test.wantCT) {
				t.Errorf("%q: part %d Content-Type = %q, want %q", test.header, i, got, test.wantCT)
			}
			if len(p.Header) > 2 {
				t.Errorf("%q: part %d has extra header fields: %q", test.header, i, p.Header)
			}
			data, err := io.ReadAll(p)
			if err != nil {
				t.Fatalf("%q: part %d: %v", test.header, i, err)
			}
			if !bytes.Equal(data, content[r.Start:r.Start+r.Length]) {
				t.Errorf("%q: part %d has %d bytes, not the %d of %v", test.header, i, len(data), r.Length, r)
			}
		}
		if _, err := mr.NextRawPart(); !errors.Is(err, io.EOF) {
			t.Errorf("%q: after %d parts: %v, want io.EOF", test.header, len(ranges), err)
		}
		// Nothing may follow the close delimiter's CRLF.
		if !bytes.HasSuffix(body, []byte("\r\n--"+test.boundary+"--\r\n")) {
			t.Errorf("%q: body does not end with the close delimiter: %q", test.header, body[max(0, len(body)-100):])
		}
	}
}

func TestMultipartFraming(t *testing.T) {
	m := NewMultipart([]Range{{0, 2}, {5, 3}}, 10, "text/plain", "XYZ")
	want := "--XYZ\r\nContent-Type: text/plain\r\nContent-Range: bytes 0-1/10\r\n\r\n" +
		"01" +
		"\r\n--XYZ\r\nContent-Type: text/plain\r\nContent-Range: bytes 5-7/10\r\n\r\n" +
		"567" +
		"\r\n--XYZ--\r\n"
	got := string(buildBody(m, []Range{{0, 2}, {5, 3}}, []byte("0123456789")))
	if got != want {
		t.Errorf("body = %q\nwant   %q", got, want)
	}
	if m.ContentLength() != int64(len(want)) {
		t.Errorf("ContentLength() = %d, want %d", m.ContentLength(), len(want))
	}
	if got, want := m.ContentType(), "multipart/byteranges; boundary=XYZ"; got != want {
		t.Errorf("ContentType() = %q, want %q", got, want)
	}
	// The caller owns what it gets: scribbling on it changes nothing.
	h := m.PartHeader(0)
	h[0] = 'X'
	if m.PartHeader(0)[0] != '-' {
		t.Errorf("PartHeader returned shared memory")
	}
}

// TestMultipartLengthMatchesNetHTTP checks ContentLength against an
// independent implementation: net/http's ServeContent sends the same parts
// (in another header order, which does not change the length) and also uses
// 60-character boundaries.
func TestMultipartLengthMatchesNetHTTP(t *testing.T) {
	for _, test := range []struct {
		header      string
		size        int64
		contentType string
	}{
		{"bytes=0-0,-1", 1000, "text/plain; charset=utf-8"},
		{"bytes=0-99,200-299,900-", 1000, "application/octet-stream"},
		{rangeList(0, 16, 2), 100000, "video/mp4"},
		{rangeList(99990, 5, 2), 100000, "application/x-tar"},
	} {
		ranges, err := ParseRange(test.header, test.size)
		if err != nil {
			t.Fatalf("ParseRange(%q, %d): %v", test.header, test.size, err)
		}
		m := NewMultipart(ranges, test.size, test.contentType, RandomBoundary())

		req := httptest.NewRequest("GET", "/", nil)
		req.Header.Set("Range", test.header)
		rec := httptest.NewRecorder()
		rec.Header().Set("Content-Type", test.contentType)
		http.ServeContent(rec, req, "", time.Time{}, bytes.NewReader(testContent(test.size)))
		if rec.Code != http.StatusPartialContent {
			t.Fatalf("%q: net/http answered %d", test.header, rec.Code)
		}
		netLen, _ := strconv.ParseInt(rec.Header().Get("Content-Length"), 10, 64)
		if m.ContentLength() != netLen || int64(rec.Body.Len()) != netLen {
			t.Errorf("%q: ContentLength() = %d, net/http sent Content-Length %d and %d bytes",
				test.header, m.ContentLength(), netLen, rec.Body.Len())
		}
	}
}

func TestNewMultipartRejectsInvalidBoundary(t *testing.T) {
	for _, b := range []string{"", "ends in space ", strings.Repeat("b", 71), "semi;colon", "quo\"te", "new\r\nline", "ümlaut"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewMultipart(..., %q) did not panic", b)
				}
			}()
			NewMultipart([]Range{{0, 1}}, 1, "text/plain", b)
		}()
	}
}

func TestRandomBoundary(t *testing.T) {
	seen := make(map[string]bool)
	for range 100 {
		b := RandomBoundary()
		if len(b) != 60 || !validBoundary(b) || !isToken(b) {
			t.Fatalf("RandomBoundary() = %q: want 60 token characters", b)
		}
		if seen[b] {
			t.Fatalf("RandomBoundary() repeated %q", b)
		}
		seen[b] = true
	}
}
