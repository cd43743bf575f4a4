package sessions

import (
	"net/http"
	"testing"
	"time"
)

func TestIfRangeAllows(t *testing.T) {
	const etag = `"v1-abc"`
	modtime := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	date := modtime.Format(http.TimeFormat) // Mon, 06 May 2024 07:08:09 GMT
	var unknown time.Time

	tests := []struct {
		ifRange      string
		etag         string
		lastModified time.Time
		want         bool
	}{
		// No If-Range: nothing to check.
		{"", etag, modtime, true},
		{"", "", unknown, true},
		{"  ", etag, modtime, true},

		// Entity-tags: strong comparison only (RFC 9110 §8.8.3.2).
		{etag, etag, modtime, true},
		{etag, etag, unknown, true},
		{" " + etag + "\t", etag, modtime, true},
		{`"v1-abd"`, etag, modtime, false},
		{`"V1-ABC"`, etag, modtime, false}, // opaque-tags are case-sensitive
		{`W/"v1-abc"`, etag, modtime, false},
		{`W/"v1-abc"`, `W/"v1-abc"`, modtime, false}, // weak never matches strongly
		{`""`, `""`, modtime, true},
		{`"v1-abc"`, "", modtime, false},
		{`"v1-abc"`, "v1-abc", modtime, false},   // etag must be in header form
		{`"v1-abc", "v2"`, etag, modtime, false}, // If-Range is not a list
		{`"v1-abc" junk`, etag, modtime, false},
		{`"v1-abc`, etag, modtime, false},
		{`"v1 abc"`, `"v1 abc"`, modtime, false}, // SP is not an etagc
		{`W/`, etag, modtime, false},
		{`*`, etag, modtime, false},
		{`v1-abc`, etag, modtime, false},

		// HTTP-dates: exact match with a known Last-Modified (§13.1.5).
		{date, etag, modtime, true},
		{date, etag, modtime.Add(999 * time.Millisecond), true}, // HTTP-dates have whole seconds
		{date, etag, modtime.In(time.FixedZone("CEST", 2*3600)), true},
		{date, etag, modtime.Add(time.Second), false},
		{date, etag, modtime.Add(-time.Second), false},
		{date, etag, unknown, false},
		{"Mon, 01 Jan 0001 00:00:00 GMT", etag, unknown, false}, // the zero time.Time is "unknown", not a date
		{"Monday, 06-May-24 07:08:09 GMT", etag, modtime, true}, // RFC 850 (§5.6.7)
		{"Mon May  6 07:08:09 2024", etag, modtime, true},       // asctime (§5.6.7)
		{"2024-05-06T07:08:09Z", etag, modtime, false},          // not an HTTP-date
		{"Mon, 06 May 2024 07:08:09 GMT junk", etag, modtime, false},
		{"yesterday", etag, modtime, false},
	}
	for _, test := range tests {
		if got := IfRangeAllows(test.ifRange, test.etag, test.lastModified); got != test.want {
			t.Errorf("IfRangeAllows(%q, %q, %v) = %v, want %v", test.ifRange, test.etag, test.lastModified, got, test.want)
		}
	}
}
