package sessions

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

var parseRangeTests = []struct {
	s    string
	size int64
	r    []Range
	err  error
}{
	// No header.
	{"", 0, nil, nil},
	{"", 1000, nil, nil},

	// Not a bytes ranges-specifier: ignored by the caller (full 200), as
	// RFC 9110 §14.2 says for a unit the server does not understand.
	{"foo", 10, nil, ErrMalformed},
	{"bytes", 10, nil, ErrMalformed},
	{"bytes 0-9", 10, nil, ErrMalformed},
	{"bytes:0-9", 10, nil, ErrMalformed},
	{"bytes =0-1", 10, nil, ErrMalformed}, // no BWS before "=": the unit is "bytes "
	{"=0-1", 10, nil, ErrMalformed},
	{"items=0-1", 10, nil, ErrMalformed},
	{"items=0-9", 10, nil, ErrMalformed},
	{"none", 10, nil, ErrMalformed},
	{"byteſ=0-1", 10, nil, ErrMalformed}, // U+017F folds to 's' in Unicode, not in ASCII
	{"bytesbytes=0-1", 10, nil, ErrMalformed},

	// "bytes=" with an invalid range-set (§14.1.1): rejected, 416 (§14.2
	// "MAY ignore or reject"), one bad spec spoiling the whole header.
	{"bytes=", 10, nil, ErrInvalid},
	{"bytes=7", 10, nil, ErrInvalid},
	{"bytes= 7 ", 10, nil, ErrInvalid},
	{"bytes=5-4", 10, nil, ErrInvalid},
	{"bytes=5-2", 10, nil, ErrInvalid},
	{"bytes=20-15", 10, nil, ErrInvalid}, // invalid even though start >= size
	{"bytes=20-10", 100000, nil, ErrInvalid},
	{"bytes=0005-0004", 10, nil, ErrInvalid}, // leading zeros do not hide the order
	{"bytes=0-2,5-4", 10, nil, ErrInvalid},
	{"bytes=0-9,5-2", 10, nil, ErrInvalid},
	{"bytes=2-5,4-3", 10, nil, ErrInvalid},
	{"bytes=--5,4--3", 10, nil, ErrInvalid},
	{"bytes=1-2-3", 10, nil, ErrInvalid},
	{"bytes=-", 10, nil, ErrInvalid},
	{"bytes=--1", 10, nil, ErrInvalid},
	{"bytes=-1-", 10, nil, ErrInvalid},
	{"bytes=-5-", 10, nil, ErrInvalid},
	{"bytes=+1-2", 10, nil, ErrInvalid},
	{"bytes=1-+2", 10, nil, ErrInvalid},
	{"bytes=-+2", 10, nil, ErrInvalid},
	{"bytes=-1-2", 10, nil, ErrInvalid},
	{"bytes=1_0-20", 100, nil, ErrInvalid},
	{"bytes=abc", 10, nil, ErrInvalid},
	{"bytes=A-", 10, nil, ErrInvalid},
	{"bytes=A- ", 10, nil, ErrInvalid},
	{"bytes=A-Z", 10, nil, ErrInvalid},
	{"bytes= -Z", 10, nil, ErrInvalid},
	{"bytes=5-Z", 10, nil, ErrInvalid},
	{"bytes=Ran-dom, garbage", 10, nil, ErrInvalid},
	{"bytes=0x01-0x02", 10, nil, ErrInvalid},
	{"bytes=1e3-", 10000, nil, ErrInvalid},
	{"bytes=１-２", 10, nil, ErrInvalid}, // fullwidth digits are not DIGIT
	{"bytes=         ", 10, nil, ErrInvalid},
	{"bytes= , , ,   ", 10, nil, ErrInvalid},
	{"bytes=,", 10, nil, ErrInvalid},
	{"bytes=0-1;2-3", 10, nil, ErrInvalid},
	{"bytes=0-1 2-3", 10, nil, ErrInvalid},
	{"bytes= 0-1\r\n", 10, nil, ErrInvalid},
	{"bytes==0-1", 10, nil, ErrInvalid},
	{"bytes=0-1=", 10, nil, ErrInvalid},
	{"bytes=0-1,x", 10, nil, ErrInvalid},
	{"bytes=10-,x", 10, nil, ErrInvalid}, // syntax is checked before satisfiability
	{"bytes=0-0,-0,5-4", 10, nil, ErrInvalid},
	// Too long for int64 in both positions: the digits decide.
	{"bytes=99999999999999999999-99999999999999999998", 10, nil, ErrInvalid},
	{"bytes=9223372036854775808-9223372036854775807", 10, nil, ErrInvalid},
	{"bytes=9223372036854775807-9223372036854775806", 10, nil, ErrInvalid},
	{"bytes=100000000000000000000-99999999999999999999", 10, nil, ErrInvalid},

	// Units are case-insensitive (RFC 9110 §14.1).
	{"BYTES=0-0", 10, []Range{{0, 1}}, nil},
	{"Bytes=0-0", 10, []Range{{0, 1}}, nil},

	// Single ranges.
	{"bytes=0-0", 10, []Range{{0, 1}}, nil},
	{"bytes=0-9", 10, []Range{{0, 10}}, nil},
	{"bytes=0-", 10, []Range{{0, 10}}, nil},
	{"bytes=5-", 10, []Range{{5, 5}}, nil},
	{"bytes=9-", 10, []Range{{9, 1}}, nil},
	{"bytes=9-9", 10, []Range{{9, 1}}, nil},
	{"bytes=0-20", 10, []Range{{0, 10}}, nil},
	{"bytes=3-3", 10, []Range{{3, 1}}, nil},
	{"bytes=-5", 10, []Range{{5, 5}}, nil},
	{"bytes=-10", 10, []Range{{0, 10}}, nil},
	{"bytes=-15", 10, []Range{{0, 10}}, nil},
	{"bytes=0-499", 10000, []Range{{0, 500}}, nil},
	{"bytes=500-999", 10000, []Range{{500, 500}}, nil},
	{"bytes=-500", 10000, []Range{{9500, 500}}, nil},
	{"bytes=9500-", 10000, []Range{{9500, 500}}, nil},
	{"bytes=0-0", 1, []Range{{0, 1}}, nil},
	{"bytes=-1", 1, []Range{{0, 1}}, nil},
	{"bytes=1-", 1 << 62, []Range{{1, 1<<62 - 1}}, nil},
	{"bytes=-1", 9223372036854775807, []Range{{9223372036854775806, 1}}, nil},

	// Leading zeros are DIGITs (1*DIGIT, §14.1.1).
	{"bytes=00000000000000000000000000005-", 10, []Range{{5, 5}}, nil},
	{"bytes=0-00000000000000000000000000009", 10, []Range{{0, 10}}, nil},
	{"bytes=000-000", 10, []Range{{0, 1}}, nil},
	{"bytes=-00000000000000000000000000003", 10, []Range{{7, 3}}, nil},
	{"bytes=007-008", 10, []Range{{7, 2}}, nil},

	// A last-pos at or beyond the length is clamped, however long it is
	// (§14.1.2); a first-pos too long for int64 is beyond any length, and a
	// suffix-length too long for int64 selects the whole representation.
	{"bytes=0-9223372036854775807", 10, []Range{{0, 10}}, nil}, // MaxInt64
	{"bytes=0-9223372036854775808", 10, []Range{{0, 10}}, nil}, // MaxInt64+1
	{"bytes=0-99999999999999999999999999", 10, []Range{{0, 10}}, nil},
	{"bytes=0-20000000000000000000", 10, []Range{{0, 10}}, nil}, // 2e19 wraps to a positive int64
	{"bytes=0-1234567890123456789012345678901234567890", 1 << 20, []Range{{0, 1 << 20}}, nil},
	{"bytes=5-18446744073709551616", 1 << 20, []Range{{5, 1<<20 - 5}}, nil},
	{"bytes=9223372036854775806-99999999999999999999", 9223372036854775807, []Range{{9223372036854775806, 1}}, nil},
	{"bytes=-9223372036854775807", 10, []Range{{0, 10}}, nil},
	{"bytes=-9223372036854775808", 10, []Range{{0, 10}}, nil},
	{"bytes=-99999999999999999999999", 1 << 20, []Range{{0, 1 << 20}}, nil},
	{"bytes=-99999999999999999999999999", 10, []Range{{0, 10}}, nil},
	{"bytes=-18446744073709551616", 9223372036854775807, []Range{{0, 9223372036854775807}}, nil},
	{"bytes=9223372036854775808-", 10, nil, ErrUnsatisfiable},
	{"bytes=18446744073709551616-", 1 << 20, nil, ErrUnsatisfiable},
	{"bytes=20000000000000000000-", 10, nil, ErrUnsatisfiable},
	{"bytes=18446744073709551616-", 9223372036854775807, nil, ErrUnsatisfiable},
	{"bytes=18446744073709551616-18446744073709551616", 1 << 20, nil, ErrUnsatisfiable},
	{"bytes=99999999999999999998-99999999999999999999", 10, nil, ErrUnsatisfiable},
	{"bytes=9223372036854775807-9223372036854775808", 10, nil, ErrUnsatisfiable},
	{"bytes=18446744073709551616-,-99999999999999999999999", 1 << 20, []Range{{0, 1 << 20}}, nil},
	{"bytes=0-1,99999999999999999999999999-", 10, []Range{{0, 2}}, nil},

	// OWS around list elements and the whole value, empty list elements
	// (RFC 9110 §5.6.1), and the Apache/net/http laxity inside a spec.
	{"bytes=0-1,,5-6", 10, []Range{{0, 2}, {5, 2}}, nil},
	{"bytes=0-1,,3-4", 10, []Range{{0, 2}, {3, 2}}, nil},
	{"bytes=,0-1", 10, []Range{{0, 2}}, nil},
	{"bytes=0-1,", 10, []Range{{0, 2}}, nil},
	{"bytes=,,0-1,,", 10, []Range{{0, 2}}, nil},
	{" bytes=0-1 ", 10, []Range{{0, 2}}, nil},
	{"\tbytes=0-1\t", 10, []Range{{0, 2}}, nil},
	{"bytes=0-1 , 5-6", 10, []Range{{0, 2}, {5, 2}}, nil},
	{"bytes= 0-1", 10, []Range{{0, 2}}, nil},
	{"bytes=\t0-1\t,\t5-6", 10, []Range{{0, 2}, {5, 2}}, nil},
	{"bytes=-2 , 7-", 11, []Range{{7, 4}}, nil},
	{"bytes=-2 , 6-7", 11, []Range{{9, 2}, {6, 2}}, nil},
	{"bytes=   1 -2   ,  4- 5, 7 - 8 , ,,", 11, []Range{{1, 2}, {4, 2}, {7, 2}}, nil},
	{"bytes=- 3", 10, []Range{{7, 3}}, nil},

	// Unsatisfiable ranges are dropped (RFC 9110 §14.1.2)...
	{"bytes=15-,0-5", 10, []Range{{0, 6}}, nil},
	{"bytes=10-,0-0", 10, []Range{{0, 1}}, nil},
	{"bytes=-0,0-0", 10, []Range{{0, 1}}, nil},
	// ...and if none is left the request is unsatisfiable.
	{"bytes=10-", 10, nil, ErrUnsatisfiable},
	{"bytes=10-20", 10, nil, ErrUnsatisfiable},
	{"bytes=10-,11-,12-", 10, nil, ErrUnsatisfiable},
	{"bytes=-0", 10, nil, ErrUnsatisfiable},
	{"bytes=-0,,-0", 10, nil, ErrUnsatisfiable},
	{"bytes=-000", 10, nil, ErrUnsatisfiable},
	{"bytes=0-", 0, nil, ErrUnsatisfiable},
	{"bytes=0-0", 0, nil, ErrUnsatisfiable},
	{"bytes=-0", 0, nil, ErrUnsatisfiable},
	{"bytes=1-", 0, nil, ErrUnsatisfiable},
	{"bytes=0-", -1, nil, ErrUnsatisfiable},
	// §14.1.2: on an empty representation a non-zero suffix-range is the
	// one satisfiable spec, selecting all of it; no Content-Range can say
	// "0 bytes", so there is nothing to cut and the answer is a 200.
	{"bytes=-1", 0, nil, nil},
	{"bytes=0-0,-1", 0, nil, nil},
	{"bytes=-99999999999999999999", 0, nil, nil},
	{"bytes=-1", -1, nil, nil},
	{"bytes=-1,5-4", 0, nil, ErrInvalid},

	// Several ranges: overlapping and adjacent ones coalesced, the rest in
	// the request's order (RFC 9110 §15.3.7.2); a merged range stands where
	// its first-requested member stood.
	{"bytes=1-2,5-", 10, []Range{{1, 2}, {5, 5}}, nil},
	{"bytes=0-0 ,2-2, 7-", 11, []Range{{0, 1}, {2, 1}, {7, 4}}, nil},
	{"bytes=0-0,-1", 10000, []Range{{0, 1}, {9999, 1}}, nil},
	{"bytes=-1,0-0", 10000, []Range{{9999, 1}, {0, 1}}, nil},
	{"bytes=7-8,1-2", 10, []Range{{7, 2}, {1, 2}}, nil},
	{"bytes=500-599,0-99", 10000, []Range{{500, 100}, {0, 100}}, nil},
	{"bytes=0-99,500-599", 10000, []Range{{0, 100}, {500, 100}}, nil},
	{"bytes=900-,500-599,0-99", 1000, []Range{{900, 100}, {500, 100}, {0, 100}}, nil},
	{"bytes=500-600,601-999", 10000, []Range{{500, 500}}, nil}, // adjacent
	{"bytes=601-999,500-600", 10000, []Range{{500, 500}}, nil},
	{"bytes=500-700,601-999", 10000, []Range{{500, 500}}, nil}, // overlapping
	{"bytes=0-4,5-9", 10, []Range{{0, 10}}, nil},
	{"bytes=0-4,6-9", 10, []Range{{0, 5}, {6, 4}}, nil},
	{"bytes=6-9,0-4", 10, []Range{{6, 4}, {0, 5}}, nil},
	{"bytes=0-9,2-3", 10, []Range{{0, 10}}, nil},
	{"bytes=2-3,0-9", 10, []Range{{0, 10}}, nil},
	{"bytes=0-0,0-0,0-0", 10, []Range{{0, 1}}, nil},
	{"bytes=5-,-5", 10, []Range{{5, 5}}, nil},
	{"bytes=0-4,-5", 10, []Range{{0, 10}}, nil},
	{"bytes=0-,1-,2-,-3", 10, []Range{{0, 10}}, nil},
	{"bytes=8-,0-1,4-5,2-3", 10, []Range{{8, 2}, {0, 6}}, nil},
	{"bytes=500-599,0-9,590-700", 1000, []Range{{500, 201}, {0, 10}}, nil}, // a later member extends it in place
	{"bytes=0-9,500-599,5-19", 1000, []Range{{0, 20}, {500, 100}}, nil},
	{"bytes=0-9,20-29,10-19", 100, []Range{{0, 30}}, nil}, // joined through a later member
	{"bytes=20-29,0-4,10-14,5-9", 100, []Range{{20, 10}, {0, 15}}, nil},
	{"bytes=31-39,20-29,0-4,10-14,5-9", 100, []Range{{31, 9}, {20, 10}, {0, 15}}, nil},
	{"bytes=30-39,0-4,20-29", 100, []Range{{20, 20}, {0, 5}}, nil},
	{"bytes=50-59,0-9,55-", 100, []Range{{50, 50}, {0, 10}}, nil},
	{"bytes=90-,-5,0-0", 100, []Range{{90, 10}, {0, 1}}, nil},
	{"bytes=0-0,90-,-5", 100, []Range{{0, 1}, {90, 10}}, nil},
	{"bytes=200-,50-59,0-9", 100, []Range{{50, 10}, {0, 10}}, nil}, // a dropped spec takes no place

	// MaxRanges: 16 distinct ranges are fine, 17 are too many, unless
	// coalescing brings them back under the limit.
	{rangeList(0, 16, 2), 100, evenRanges(16), nil},
	{rangeList(30, 16, -2), 100, reversed(evenRanges(16)), nil}, // kept in request order
	{rangeList(32, 17, -2), 100, nil, ErrTooManyRanges},
	{rangeList(0, 17, 2), 100, nil, ErrTooManyRanges},
	{rangeList(0, 17, 1), 100, []Range{{0, 17}}, nil},
	{rangeList(0, 17, 2) + ",0-", 100, []Range{{0, 100}}, nil},
	{rangeList(0, 17, 2), 33, nil, ErrTooManyRanges}, // the 17th range is byte 32...
	{rangeList(0, 17, 2), 32, evenRanges(16), nil},   // ...unsatisfiable here, so dropped

	// Defensive limits: probably an attack.
	{"bytes=" + strings.Repeat("0-0,", 999) + "0-0", 100, []Range{{0, 1}}, nil}, // 1000 specs
	{"bytes=" + strings.Repeat("0-0,", 1000) + "0-0", 100, nil, ErrTooManyRanges},
	{"bytes=" + strings.Repeat(",", 1000), 100, nil, ErrTooManyRanges},
	{"bytes=0-0" + strings.Repeat(" ", 8<<10), 100, nil, ErrTooManyRanges},
	{"bytes=0-0" + strings.Repeat(" ", 8<<10-len("bytes=0-0")), 100, []Range{{0, 1}}, nil},
	{"items=" + strings.Repeat(",", 2000), 100, nil, ErrMalformed}, // unit first: not ours to judge
}

