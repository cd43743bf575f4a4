package sessions

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// spans builds ranges from first-last pairs, inclusive as in Range headers.
func spans(pairs ...int64) []Range {
	out := make([]Range, 0, len(pairs)/2)
	for i := 0; i+1 < len(pairs); i += 2 {
		out = append(out, Range{Start: pairs[i], Length: pairs[i+1] - pairs[i] + 1})
	}
	return out
}

var coverageAddTests = []struct {
	name string
	add  []Range
	want []Range
}{
	{"nothing", nil, nil},
	{"one range", spans(0, 99), spans(0, 99)},
	{"disjoint, kept in order", spans(200, 299, 0, 99), spans(0, 99, 200, 299)},
	{"overlapping join", spans(0, 99, 50, 149), spans(0, 149)},
	{"adjacent join", spans(0, 99, 100, 199), spans(0, 199)},
	{"adjacent from the left", spans(100, 199, 0, 99), spans(0, 199)},
	{"one byte apart stay apart", spans(0, 99, 101, 199), spans(0, 99, 101, 199)},
	{"a range inside another", spans(0, 999, 10, 20), spans(0, 999)},
	{"a range over several", spans(0, 9, 20, 29, 40, 49, 5, 44), spans(0, 49)},
	{"a range bridging two", spans(0, 9, 20, 29, 10, 19), spans(0, 29)},
	{"the same range twice", spans(5, 5, 5, 5), spans(5, 5)},
	{"empty and negative ranges add nothing", []Range{{Start: 3, Length: 0}, {Start: -1, Length: 5}, {Start: 7, Length: -2}}, nil},
	{"an end past MaxInt64 stops there", []Range{{Start: math.MaxInt64 - 1, Length: math.MaxInt64}},
		[]Range{{Start: math.MaxInt64 - 1, Length: 1}}},
	{"a piece split four ways, out of order", spans(750, 999, 0, 249, 500, 749, 250, 499), spans(0, 999)},
}

func TestCoverageAdd(t *testing.T) {
	for _, test := range coverageAddTests {
		var c Coverage
		for _, r := range test.add {
			c.Add(r)
		}
		if got := c.Spans(); !slices.Equal(got, test.want) {
			t.Errorf("%s: Add(%v) = %v, want %v", test.name, test.add, got, test.want)
		}
	}
}

func TestCoverageUnion(t *testing.T) {
	var a, b Coverage
	for _, r := range spans(0, 9, 40, 49, 100, 109) {
		a.Add(r)
	}
	for _, r := range spans(10, 19, 45, 59, 200, 209) {
		b.Add(r)
	}
	ab, ba := a, b
	ab.spans, ba.spans = slices.Clone(a.spans), slices.Clone(b.spans)
	ab.Union(b)
	ba.Union(a)
	want := spans(0, 19, 40, 59, 100, 109, 200, 209)
	if got := ab.Spans(); !slices.Equal(got, want) {
		t.Errorf("a.Union(b) = %v, want %v", got, want)
	}
	if got := ba.Spans(); !slices.Equal(got, want) {
		t.Errorf("b.Union(a) = %v, want %v", got, want)
	}
	if got := a.Spans(); !slices.Equal(got, spans(0, 9, 40, 49, 100, 109)) {
		t.Errorf("a changed under a union into a copy: %v", got)
	}
	var empty Coverage
	empty.Union(a)
	if got := empty.Spans(); !slices.Equal(got, a.Spans()) {
		t.Errorf("empty.Union(a) = %v, want %v", got, a.Spans())
	}
}

