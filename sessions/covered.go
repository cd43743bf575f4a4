package sessions

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
)

// MaxSpans bounds how many disjoint byte ranges a Coverage holds. A
// download manager's pieces join as they arrive, so a transfer has about
// as many gaps as it has connections; 256 leaves room for any client that
// is not trying to bloat its own record, and keeps the encoding under
// 10 KB whatever the offsets.
const MaxSpans = 256

// ErrBadCoverage is what DecodeCoverage returns for anything that is not
// the canonical encoding of a Coverage.
var ErrBadCoverage = errors.New("sessions: malformed coverage")

// Coverage is a set of byte offsets of one representation, such as the
// body bytes a client acknowledged over all the requests of a transfer
// session: disjoint spans in offset order, overlapping and adjacent ranges
// joined as they are added. The zero value is the empty set.
//
// It is bounded to MaxSpans spans. When a union would hold more, its
// shortest spans are dropped (the later one first among equals) until
// MaxSpans remain: the set may then understate what was added, and never
// holds an offset that was not, so evidence built from it never claims a
// byte the client did not acknowledge.
type Coverage struct {
	// spans are sorted by Start, each Length ≥ 1, with a gap of at least
	// one byte between one's end and the next one's Start.
	spans []Range
}

// end is the offset just past r, at most math.MaxInt64.
func end(r Range) int64 {
	if r.Length > math.MaxInt64-r.Start {
		return math.MaxInt64
	}
	return r.Start + r.Length
}

// Add adds the Length bytes from offset Start of r to c. A range with a
// negative Start or a Length below 1 adds nothing; one that would end past
// math.MaxInt64 ends there.
func (c *Coverage) Add(r Range) {
	if r.Start < 0 || r.Length < 1 {
		return
	}
	r.Length = end(r) - r.Start
	c.spans = insert(c.spans, r)
	c.bound()
}

// insert adds r to the canonical spans, joining the spans it overlaps or
// touches.
func insert(spans []Range, r Range) []Range {
	// lo: the first span that ends at or after r starts (it touches or
	// overlaps r, or lies wholly after it).
	lo, _ := slices.BinarySearchFunc(spans, r.Start, func(s Range, start int64) int {
		if end(s) < start {
			return -1
		}
		return 1
	})
	// hi: the first span that starts after r ends, not touching it.
	rEnd := end(r)
	hi := lo
	for hi < len(spans) && spans[hi].Start <= rEnd {
		hi++
	}
	if lo < hi {
		start := min(spans[lo].Start, r.Start)
		stop := max(end(spans[hi-1]), rEnd)
		r = Range{Start: start, Length: stop - start}
	}
	return slices.Replace(spans, lo, hi, r)
}

// Union adds every byte of o to c.
func (c *Coverage) Union(o Coverage) {
	if len(o.spans) == 0 {
		return
	}
	if len(c.spans) == 0 {
		c.spans = slices.Clone(o.spans)
		c.bound()
		return
	}
	for _, r := range o.spans {
		c.spans = insert(c.spans, r)
	}
	c.bound()
}

// bound drops the shortest spans, the later one first among equals, until
// at most MaxSpans remain. The spans left are neither merged nor widened:
// joining two spans across their gap would claim the gap's bytes.
func (c *Coverage) bound() {
	over := len(c.spans) - MaxSpans
	if over <= 0 {
		return
	}
	order := make([]int, len(c.spans))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if d := c.spans[a].Length - c.spans[b].Length; d != 0 {
			if d < 0 {
				return -1
			}
			return 1
		}
		return b - a // the later span of two equal ones goes first
	})
	drop := make([]bool, len(c.spans))
	for _, i := range order[:over] {
		drop[i] = true
	}
	kept := c.spans[:0]
	for i, r := range c.spans {
		if !drop[i] {
			kept = append(kept, r)
		}
	}
	c.spans = kept
}

// Spans returns c's spans in offset order: disjoint, none adjacent to the
// next, each at least one byte long.
func (c Coverage) Spans() []Range { return slices.Clone(c.spans) }

// Len is the number of spans in c.
func (c Coverage) Len() int { return len(c.spans) }

// IsEmpty reports whether c holds no byte.
func (c Coverage) IsEmpty() bool { return len(c.spans) == 0 }