// rangeList returns a Range header of n one-byte ranges, step bytes apart.
func rangeList(start, n, step int) string {
	var b strings.Builder
	b.WriteString("bytes=")
	for i := range n {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, "%d-%d", start+i*step, start+i*step)
	}
	return b.String()
}

// evenRanges returns the n one-byte ranges at offsets 0, 2, 4...
func evenRanges(n int) []Range {
	r := make([]Range, n)
	for i := range r {
		r[i] = Range{int64(2 * i), 1}
	}
	return r
}

// reversed returns a reversed copy of r.
func reversed(r []Range) []Range {
	r = slices.Clone(r)
	slices.Reverse(r)
	return r
}

func TestParseRange(t *testing.T) {
	for _, test := range parseRangeTests {
		r, err := ParseRange(test.s, test.size)
		if !errors.Is(err, test.err) || !slices.Equal(r, test.r) {
			t.Errorf("ParseRange(%q, %d) = %v, %v; want %v, %v", test.s, test.size, r, err, test.r, test.err)
		}
	}
}

func TestContentRange(t *testing.T) {
	tests := []struct {
		r    Range
		size int64
		want string
	}{
		{Range{0, 100}, 1000, "bytes 0-99/1000"},
		{Range{0, 1}, 1, "bytes 0-0/1"},
		{Range{999, 1}, 1000, "bytes 999-999/1000"},
		{Range{9223372036854775806, 1}, 9223372036854775807, "bytes 9223372036854775806-9223372036854775806/9223372036854775807"},
	}
	for _, test := range tests {
		if got := test.r.ContentRange(test.size); got != test.want {
			t.Errorf("%v.ContentRange(%d) = %q, want %q", test.r, test.size, got, test.want)
		}
	}
	if got, want := UnsatisfiableContentRange(1000), "bytes */1000"; got != want {
		t.Errorf("UnsatisfiableContentRange(1000) = %q, want %q", got, want)
	}
}

func TestParseRangeErrorsAreDistinct(t *testing.T) {
	errs := []error{ErrMalformed, ErrUnsatisfiable, ErrTooManyRanges}
	for i, a := range errs {
		for j, b := range errs {
			if (i == j) != errors.Is(a, b) {
				t.Errorf("errors.Is(%v, %v) = %v", a, b, errors.Is(a, b))
			}
		}
	}
	// Wrapped errors still match, so callers may add context.
	if err := fmt.Errorf("session %d: %w", 1, ErrUnsatisfiable); !errors.Is(err, ErrUnsatisfiable) {
		t.Errorf("wrapped ErrUnsatisfiable does not match")
	}
}

func BenchmarkParseRange(b *testing.B) {
	const size = 10 << 30
	for _, bm := range []struct {
		name, header string
	}{
		{"single", "bytes=1048576-2097151"},
		{"open", "bytes=1048576-"},
		{"16ranges", rangeList(1<<20, 16, 1<<20)},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ParseRange(bm.header, size); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