func TestCoverageBoundDropsTheShortestSpans(t *testing.T) {
	var c Coverage
	// MaxSpans spans of 2 bytes, every fourth offset, and two one-byte
	// spans: the union would hold MaxSpans+2.
	for i := int64(0); i < MaxSpans; i++ {
		c.Add(Range{Start: 4 * i, Length: 2})
	}
	c.Add(Range{Start: 4*MaxSpans + 10, Length: 1})
	c.Add(Range{Start: 4*MaxSpans + 20, Length: 1})
	if c.Len() != MaxSpans {
		t.Fatalf("Len() = %d, want %d", c.Len(), MaxSpans)
	}
	if got := c.Bytes(1 << 20); got != 2*MaxSpans {
		t.Fatalf("Bytes() = %d, want %d: the two one-byte spans dropped", got, 2*MaxSpans)
	}
	// Among equals the later span goes: a third 2-byte span at the end
	// drops itself rather than the first.
	c.Add(Range{Start: 1 << 19, Length: 2})
	if got := c.Spans(); got[0] != (Range{Start: 0, Length: 2}) || got[len(got)-1] != (Range{Start: 4 * (MaxSpans - 1), Length: 2}) {
		t.Fatalf("after a third equal span: first %v, last %v; want the set unchanged", got[0], got[len(got)-1])
	}
	// A range that fills gaps lowers the count again, without widening
	// anything it does not cover.
	c.Add(Range{Start: 0, Length: 8})
	if got := c.Spans(); got[0] != (Range{Start: 0, Length: 10}) || c.Len() != MaxSpans-2 {
		t.Fatalf("after filling the first gaps: first %v, %d spans; want 0-9 and %d", got[0], c.Len(), MaxSpans-2)
	}
}

func TestCoverageCompleteAndFraction(t *testing.T) {
	cases := []struct {
		add      []Range
		size     int64
		bytes    int64
		complete bool
		fraction float64
	}{
		{nil, 1000, 0, false, 0},
		{spans(0, 999), 1000, 1000, true, 1},
		{spans(0, 1999), 1000, 1000, true, 1},
		{spans(0, 599), 1000, 600, false, 0.6},
		{spans(1, 999), 1000, 999, false, 0.999},
		{spans(0, 499, 500, 999), 1000, 1000, true, 1},
		{spans(0, 249, 750, 999), 1000, 500, false, 0.5},
		{spans(900, 1999), 1000, 100, false, 0.1},
		{spans(2000, 2999), 1000, 0, false, 0},
		{nil, 0, 0, true, 1},
		// One byte short of 2^62: the quotient rounds to 1 in float64,
		// and the fraction still says "not all".
		{[]Range{{Start: 0, Length: 1<<62 - 1}}, 1 << 62, 1<<62 - 1, false, math.Nextafter(1, 0)},
	}
	for _, test := range cases {
		var c Coverage
		for _, r := range test.add {
			c.Add(r)
		}
		if got := c.Bytes(test.size); got != test.bytes {
			t.Errorf("%v.Bytes(%d) = %d, want %d", test.add, test.size, got, test.bytes)
		}
		if got := c.Complete(test.size); got != test.complete {
			t.Errorf("%v.Complete(%d) = %v, want %v", test.add, test.size, got, test.complete)
		}
		if got := c.Fraction(test.size); got != test.fraction {
			t.Errorf("%v.Fraction(%d) = %v, want %v", test.add, test.size, got, test.fraction)
		}
	}
}

var coverageCodingTests = []struct {
	text  string
	spans []Range
}{
	{"", nil},
	{"v1:0-0", spans(0, 0)},
	{"v1:0-1023,4096-8191", spans(0, 1023, 4096, 8191)},
	{"v1:5-9,11-11", spans(5, 9, 11, 11)},
	{"v1:9223372036854775806-9223372036854775806", spans(math.MaxInt64-1, math.MaxInt64-1)},
	{"v1:0-9223372036854775806", spans(0, math.MaxInt64-1)},
}

func TestCoverageEncodeDecode(t *testing.T) {
	for _, test := range coverageCodingTests {
		var c Coverage
		for _, r := range test.spans {
			c.Add(r)
		}
		if got := c.Encode(); got != test.text {
			t.Errorf("Encode(%v) = %q, want %q", test.spans, got, test.text)
		}
		d, err := DecodeCoverage(test.text)
		if err != nil || !slices.Equal(d.Spans(), test.spans) {
			t.Errorf("DecodeCoverage(%q) = %v, %v; want %v", test.text, d.Spans(), err, test.spans)
		}
	}
}

