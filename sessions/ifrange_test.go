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
		ifRange      []string // the field lines; nil for no If-Range
		etag         string
		lastModified time.Time
		want         bool
	}{
		// No If-Range: nothing to check.
		{nil, etag, modtime, true},
		{nil, "", unknown, true},
		{[]string{}, etag, modtime, true},

		// Present but neither an entity-tag nor an HTTP-date: the condition
		// is false (RFC 9110 §13.1.5), so the whole representation.
		{[]string{""}, etag, modtime, false},
		{[]string{""}, "", unknown, false},
		{[]string{"  "}, etag, modtime, false},
		{[]string{"\t"}, etag, modtime, false},
		// If-Range is a singleton: two field lines combine into a list.
		{[]string{etag, etag}, etag, modtime, false},
		{[]string{date, date}, etag, modtime, false},
		{[]string{etag, ""}, etag, modtime, false},

		// Entity-tags: strong comparison only (RFC 9110 §8.8.3.2).
		{[]string{etag}, etag, modtime, true},
		{[]string{etag}, etag, unknown, true},
		{[]string{" " + etag + "\t"}, etag, modtime, true},
		{[]string{`"v1-abd"`}, etag, modtime, false},
		{[]string{`"V1-ABC"`}, etag, modtime, false}, // opaque-tags are case-sensitive
		{[]string{`W/"v1-abc"`}, etag, modtime, false},
		{[]string{`W/"v1-abc"`}, `W/"v1-abc"`, modtime, false}, // weak never matches strongly
		{[]string{`""`}, `""`, modtime, true},
		{[]string{`"v1-abc"`}, "", modtime, false},
		{[]string{`"v1-abc"`}, "v1-abc", modtime, false},   // etag must be in header form
		{[]string{`"v1-abc", "v2"`}, etag, modtime, false}, // If-Range is not a list
		{[]string{`"v1-abc" junk`}, etag, modtime, false},
		{[]string{`"v1-abc`}, etag, modtime, false},
		{[]string{`"v1 abc"`}, `"v1 abc"`, modtime, false}, // SP is not an etagc
		{[]string{`W/`}, etag, modtime, false},
		{[]string{`*`}, etag, modtime, false},
		{[]string{`v1-abc`}, etag, modtime, false},

		// HTTP-dates: exact match with a known Last-Modified (§13.1.5).
		{[]string{date}, etag, modtime, true},
		{[]string{date}, etag, modtime.Add(999 * time.Millisecond), true}, // HTTP-dates have whole seconds
		{[]string{date}, etag, modtime.In(time.FixedZone("CEST", 2*3600)), true},
		{[]string{date}, etag, modtime.Add(time.Second), false},
		{[]string{date}, etag, modtime.Add(-time.Second), false},
		{[]string{date}, etag, unknown, false},
		{[]string{"Mon, 01 Jan 0001 00:00:00 GMT"}, etag, unknown, false}, // the zero time.Time is "unknown", not a date
		{[]string{"Monday, 06-May-24 07:08:09 GMT"}, etag, modtime, true}, // RFC 850 (§5.6.7)
		{[]string{"Mon May  6 07:08:09 2024"}, etag, modtime, true},       // asctime (§5.6.7)
		{[]string{"2024-05-06T07:08:09Z"}, etag, modtime, false},          // not an HTTP-date
		{[]string{"Mon, 06 May 2024 07:08:09 GMT junk"}, etag, modtime, false},
		{[]string{"yesterday"}, etag, modtime, false},
	}
	for _, test := range tests {
		if got := IfRangeAllows(test.ifRange, test.etag, test.lastModified); got != test.want {
			t.Errorf("IfRangeAllows(%#v, %q, %v) = %v, want %v", test.ifRange, test.etag, test.lastModified, got, test.want)
		}
	}
}