// Bytes is how many bytes of a representation of size bytes c holds:
// offsets from 0 to size-1 only.
func (c Coverage) Bytes(size int64) int64 {
	var n int64
	for _, r := range c.spans {
		if r.Start >= size {
			break
		}
		n += min(end(r), size) - r.Start
	}
	return n
}

// Complete reports whether c holds every offset of a representation of
// size bytes. An empty representation (size ≤ 0) is complete whatever c
// holds.
func (c Coverage) Complete(size int64) bool {
	if size <= 0 {
		return true
	}
	return len(c.spans) > 0 && c.spans[0].Start == 0 && end(c.spans[0]) >= size
}

// Fraction is the share of a representation of size bytes that c holds,
// from 0 to 1: exactly 1 only when c is Complete, so that a fraction
// rounded for display never reads 100 % for an incomplete transfer.
func (c Coverage) Fraction(size int64) float64 {
	if c.Complete(size) {
		return 1
	}
	f := float64(c.Bytes(size)) / float64(size)
	return min(f, math.Nextafter(1, 0))
}

// coverageVersion starts every non-empty encoding: a later format gets
// another, and DecodeCoverage refuses what it does not know.
const coverageVersion = "v1:"

// maxCoverageText bounds what DecodeCoverage reads: MaxSpans spans of two
// 19-digit offsets, a dash and a comma each, and the version.
const maxCoverageText = len(coverageVersion) + MaxSpans*(2*19+2)

// Encode returns c's canonical text, stored in the ledger: "" for the
// empty set, else "v1:" and the spans in offset order as first-last byte
// offsets, inclusive as in an HTTP Range header, separated by commas, as
// in "v1:0-1023,4096-8191". One set has exactly one encoding, and
// DecodeCoverage(c.Encode()) is c.
//
// Text, not binary: an operator reads it in any SQL client, both engines
// store it in a plain text column the same way, and its size does not
// matter at the rate it is written (about once a second per session and
// process): tens of bytes for a typical transfer, under 10 KB at
// MaxSpans.
func (c Coverage) Encode() string {
	if len(c.spans) == 0 {
		return ""
	}
	b := make([]byte, 0, len(coverageVersion)+len(c.spans)*16)
	b = append(b, coverageVersion...)
	for i, r := range c.spans {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, r.Start, 10)
		b = append(b, '-')
		b = strconv.AppendInt(b, end(r)-1, 10)
	}
	return string(b)
}

// DecodeCoverage reads the canonical text Encode writes. Anything else is
// ErrBadCoverage: an unknown version, spaces, signs, leading zeros, a last
// offset below its first, spans out of order, overlapping or adjacent
// (which Encode would have joined), more than MaxSpans, or an offset past
// math.MaxInt64-1.
func DecodeCoverage(s string) (Coverage, error) {
	if s == "" {
		return Coverage{}, nil
	}
	rest, ok := strings.CutPrefix(s, coverageVersion)
	if !ok || rest == "" || len(s) > maxCoverageText {
		return Coverage{}, ErrBadCoverage
	}
	var c Coverage
	next := int64(0) // the least offset the next span may start at
	for rest != "" {
		var span string
		span, rest, ok = strings.Cut(rest, ",")
		if ok && rest == "" {
			return Coverage{}, ErrBadCoverage // a trailing comma
		}
		first, last, dash := strings.Cut(span, "-")
		a, okA := canonicalOffset(first)
		b, okB := canonicalOffset(last)
		if !dash || !okA || !okB || b < a || b == math.MaxInt64 || a < next || len(c.spans) == MaxSpans {
			return Coverage{}, ErrBadCoverage
		}
		c.spans = append(c.spans, Range{Start: a, Length: b - a + 1})
		// Past the byte after b: adjacent spans are one span. A span
		// ending at the last offset leaves room for none after it.
		next = math.MaxInt64
		if b < math.MaxInt64-2 {
			next = b + 2
		}
	}
	return c, nil
}

// canonicalOffset parses a decimal offset as Encode writes it: digits
// only, no leading zero unless it is "0", within int64.
func canonicalOffset(s string) (int64, bool) {
	if s == "" || len(s) > 19 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}