func TestDecodeCoverageRefusesWhatEncodeNeverWrites(t *testing.T) {
	bad := []string{
		"v1:", "v2:0-1", "V1:0-1", "0-1", " v1:0-1", "v1:0-1 ", "v1: 0-1", "v1:0 -1",
		"v1:0-1,", "v1:,0-1", "v1:0-1,,3-4", "v1:1-0", "v1:-1-5", "v1:+1-5", "v1:00-5",
		"v1:0-05", "v1:0-1,2-3", // adjacent: Encode joins them
		"v1:0-5,3-9", "v1:10-19,0-5", "v1:0-1,0-1", "v1:5", "v1:5-", "v1:-5", "v1:a-b",
		"v1:0-9223372036854775807", "v1:0-9223372036854775808", "v1:0-99999999999999999999",
		"v1:9223372036854775806-9223372036854775806,9223372036854775806-9223372036854775806",
		"v1:0x1-0x2", "v1:0-1;2-3", "v1:٣-٤",
		"v1:" + strings.Repeat("0", 5000),
		tooManySpans(),
	}
	for _, s := range bad {
		if c, err := DecodeCoverage(s); !errors.Is(err, ErrBadCoverage) {
			t.Errorf("DecodeCoverage(%.60q) = %v, %v; want ErrBadCoverage", s, c.Spans(), err)
		}
	}
	// MaxSpans is accepted.
	ok := strings.TrimSuffix(tooManySpans(), ",1024-1024")
	if c, err := DecodeCoverage(ok); err != nil || c.Len() != MaxSpans {
		t.Errorf("DecodeCoverage of %d spans = %d spans, %v", MaxSpans, c.Len(), err)
	}
}

// tooManySpans encodes MaxSpans+1 one-byte spans, every fourth offset.
func tooManySpans() string {
	var b strings.Builder
	b.WriteString(coverageVersion)
	for i := 0; i <= MaxSpans; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		n := strconv.Itoa(4 * i)
		b.WriteString(n + "-" + n)
	}
	return b.String()
}

// checkCanonical fails unless c's spans are sorted, each at least a byte,
// with a gap between neighbours, at most MaxSpans, and round-trip.
func checkCanonical(t *testing.T, c Coverage) {
	t.Helper()
	if c.Len() > MaxSpans {
		t.Fatalf("%d spans, more than %d", c.Len(), MaxSpans)
	}
	for i, r := range c.spans {
		if r.Start < 0 || r.Length < 1 {
			t.Fatalf("span %d = %v", i, r)
		}
		if i > 0 && c.spans[i-1].Start+c.spans[i-1].Length >= r.Start {
			t.Fatalf("spans %v and %v overlap or touch", c.spans[i-1], r)
		}
	}
	d, err := DecodeCoverage(c.Encode())
	if err != nil || !slices.Equal(d.spans, c.spans) {
		t.Fatalf("DecodeCoverage(%q) = %v, %v; want %v", c.Encode(), d.spans, err, c.spans)
	}
}

// bitmap is the naive reference: one bool per offset.
type bitmap []bool

func (m bitmap) add(r Range) {
	for i := r.Start; i < r.Start+r.Length && i < int64(len(m)); i++ {
		m[i] = true
	}
}

// runs counts the maximal runs of set offsets: the spans an unbounded
// set would hold.
func (m bitmap) runs() int {
	n := 0
	for i, set := range m {
		if set && (i == 0 || !m[i-1]) {
			n++
		}
	}
	return n
}

