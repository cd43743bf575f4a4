package gateway_test

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// sessionFixture is one session on a 100 000-byte object with a budget
// far above what the tests read.
type sessionFixture struct {
	h    *Harness
	data []byte
	obj  objectJSON
	link linkJSON
	s    sessionJSON
}

func mustSessionFixture(tb testing.TB, session map[string]any) *sessionFixture {
	tb.Helper()
	h := MustHarness(tb)
	f := &sessionFixture{h: h, data: testData(100_000)}
	f.obj = h.MustPutObject(tb, "films/take 1.mov", "video/quicktime", f.data)
	if session == nil {
		session = map[string]any{"byte_budget": 1 << 30}
	}
	f.link = h.MustCreateLink(tb, map[string]any{"object": map[string]any{"key": "films/take 1.mov"}, "downloads": 3,
		"expires_in": 3600, "session": session})
	f.s = h.MustMint(tb, f.link)
	return f
}

func (f *sessionFixture) get(tb testing.TB, header http.Header) (*http.Response, []byte) {
	tb.Helper()
	return f.h.Do(tb, http.MethodGet, f.s.SessionURL, header)
}

func TestSessionServesRanges(t *testing.T) {
	f := mustSessionFixture(t, nil)
	size := int64(len(f.data))
	cases := []struct {
		name       string
		rangeHdr   string
		status     int
		start, end int64 // inclusive, for 200 and 206
	}{
		{"NoRangeIsTheWholeObject", "", http.StatusOK, 0, size - 1},
		{"FirstByte", "bytes=0-0", http.StatusPartialContent, 0, 0},
		{"Middle", "bytes=1000-1999", http.StatusPartialContent, 1000, 1999},
		{"EndBeyondSizeIsClamped", "bytes=99000-200000", http.StatusPartialContent, 99000, size - 1},
		{"Open", "bytes=99500-", http.StatusPartialContent, 99500, size - 1},
		{"Suffix", "bytes=-500", http.StatusPartialContent, size - 500, size - 1},
		{"SuffixLargerThanTheObject", "bytes=-1000000", http.StatusPartialContent, 0, size - 1},
		// RFC 9110 §14.1.2: positions have no upper bound; beyond int64
		// is still just beyond the end.
		{"LastPosTooLongForInt64IsClamped", "bytes=0-1234567890123456789012345678901234567890", http.StatusPartialContent, 0, size - 1},
		{"SuffixTooLongForInt64IsTheWholeObject", "bytes=-99999999999999999999999", http.StatusPartialContent, 0, size - 1},
		{"LeadingZeros", "bytes=0001000-0001999", http.StatusPartialContent, 1000, 1999},
		{"EmptyListElementsAreSkipped", "bytes=,,1000-1999,,", http.StatusPartialContent, 1000, 1999},
		{"OverlappingRangesCoalesce", "bytes=0-99,50-149,150-199", http.StatusPartialContent, 0, 199},
		{"WhitespaceIsAllowed", "bytes= 10-19 ,  15-29", http.StatusPartialContent, 10, 29},
		// Not a bytes range at all: ignored (RFC 9110 §14.2). An invalid
		// bytes range-set is refused instead (see the 416 test).
		{"GarbageIsIgnored", "abc", http.StatusOK, 0, size - 1},
		{"UnitWithoutRangeSetIsIgnored", "bytes", http.StatusOK, 0, size - 1},
		{"OtherUnitIsIgnored", "items=0-1", http.StatusOK, 0, size - 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var hdr http.Header
			if c.rangeHdr != "" {
				hdr = http.Header{"Range": {c.rangeHdr}}
			}
			resp, body := f.get(t, hdr)
			if resp.StatusCode != c.status {
				t.Fatalf("Range %q = %d %s, want %d", c.rangeHdr, resp.StatusCode, body, c.status)
			}
			if want := f.data[c.start : c.end+1]; !bytes.Equal(body, want) {
				t.Errorf("Range %q: %d body bytes, want bytes %d-%d", c.rangeHdr, len(body), c.start, c.end)
			}
			wantCR := ""
			if c.status == http.StatusPartialContent {
				wantCR = fmt.Sprintf("bytes %d-%d/%d", c.start, c.end, size)
			}
			if got := resp.Header.Get("Content-Range"); got != wantCR {
				t.Errorf("Content-Range = %q, want %q", got, wantCR)
			}
			want := map[string]string{
				"Content-Length":      strconv.FormatInt(c.end-c.start+1, 10),
				"Accept-Ranges":       "bytes",
				"ETag":                f.obj.ETag,
				"Content-Type":        "video/quicktime",
				"Content-Disposition": `attachment; filename="take 1.mov"`,
			}
			for k, v := range want {
				if got := resp.Header.Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}

func TestSessionServesSeveralRangesAsMultipart(t *testing.T) {
	f := mustSessionFixture(t, nil)
	size := len(f.data)
	var sixteen, seventeen []string
	for i := range 17 {
		if i < 16 {
			sixteen = append(sixteen, fmt.Sprintf("%d-%d", 10*i, 10*i+4))
		}
		seventeen = append(seventeen, fmt.Sprintf("%d-%d", 10*i, 10*i+4))
	}
	type part struct{ start, end int }
	cases := []struct {
		name     string
		rangeHdr string
		parts    []part
	}{
		{"TwoRanges", "bytes=0-9,500-599", []part{{0, 9}, {500, 599}}},
		// RFC 9110 §15.3.7.2: parts keep the request's order...
		{"RequestOrderIsKept", "bytes=500-599,0-99", []part{{500, 599}, {0, 99}}},
		{"UnsortedWithSuffix", "bytes=-100,0-0,1000-1000", []part{{size - 100, size - 1}, {0, 0}, {1000, 1000}}},
		// ...and a merged range stands where its first-requested member did.
		{"MergedRangeStandsAtItsFirstMember", "bytes=500-599,0-9,590-700", []part{{500, 700}, {0, 9}}},
		{"MergedThroughALaterMember", "bytes=2000-2009,0-9,20-29,10-19", []part{{2000, 2009}, {0, 29}}},
		{"OverlapsAndAdjacentsCoalesce", "bytes=0-9,5-19,20-29,100-109,105-120", []part{{0, 29}, {100, 120}}},
		{"SixteenRangesAreTheMost", "bytes=" + strings.Join(sixteen, ","), func() []part {
			var p []part
			for i := range 16 {
				p = append(p, part{10 * i, 10*i + 4})
			}
			return p
		}()},
		// 17 specs, but the last touches the 16th: 16 after coalescing.
		{"SeventeenSpecsCoalescingToSixteen", "bytes=" + strings.Join(sixteen, ",") + ",155-159", func() []part {
			var p []part
			for i := range 15 {
				p = append(p, part{10 * i, 10*i + 4})
			}
			return append(p, part{150, 159})
		}()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := f.get(t, http.Header{"Range": {c.rangeHdr}})
			if resp.StatusCode != http.StatusPartialContent {
				t.Fatalf("Range %q = %d, want 206", c.rangeHdr, resp.StatusCode)
			}
			if got := resp.Header.Get("Content-Length"); got != strconv.Itoa(len(body)) {
				t.Errorf("Content-Length = %s, body has %d bytes", got, len(body))
			}
			if resp.Header.Get("Content-Range") != "" {
				t.Errorf("a multipart answer carries Content-Range %q", resp.Header.Get("Content-Range"))
			}
			mt, params, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
			if err != nil || mt != "multipart/byteranges" || params["boundary"] == "" {
				t.Fatalf("Content-Type = %q, want multipart/byteranges with a boundary", resp.Header.Get("Content-Type"))
			}
			mr := multipart.NewReader(bytes.NewReader(body), params["boundary"])
			for i, want := range c.parts {
				p, err := mr.NextRawPart()
				if err != nil {
					t.Fatalf("part %d: %v", i, err)
				}
				if got, cr := p.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-%d/%d", want.start, want.end, size); got != cr {
					t.Errorf("part %d Content-Range = %q, want %q", i, got, cr)
				}
				if got := p.Header.Get("Content-Type"); got != "video/quicktime" {
					t.Errorf("part %d Content-Type = %q", i, got)
				}
				got, err := io.ReadAll(p)
				if err != nil {
					t.Fatalf("part %d: %v", i, err)
				}
				if !bytes.Equal(got, f.data[want.start:want.end+1]) {
					t.Errorf("part %d: %d bytes, not bytes %d-%d of the object", i, len(got), want.start, want.end)
				}
			}
			if _, err := mr.NextRawPart(); err != io.EOF {
				t.Errorf("after %d parts: %v, want io.EOF", len(c.parts), err)
			}
		})
	}
	t.Run("SeventeenRangesAre416", func(t *testing.T) {
		resp, body := f.get(t, http.Header{"Range": {"bytes=" + strings.Join(seventeen, ",")}})
		mustProblem(t, resp, body, http.StatusRequestedRangeNotSatisfiable, "range-not-satisfiable")
		if got, want := resp.Header.Get("Content-Range"), fmt.Sprintf("bytes */%d", size); got != want {
			t.Errorf("Content-Range = %q, want %q", got, want)
		}
	})
}

// TestSessionRefusesUnsatisfiableOrInvalidRanges: 416 for ranges that miss
// the object, and for a bytes range-set that is invalid (RFC 9110 §14.2
// lets a server reject it), which drawing nothing from the budget is the
// point of: ignoring it would serve, and charge, the whole object.
func TestSessionRefusesUnsatisfiableOrInvalidRanges(t *testing.T) {
	f := mustSessionFixture(t, nil)
	for _, rh := range []string{
		"bytes=100000-", "bytes=100000-100010", "bytes=200000-300000,100001-",
		"bytes=18446744073709551616-", // first-pos too long for int64: beyond the end
		"bytes=20-10",                 // last-pos < first-pos (§14.1.1)
		"bytes=0-9,5-2",               // one invalid spec among valid ones
		"bytes=abc",
		"bytes=",
	} {
		t.Run(rh, func(t *testing.T) {
			resp, body := f.get(t, http.Header{"Range": {rh}})
			mustProblem(t, resp, body, http.StatusRequestedRangeNotSatisfiable, "range-not-satisfiable")
			if got := resp.Header.Get("Content-Range"); got != "bytes */100000" {
				t.Errorf("Content-Range = %q, want bytes */100000", got)
			}
			if got := resp.Header.Get("Accept-Ranges"); got != "bytes" {
				t.Errorf("Accept-Ranges = %q, want bytes", got)
			}
			assertPublicHeaders(t, rh, resp)
		})
	}
	if got := f.h.MustSession(t, f.s.SessionID).BytesDrawn; got != 0 {
		t.Errorf("416 answers drew %d bytes of budget", got)
	}
}

func TestSessionHonoursIfRange(t *testing.T) {
	f := mustSessionFixture(t, nil)
	if f.h.MustSession(t, f.s.SessionID).Object.LastModified.IsZero() {
		t.Fatal("the pinned version has no Last-Modified; the date cases would prove nothing")
	}
	lastModified := f.h.Clock.Now().Format(http.TimeFormat)
	cases := []struct {
		name, ifRange string
		status        int
	}{
		{"MatchingETag", f.obj.ETag, http.StatusPartialContent},
		{"OtherETag", `"not-the-etag"`, http.StatusOK},
		{"WeakMatchingETag", "W/" + f.obj.ETag, http.StatusOK},
		{"MatchingDate", lastModified, http.StatusPartialContent},
		{"OlderDate", f.h.Clock.Now().Add(-time.Hour).Format(http.TimeFormat), http.StatusOK},
		{"NewerDate", f.h.Clock.Now().Add(time.Hour).Format(http.TimeFormat), http.StatusOK},
		{"Garbage", "yesterday", http.StatusOK},
		// RFC 9110 §13.1.5: neither an entity-tag nor an HTTP-date, so the
		// condition is false.
		{"Empty", "", http.StatusOK},
		{"UnquotedETag", strings.Trim(f.obj.ETag, `"`), http.StatusOK},
		{"BadDate", "Mon, 32 Foo 2024 25:61:61 GMT", http.StatusOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := f.get(t, http.Header{"Range": {"bytes=10-19"}, "If-Range": {c.ifRange}})
			if resp.StatusCode != c.status {
				t.Fatalf("If-Range %q = %d, want %d", c.ifRange, resp.StatusCode, c.status)
			}
			want := f.data
			if c.status == http.StatusPartialContent {
				want = f.data[10:20]
			}
			if !bytes.Equal(body, want) {
				t.Errorf("If-Range %q: %d body bytes, want %d", c.ifRange, len(body), len(want))
			}
		})
	}
}

