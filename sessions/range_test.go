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

	// Malformed: ignored by the caller (full 200).
	{"foo", 10, nil, ErrMalformed},
	{"bytes", 10, nil, ErrMalformed},
	{"bytes=", 10, nil, ErrMalformed},
	{"bytes=7", 10, nil, ErrMalformed},
	{"bytes= 7 ", 10, nil, ErrMalformed},
	{"bytes=5-4", 10, nil, ErrMalformed},
	{"bytes=5-2", 10, nil, ErrMalformed},
	{"bytes=20-15", 10, nil, ErrMalformed}, // invalid even though start >= size
	{"bytes=0-2,5-4", 10, nil, ErrMalformed},
	{"bytes=2-5,4-3", 10, nil, ErrMalformed},
	{"bytes=--5,4--3", 10, nil, ErrMalformed},
	{"bytes=1-2-3", 10, nil, ErrMalformed},
	{"bytes=-", 10, nil, ErrMalformed},
	{"bytes=--1", 10, nil, ErrMalformed},
	{"bytes=-1-", 10, nil, ErrMalformed},
	{"bytes=-5-", 10, nil, ErrMalformed},
	{"bytes=+1-2", 10, nil, ErrMalformed},
	{"bytes=1-+2", 10, nil, ErrMalformed},
	{"bytes=-+2", 10, nil, ErrMalformed},
	{"bytes=1_0-20", 100, nil, ErrMalformed},
	{"bytes=abc", 10, nil, ErrMalformed},
	{"bytes=A-", 10, nil, ErrMalformed},
	{"bytes=A- ", 10, nil, ErrMalformed},
	{"bytes=A-Z", 10, nil, ErrMalformed},
	{"bytes= -Z", 10, nil, ErrMalformed},
	{"bytes=5-Z", 10, nil, ErrMalformed},
	{"bytes=Ran-dom, garbage", 10, nil, ErrMalformed},
	{"bytes=0x01-0x02", 10, nil, ErrMalformed},
	{"bytes=１-２", 10, nil, ErrMalformed}, // fullwidth digits are not DIGIT
	{"bytes=         ", 10, nil, ErrMalformed},
	{"bytes= , , ,   ", 10, nil, ErrMalformed},
	{"bytes=,", 10, nil, ErrMalformed},
	{"bytes=0-1;2-3", 10, nil, ErrMalformed},
	{"bytes =0-1", 10, nil, ErrMalformed},
	{"bytes= 0-1\r\n", 10, nil, ErrMalformed},
	{"items=0-1", 10, nil, ErrMalformed},
	{"none", 10, nil, ErrMalformed},
	{"byteſ=0-1", 10, nil, ErrMalformed},                          // U+017F folds to 's' in Unicode, not in ASCII
	{"bytes=9223372036854775808-", 10, nil, ErrMalformed},         // MaxInt64+1
	{"bytes=0-9223372036854775808", 10, nil, ErrMalformed},        // MaxInt64+1
	{"bytes=-9223372036854775808", 10, nil, ErrMalformed},         // MaxInt64+1
	{"bytes=0-99999999999999999999999999", 10, nil, ErrMalformed}, // overflow
	{"bytes=-99999999999999999999999999", 10, nil, ErrMalformed},  // overflow
	{"bytes=20000000000000000000-", 10, nil, ErrMalformed},        // 2e19 wraps to a positive int64
	{"bytes=0-20000000000000000000", 10, nil, ErrMalformed},
	{"bytes=0-1,99999999999999999999999999-", 10, nil, ErrMalformed}, // one bad spec spoils all

	// Units are case-insensitive (RFC 9110 §14.1).
	{"BYTES=0-0", 10, []Range{{0, 1}}, nil},
	{"Bytes=0-0", 10, []Range{{0, 1}}, nil},

	// Single ranges.
	{"bytes=0-9", 10, []Range{{0, 10}}, nil},
	{"bytes=0-", 10, []Range{{0, 10}}, nil},
	{"bytes=5-", 10, []Range{{5, 5}}, nil},
	{"bytes=9-", 10, []Range{{9, 1}}, nil},
	{"bytes=0-20", 10, []Range{{0, 10}}, nil},
	{"bytes=3-3", 10, []Range{{3, 1}}, nil},
	{"bytes=-5", 10, []Range{{5, 5}}, nil},
	{"bytes=-10", 10, []Range{{0, 10}}, nil},
	{"bytes=-15", 10, []Range{{0, 10}}, nil},
	{"bytes=0-499", 10000, []Range{{0, 500}}, nil},
	{"bytes=500-999", 10000, []Range{{500, 500}}, nil},
	{"bytes=-500", 10000, []Range{{9500, 500}}, nil},
	{"bytes=9500-", 10000, []Range{{9500, 500}}, nil},
	{"bytes=0-9223372036854775807", 10, []Range{{0, 10}}, nil}, // MaxInt64 is fine
	{"bytes=-9223372036854775807", 10, []Range{{0, 10}}, nil},
	{"bytes=00000000000000000000000000005-", 10, []Range{{5, 5}}, nil}, // leading zeros are DIGITs
	{"bytes=0-0", 1, []Range{{0, 1}}, nil},
	{"bytes=-1", 1, []Range{{0, 1}}, nil},
	{"bytes=1-", 1 << 62, []Range{{1, 1<<62 - 1}}, nil},
	{"bytes=-1", 9223372036854775807, []Range{{9223372036854775806, 1}}, nil},

	// OWS around list elements and the whole value, empty list elements
	// (RFC 9110 §5.6.1), and the Apache/net/http laxity inside a spec.
	{"bytes=0-1,,3-4", 10, []Range{{0, 2}, {3, 2}}, nil},
	{"bytes=,0-1", 10, []Range{{0, 2}}, nil},
	{"bytes=0-1,", 10, []Range{{0, 2}}, nil},
	{" bytes=0-1 ", 10, []Range{{0, 2}}, nil},
	{"bytes=\t0-1\t,\t5-6", 10, []Range{{0, 2}, {5, 2}}, nil},
	{"bytes=-2 , 7-", 11, []Range{{7, 4}}, nil},
	{"bytes=   1 -2   ,  4- 5, 7 - 8 , ,,", 11, []Range{{1, 2}, {4, 2}, {7, 2}}, nil},

	// Unsatisfiable ranges are dropped (RFC 9110 §14.1.3)...
	{"bytes=15-,0-5", 10, []Range{{0, 6}}, nil},
	{"bytes=10-,0-0", 10, []Range{{0, 1}}, nil},
	{"bytes=-0,0-0", 10, []Range{{0, 1}}, nil},
	// ...and if none is left the request is unsatisfiable.
	{"bytes=10-", 10, nil, ErrUnsatisfiable},
	{"bytes=10-20", 10, nil, ErrUnsatisfiable},
	{"bytes=10-,11-,12-", 10, nil, ErrUnsatisfiable},
	{"bytes=-0", 10, nil, ErrUnsatisfiable},
	{"bytes=-0,,-0", 10, nil, ErrUnsatisfiable},
	{"bytes=0-", 0, nil, ErrUnsatisfiable},
	{"bytes=0-0", 0, nil, ErrUnsatisfiable},
	{"bytes=-1", 0, nil, ErrUnsatisfiable},
	{"bytes=-0", 0, nil, ErrUnsatisfiable},
	{"bytes=1-", 0, nil, ErrUnsatisfiable},
	{"bytes=0-", -1, nil, ErrUnsatisfiable},
	// Syntax is checked before satisfiability.
	{"bytes=10-,x", 10, nil, ErrMalformed},

	// Several ranges: sorted, overlapping and adjacent ones coalesced.
	{"bytes=1-2,5-", 10, []Range{{1, 2}, {5, 5}}, nil},
	{"bytes=0-0 ,2-2, 7-", 11, []Range{{0, 1}, {2, 1}, {7, 4}}, nil},
	{"bytes=0-0,-1", 10000, []Range{{0, 1}, {9999, 1}}, nil},
	{"bytes=-1,0-0", 10000, []Range{{0, 1}, {9999, 1}}, nil},
	{"bytes=7-8,1-2", 10, []Range{{1, 2}, {7, 2}}, nil},
	{"bytes=500-600,601-999", 10000, []Range{{500, 500}}, nil}, // adjacent
	{"bytes=500-700,601-999", 10000, []Range{{500, 500}}, nil}, // overlapping
	{"bytes=0-4,5-9", 10, []Range{{0, 10}}, nil},
	{"bytes=0-4,6-9", 10, []Range{{0, 5}, {6, 4}}, nil},
	{"bytes=0-9,2-3", 10, []Range{{0, 10}}, nil},
	{"bytes=2-3,0-9", 10, []Range{{0, 10}}, nil},
	{"bytes=0-0,0-0,0-0", 10, []Range{{0, 1}}, nil},
	{"bytes=5-,-5", 10, []Range{{5, 5}}, nil},
	{"bytes=0-4,-5", 10, []Range{{0, 10}}, nil},
	{"bytes=0-,1-,2-,-3", 10, []Range{{0, 10}}, nil},
	{"bytes=8-,0-1,4-5,2-3", 10, []Range{{0, 6}, {8, 2}}, nil},

	// MaxRanges: 16 distinct ranges are fine, 17 are too many, unless
	// coalescing brings them back under the limit.
	{rangeList(0, 16, 2), 100, evenRanges(16), nil},
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
