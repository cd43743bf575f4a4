package gateway_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Conditional requests on a link URL (SPEC §3, RFC 9110 §13): decided
// before the claim, from the pinned version's ETag and Last-Modified, and
// spending nothing when they decide.
func TestConditionalRequestsOnALinkURLSpendNothing(t *testing.T) {
	h := MustHarness(t)
	data := testData(40 << 10)
	l := h.MustObjectLink(t, "cond.bin", data, map[string]any{"downloads": 2})
	head, _ := h.Do(t, http.MethodHead, l.URL, nil)
	etag, modified := head.Header.Get("ETag"), head.Header.Get("Last-Modified")
	if etag == "" || modified == "" {
		t.Fatalf("HEAD gave ETag %q and Last-Modified %q, want both", etag, modified)
	}
	later := h.Clock.Now().Add(time.Minute).UTC().Format(http.TimeFormat)
	earlier, _ := time.Parse(http.TimeFormat, modified)
	before := earlier.Add(-time.Hour).Format(http.TimeFormat)
	for _, tt := range []struct {
		name   string
		method string
		header http.Header
		status int
	}{
		// §13.1.2: a cache or a download manager revalidating what it has.
		{"IfNoneMatchTheLinksETag", http.MethodGet, http.Header{"If-None-Match": {etag}}, http.StatusNotModified},
		{"IfNoneMatchWeakly", http.MethodGet, http.Header{"If-None-Match": {"W/" + etag}}, http.StatusNotModified},
		{"IfNoneMatchStar", http.MethodGet, http.Header{"If-None-Match": {"*"}}, http.StatusNotModified},
		{"IfNoneMatchOnHEAD", http.MethodHead, http.Header{"If-None-Match": {etag}}, http.StatusNotModified},
		// §13.1.3, without If-None-Match.
		{"IfModifiedSinceItsLastModified", http.MethodGet, http.Header{"If-Modified-Since": {modified}}, http.StatusNotModified},
		// §13.1.1, §13.1.4: 412 before anything is claimed.
		{"IfMatchAnotherETag", http.MethodGet, http.Header{"If-Match": {`"another"`}}, http.StatusPreconditionFailed},
		{"IfMatchWeakNeverMatches", http.MethodGet, http.Header{"If-Match": {"W/" + etag}}, http.StatusPreconditionFailed},
		{"IfUnmodifiedSinceBefore", http.MethodGet, http.Header{"If-Unmodified-Since": {before}}, http.StatusPreconditionFailed},
		{"IfMatchOnTheConfirmPOST", http.MethodPost, http.Header{"If-Match": {`"another"`}}, http.StatusPreconditionFailed},
	} {
		t.Run(tt.name, func(t *testing.T) {
			claims := h.claimCalls()
			resp, body := h.Do(t, tt.method, l.URL, tt.header)
			if resp.StatusCode != tt.status {
				t.Fatalf("%s with %v = %d %s, want %d", tt.method, tt.header, resp.StatusCode, body, tt.status)
			}
			if n := h.claimCalls() - claims; n != 0 {
				t.Errorf("a conditional request decided by its preconditions made %d claim calls", n)
			}
			switch tt.status {
			case http.StatusNotModified:
				// §15.4.5: the validators, the digests, no body.
				if len(body) != 0 || resp.Header.Get("ETag") != etag || resp.Header.Get("Last-Modified") != modified ||
					resp.Header.Get("Repr-Digest") == "" || resp.Header.Get("Cache-Control") != "no-store" {
					t.Errorf("304 headers %v, body %d bytes", resp.Header, len(body))
				}
				if cd := resp.Header.Get("Content-Disposition"); cd != "" {
					t.Errorf("304 carries Content-Disposition %q", cd)
				}
			case http.StatusPreconditionFailed:
				mustProblem(t, resp, body, http.StatusPreconditionFailed, "precondition-failed")
			}
		})
	}
	if got := h.MustShowLink(t, l.ID); got.Remaining != 2 {
		t.Fatalf("remaining = %d after conditional requests alone, want 2", got.Remaining)
	}
	// Preconditions that hold go on to the claim, as a plain GET does.
	for _, hd := range []http.Header{{"If-Match": {etag}}, {"If-None-Match": {`"another"`}},
		{"If-Modified-Since": {before}}, {"If-Unmodified-Since": {later}}} {
		l := h.MustObjectLink(t, "cond.bin", data, map[string]any{"downloads": 1})
		resp, body := h.Do(t, http.MethodGet, l.URL, hd)
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, data) {
			t.Fatalf("GET with %v = %d (%d bytes), want 200 and the object", hd, resp.StatusCode, len(body))
		}
		if got := h.MustShowLink(t, l.ID); got.Remaining != 0 {
			t.Fatalf("remaining = %d after a GET whose preconditions hold, want 0", got.Remaining)
		}
	}
	for range 2 {
		if resp, _ := h.Do(t, http.MethodGet, l.URL, nil); resp.StatusCode != http.StatusOK {
			t.Fatalf("GET = %d, want 200", resp.StatusCode)
		}
	}
	// A spent link is the generic 404, conditional or not: a 304 would
	// say the link still serves the object.
	resp, body := h.Do(t, http.MethodGet, l.URL, http.Header{"If-None-Match": {etag}})
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("conditional GET of a spent link = %d %s, want 404", resp.StatusCode, body)
	}
}