func TestSessionHeadDrawsNoBudgetAndTakesNoSlot(t *testing.T) {
	f := mustSessionFixture(t, map[string]any{"byte_budget": 1 << 30, "max_concurrency": 1})
	h := f.h

	opened, release := h.GateFirstOpen("films/take 1.mov")
	holder := h.Go(http.MethodGet, f.s.SessionURL, nil)
	<-opened
	drawn := h.MustSession(t, f.s.SessionID).BytesDrawn

	// The only slot is held: a GET is refused, a HEAD is not.
	if resp, _ := f.get(t, nil); resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("GET while the slot is held = %d, want 429", resp.StatusCode)
	}
	for _, rh := range []string{"", "bytes=0-99"} {
		resp, body := h.Do(t, http.MethodHead, f.s.SessionURL, http.Header{"Range": {rh}})
		want, length := http.StatusOK, "100000"
		if rh != "" {
			want, length = http.StatusPartialContent, "100"
		}
		if resp.StatusCode != want || len(body) != 0 {
			t.Errorf("HEAD Range %q = %d with %d body bytes, want %d and none", rh, resp.StatusCode, len(body), want)
		}
		if resp.Header.Get("Content-Length") != length || resp.Header.Get("ETag") != f.obj.ETag || resp.Header.Get("Accept-Ranges") != "bytes" {
			t.Errorf("HEAD Range %q headers = %v", rh, resp.Header)
		}
		assertPublicHeaders(t, "HEAD /s/", resp)
	}
	if got := h.MustSession(t, f.s.SessionID).BytesDrawn; got != drawn {
		t.Errorf("HEAD changed bytes_drawn from %d to %d", drawn, got)
	}
	release()
	if r := mustResult(t, holder); r.resp.StatusCode != http.StatusOK || !bytes.Equal(r.body, f.data) {
		t.Errorf("slot holder = %d with %d bytes, want 200 and the object", r.resp.StatusCode, len(r.body))
	}
}

