package httpx

import (
	"net/http"
	"testing"
	"time"
)

func TestIfRange(t *testing.T) {
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
		if got := IfRange(test.ifRange, Validators{test.etag, test.lastModified}); got != test.want {
			t.Errorf("IfRange(%#v, %q, %v) = %v, want %v", test.ifRange, test.etag, test.lastModified, got, test.want)
		}
	}
}

// The preconditions of RFC 9110 §13.1 and their order (§13.2.2), against
// a version with ETag "v1" last modified at modtime, judged at now.
func TestPreconditions(t *testing.T) {
	const etag = `"v1"`
	modtime := time.Date(2024, 5, 6, 7, 8, 9, 500_000_000, time.UTC)
	now := modtime.Add(time.Hour)
	at := func(d time.Duration) string { return modtime.Add(d).Format(http.TimeFormat) }
	known := Validators{ETag: etag, LastModified: modtime}
	noDate := Validators{ETag: etag}
	noTag := Validators{LastModified: modtime}
	type h = map[string][]string
	tests := []struct {
		name   string
		method string
		header h
		v      Validators
		want   Outcome
	}{
		{"no precondition", "GET", nil, known, Proceed},

		// §13.1.1 If-Match: strong comparison; * for any current version.
		{"If-Match equal", "GET", h{"If-Match": {etag}}, known, Proceed},
		{"If-Match in a list", "GET", h{"If-Match": {`"v0", "v1"`}}, known, Proceed},
		{"If-Match over two lines", "GET", h{"If-Match": {`"v0"`, `"v1"`}}, known, Proceed},
		{"If-Match star", "GET", h{"If-Match": {"*"}}, known, Proceed},
		{"If-Match other", "GET", h{"If-Match": {`"v2"`}}, known, PreconditionFailed},
		{"If-Match weak never matches (§8.8.3.2)", "GET", h{"If-Match": {`W/"v1"`}}, known, PreconditionFailed},
		{"If-Match malformed", "GET", h{"If-Match": {`v1`}}, known, PreconditionFailed},
		{"If-Match without a known ETag", "GET", h{"If-Match": {etag}}, noTag, PreconditionFailed},
		{"If-Match on HEAD", "HEAD", h{"If-Match": {`"v2"`}}, known, PreconditionFailed},

		// §13.1.4 If-Unmodified-Since, only without If-Match.
		{"If-Unmodified-Since later", "GET", h{"If-Unmodified-Since": {at(time.Minute)}}, known, Proceed},
		{"If-Unmodified-Since the same second", "GET", h{"If-Unmodified-Since": {at(0)}}, known, Proceed},
		{"If-Unmodified-Since earlier", "GET", h{"If-Unmodified-Since": {at(-time.Minute)}}, known, PreconditionFailed},
		{"If-Unmodified-Since ignored with If-Match (§13.2.2 step 2)", "GET", h{"If-Match": {etag}, "If-Unmodified-Since": {at(-time.Minute)}}, known, Proceed},
		{"If-Unmodified-Since not a date", "GET", h{"If-Unmodified-Since": {"yesterday"}}, known, Proceed},
		{"If-Unmodified-Since without Last-Modified", "GET", h{"If-Unmodified-Since": {at(-time.Minute)}}, noDate, Proceed},

		// §13.1.2 If-None-Match: weak comparison; 304 on GET and HEAD.
		{"If-None-Match equal", "GET", h{"If-None-Match": {etag}}, known, NotModified},
		{"If-None-Match weak equal", "GET", h{"If-None-Match": {`W/"v1"`}}, known, NotModified},
		{"If-None-Match in a list", "HEAD", h{"If-None-Match": {`"v0", W/"v1"`}}, known, NotModified},
		{"If-None-Match star", "GET", h{"If-None-Match": {"*"}}, known, NotModified},
		{"If-None-Match other", "GET", h{"If-None-Match": {`"v2"`}}, known, Proceed},
		{"If-None-Match malformed is ignored", "GET", h{"If-None-Match": {"v1"}}, known, Proceed},
		{"If-None-Match on POST is 412", "POST", h{"If-None-Match": {etag}}, known, PreconditionFailed},
		{"If-None-Match without a known ETag", "GET", h{"If-None-Match": {etag}}, noTag, Proceed},

		// §13.1.3 If-Modified-Since, only without If-None-Match, GET and HEAD.
		{"If-Modified-Since the same second", "GET", h{"If-Modified-Since": {at(0)}}, known, NotModified},
		{"If-Modified-Since later", "HEAD", h{"If-Modified-Since": {at(time.Minute)}}, known, NotModified},
		{"If-Modified-Since earlier", "GET", h{"If-Modified-Since": {at(-time.Minute)}}, known, Proceed},
		{"If-Modified-Since in the future is invalid", "GET", h{"If-Modified-Since": {now.Add(time.Minute).Format(http.TimeFormat)}}, known, Proceed},
		{"If-Modified-Since ignored with If-None-Match (§13.2.2 step 4)", "GET", h{"If-None-Match": {`"v2"`}, "If-Modified-Since": {at(time.Minute)}}, known, Proceed},
		{"If-Modified-Since ignored on POST", "POST", h{"If-Modified-Since": {at(time.Minute)}}, known, Proceed},
		{"If-Modified-Since twice is not one date", "GET", h{"If-Modified-Since": {at(0), at(0)}}, known, Proceed},
		{"If-Modified-Since without Last-Modified", "GET", h{"If-Modified-Since": {at(0)}}, noDate, Proceed},

		// §13.2.2: 412 conditions come before 304 ones.
		{"If-Match false beats If-None-Match false", "GET", h{"If-Match": {`"v2"`}, "If-None-Match": {etag}}, known, PreconditionFailed},
		{"If-Match true, If-None-Match false", "GET", h{"If-Match": {etag}, "If-None-Match": {etag}}, known, NotModified},
		{"If-Unmodified-Since false beats If-Modified-Since false", "GET", h{"If-Unmodified-Since": {at(-time.Minute)}, "If-Modified-Since": {at(0)}}, known, PreconditionFailed},
	}
	for _, tt := range tests {
		r := &http.Request{Method: tt.method, Header: http.Header(tt.header)}
		if got := Preconditions(r, tt.v, now); got != tt.want {
			t.Errorf("%s: Preconditions(%s %v) = %d, want %d", tt.name, tt.method, tt.header, got, tt.want)
		}
		if got := Conditional(r); got != (len(tt.header) > 0) {
			t.Errorf("%s: Conditional = %v", tt.name, got)
		}
	}
}