// On a session URL they draw no budget and take no slot (SPEC §3).
func TestConditionalRequestsOnASessionURLDrawNothing(t *testing.T) {
	h := MustHarness(t)
	data := testData(100 << 10)
	l := h.MustObjectLink(t, "cond-session.bin", data, map[string]any{"downloads": 1})
	x := h.MustMint(t, l)
	head, _ := h.Do(t, http.MethodHead, x.SessionURL, nil)
	etag := head.Header.Get("ETag")
	before := h.callsOf("SlotAcquire", "BudgetDraw")
	for _, tt := range []struct {
		header http.Header
		status int
	}{
		{http.Header{"If-None-Match": {etag}}, http.StatusNotModified},
		{http.Header{"If-None-Match": {etag}, "Range": {"bytes=0-99"}}, http.StatusNotModified},
		{http.Header{"If-Match": {`"another"`}, "Range": {"bytes=0-99"}}, http.StatusPreconditionFailed},
		{http.Header{"If-Modified-Since": {head.Header.Get("Last-Modified")}}, http.StatusNotModified},
	} {
		resp, body := h.Do(t, http.MethodGet, x.SessionURL, tt.header)
		if resp.StatusCode != tt.status || len(body) != 0 && tt.status == http.StatusNotModified {
			t.Errorf("GET %v = %d (%d bytes), want %d", tt.header, resp.StatusCode, len(body), tt.status)
		}
	}
	if n := h.callsOf("SlotAcquire", "BudgetDraw") - before; n != 0 {
		t.Errorf("conditional requests decided by their preconditions made %d slot or budget calls", n)
	}
	if got := h.MustSession(t, x.SessionID); got.BytesDrawn != 0 {
		t.Errorf("bytes drawn = %d, want 0", got.BytesDrawn)
	}
	// If-Match that holds, with a Range: the range.
	resp, body := h.Do(t, http.MethodGet, x.SessionURL, http.Header{"If-Match": {etag}, "Range": {"bytes=10-19"}})
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(body, data[10:20]) {
		t.Errorf("GET with a true If-Match and a Range = %d %q", resp.StatusCode, body)
	}
}

// A person's browser gets the 412 as a page, as every other error.
func TestAPreconditionFailedIsAPageForABrowser(t *testing.T) {
	h := MustHarness(t)
	l := h.MustObjectLink(t, "cond-page.bin", testData(1000), nil)
	resp, body := h.Do(t, http.MethodGet, l.URL, http.Header{"If-Match": {`"another"`}, "Sec-Fetch-Dest": {"document"}})
	if resp.StatusCode != http.StatusPreconditionFailed || !strings.Contains(string(body), "<h1>") {
		t.Errorf("browser GET with a false If-Match = %d %s", resp.StatusCode, body)
	}
}