// TestSessionRangesOnAnEmptyObject: no 206 can describe zero bytes. A
// non-zero suffix is satisfiable there (RFC 9110 §14.1.2) and §14.2 lets
// the server ignore Range on an empty representation: 200, empty. Every
// other valid range misses it: 416.
func TestSessionRangesOnAnEmptyObject(t *testing.T) {
	h := MustHarness(t)
	h.MustPutObject(t, "empty.bin", "application/octet-stream", nil)
	l := h.MustCreateLink(t, map[string]any{"object": map[string]any{"key": "empty.bin"}, "downloads": 1,
		"expires_in": 3600, "session": map[string]any{"byte_budget": 1 << 20}})
	s := h.MustMint(t, l)
	for _, c := range []struct {
		rangeHdr string
		status   int
	}{
		{"bytes=-1", http.StatusOK},
		{"bytes=0-0,-99999999999999999999", http.StatusOK},
		{"bytes=0-", http.StatusRequestedRangeNotSatisfiable},
		{"bytes=-0", http.StatusRequestedRangeNotSatisfiable},
	} {
		resp, body := h.Do(t, http.MethodGet, s.SessionURL, http.Header{"Range": {c.rangeHdr}})
		if resp.StatusCode != c.status || c.status == http.StatusOK && len(body) != 0 {
			t.Errorf("Range %q on an empty object = %d with %d body bytes, want %d", c.rangeHdr, resp.StatusCode, len(body), c.status)
		}
		if c.status == http.StatusRequestedRangeNotSatisfiable && resp.Header.Get("Content-Range") != "bytes */0" {
			t.Errorf("Range %q: Content-Range = %q, want bytes */0", c.rangeHdr, resp.Header.Get("Content-Range"))
		}
	}
}