// check fails unless c holds only offsets m holds, and, when exact, every
// one of them.
func (m bitmap) check(t *testing.T, c Coverage, exact bool) {
	t.Helper()
	in := make([]bool, len(m))
	for _, r := range c.spans {
		for i := r.Start; i < r.Start+r.Length; i++ {
			if i >= int64(len(m)) || !m[i] {
				t.Fatalf("offset %d in %v was never added", i, c.spans)
			}
			in[i] = true
		}
	}
	if exact && !slices.Equal(in, []bool(m)) {
		t.Fatalf("coverage %v misses offsets the reference holds", c.spans)
	}
	size := int64(len(m))
	var want int64
	for _, set := range in {
		if set {
			want++
		}
	}
	if got := c.Bytes(size); got != want {
		t.Fatalf("Bytes(%d) = %d, want %d", size, got, want)
	}
	if got, complete := c.Complete(size), want == size; got != complete {
		t.Fatalf("Complete(%d) = %v with %d bytes held", size, got, want)
	}
}

// FuzzCoverage adds the ranges data describes (4 bytes each: a 2-byte
// offset and a length within a 4 KiB representation) to two sets, one
// every other range, and checks them (every 16 ranges and at the end) and
// their union against bitmaps:
// while the exact set has no more than MaxSpans runs, equal; once it had
// more, a subset.
func FuzzCoverage(f *testing.F) {
	f.Add([]byte{0, 0, 0, 99})
	f.Add([]byte{0, 0, 0, 10, 0, 20, 0, 10, 0, 10, 0, 10})
	seed := make([]byte, 0, 4*300)
	for i := 0; i < 300; i++ { // 300 one-byte spans, two bytes apart
		seed = append(seed, byte(2*i>>8), byte(2*i), 0, 0)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		const size = 4096
		var (
			sets     [2]Coverage
			refs     = [2]bitmap{make(bitmap, size), make(bitmap, size)}
			all      = make(bitmap, size)
			exact    = [2]bool{true, true}
			allExact = true
		)
		for i := 0; i+4 <= len(data); i += 4 {
			start := int64(data[i])<<8 | int64(data[i+1])
			start %= size
			length := (int64(data[i+2])<<8 | int64(data[i+3])) % 64
			r := Range{Start: start, Length: min(length, size-start)}
			k := (i / 4) % 2
			sets[k].Add(r)
			if r.Length > 0 {
				refs[k].add(r)
				all.add(r)
			}
			exact[k] = exact[k] && refs[k].runs() <= MaxSpans
			allExact = allExact && exact[k]
			if i%64 == 0 || i+8 > len(data) {
				checkCanonical(t, sets[k])
				refs[k].check(t, sets[k], exact[k])
			}
		}
		u := sets[0]
		u.spans = slices.Clone(sets[0].spans)
		u.Union(sets[1])
		checkCanonical(t, u)
		all.check(t, u, allExact && all.runs() <= MaxSpans)
	})
}

// FuzzDecodeCoverage: whatever the text, decoding never panics, and what
// it accepts is canonical and encodes back to the same text.
func FuzzDecodeCoverage(f *testing.F) {
	for _, test := range coverageCodingTests {
		f.Add(test.text)
	}
	f.Add("v1:0-1,2-3")
	f.Add("v1:0-5,3-9")
	f.Add("v1:00-1")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := DecodeCoverage(s)
		if err != nil {
			if !errors.Is(err, ErrBadCoverage) || !c.IsEmpty() {
				t.Fatalf("DecodeCoverage(%q) = %v, %v", s, c.spans, err)
			}
			return
		}
		checkCanonical(t, c)
		if got := c.Encode(); got != s {
			t.Fatalf("DecodeCoverage(%q).Encode() = %q", s, got)
		}
	})
}

func BenchmarkCoverageAdd(b *testing.B) {
	// A download manager's pieces: 1 MiB each, four connections.
	for b.Loop() {
		var c Coverage
		for piece := int64(0); piece < 256; piece++ {
			c.Add(Range{Start: (piece%4)*64<<20 + piece/4<<20, Length: 1 << 20})
		}
	}
}
