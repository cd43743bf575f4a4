// Package sessions holds the pure policy of transfer sessions: Range and
// If-Range evaluation, multipart/byteranges framing, byte-budget chunking and
// session defaults. It does no I/O and imports nothing from this module, so
// the gateway, the ledger and the tests can all share one definition.
package sessions

import (
	"cmp"
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
)

// MaxRanges is the largest number of ranges, after coalescing, that one
// request may ask for. RFC 9110 §14.2 lets a server reject a Range header
// with "more than some threshold number of ranges"; a download manager
// splitting a file never needs more than a handful.
const MaxRanges = 16

const (
	// A legitimate Range header is a few dozen bytes. Anything bigger than
	// this is probably an attack (or a broken client), and refusing it before
	// scanning keeps the parser's work and allocations bounded.
	maxRangeHeaderLen = 8 << 10

	// Thousands of tiny specs that coalesce into a few ranges still cost
	// sorting per request: probably an attack, so count them before
	// allocating.
	maxRangeSpecs = 1000
)

// Errors returned by ParseRange. Compare with errors.Is.
var (
	// ErrMalformed means the Range header is not a bytes ranges-specifier
	// at all: another range unit, no "=", or garbage. RFC 9110 §14.2 says
	// an origin server MUST ignore a Range with a unit it does not
	// understand: answer 200 with the whole representation, exactly as if
	// there were no Range header.
	ErrMalformed = errors.New("sessions: malformed Range header")

	// ErrInvalid means the header is "bytes=" followed by a range-set that
	// is not valid (RFC 9110 §14.1.1): a spec that is not an int-range or a
	// suffix-range ("Byte ranges do not use the other-range specifier",
	// §14.1.2), a last-pos below its first-pos, or no spec at all.
	// §14.2 lets a server "ignore or reject" an invalid ranges-specifier;
	// we reject it with 416 and UnsatisfiableContentRange(size), because
	// ignoring it would serve, and charge to a session's byte budget, the
	// whole representation for a request that asked for part of it.
	ErrInvalid = errors.New("sessions: invalid bytes range-set")

	// ErrUnsatisfiable means the header is valid but no range overlaps the
	// representation (RFC 9110 §14.1.2, §15.5.17). Answer 416 with
	// UnsatisfiableContentRange(size).
	ErrUnsatisfiable = errors.New("sessions: range not satisfiable")

	// ErrTooManyRanges means the header asks for more than MaxRanges
	// distinct ranges, or is too large to be worth parsing. Answer 416.
	ErrTooManyRanges = errors.New("sessions: too many ranges")
)

// Range is a satisfiable byte range of a representation: Length bytes from
// offset Start. Ranges returned by ParseRange always have Length >= 1 and
// end within the representation.
type Range struct {
	Start, Length int64
}

// ContentRange returns the Content-Range field value of r for a
// representation of size bytes, as in "bytes 0-99/1000" (RFC 9110 §14.4).
func (r Range) ContentRange(size int64) string {
	b := make([]byte, 0, 64)
	b = append(b, "bytes "...)
	b = strconv.AppendInt(b, r.Start, 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, r.Start+r.Length-1, 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, size, 10)
	return string(b)
}

// UnsatisfiableContentRange returns the Content-Range field value a 416
// response carries, "bytes */SIZE" (RFC 9110 §14.4, §15.5.17).
func UnsatisfiableContentRange(size int64) string {
	return "bytes */" + strconv.FormatInt(size, 10)
}

// ParseRange parses a Range header field value (RFC 9110 §14.2) against a
// representation of size bytes and returns the satisfiable ranges in the
// order the header asked for them, with overlapping and adjacent ranges
// coalesced (see coalesce).
//
// It returns nil, nil when header is empty, and also when size is 0 and the
// range-set is satisfiable: §14.1.2 calls a non-zero suffix-range
// satisfiable even on an empty representation and has it select all of it,
// which no 206 Content-Range can describe, and §14.2 lets a server ignore
// Range on a representation of zero length, so the caller serves the whole
// (empty) representation with 200. Otherwise the error is one of:
//   - ErrMalformed: not a bytes ranges-specifier (another unit, no "=");
//     the caller must ignore the header and serve the whole representation.
//   - ErrInvalid: "bytes=" with an invalid range-set; the caller answers 416.
//   - ErrUnsatisfiable: every range starts at or beyond size, or is a
//     zero-length suffix (§14.1.2); always so when size is 0 (or negative)
//     and there is no non-zero suffix-range.
//   - ErrTooManyRanges: more than MaxRanges ranges remain after coalescing,
//     or the header is unreasonably large.
//
// Numbers too long for int64 are valid (1*DIGIT has no upper bound): a
// first-pos that large is beyond any representation, a last-pos or a
// suffix-length that large is beyond its end and clamped (§14.1.2).
//
// On success the result is non-empty and holds at most MaxRanges ranges.
func ParseRange(header string, size int64) ([]Range, error) {
	if header == "" {
		return nil, nil
	}
	unit, set, ok := strings.Cut(trimOWS(header), "=")
	// RFC 9110 §14.1: range units are case-insensitive. Only "bytes" exists
	// for us; §14.2 says to ignore a Range with an unknown unit.
	if !ok || !asciiEqualFold(unit, "bytes") {
		return nil, ErrMalformed
	}
	specs := strings.Count(set, ",") + 1
	if len(header) > maxRangeHeaderLen || specs > maxRangeSpecs {
		return nil, ErrTooManyRanges
	}
	if size < 0 {
		size = 0
	}

	// One allocation, bounded by maxRangeSpecs.
	ranges := make([]Range, 0, specs)
	sawSpec, emptySatisfiable := false, false
	for spec := range strings.SplitSeq(set, ",") {
		// RFC 9110 §5.6.1: recipients accept empty list elements and OWS
		// around them.
		spec = trimOWS(spec)
		if spec == "" {
			continue
		}
		first, last, ok := strings.Cut(spec, "-")
		if !ok {
			return nil, ErrInvalid
		}
		// The §14.1.1 grammar has no whitespace around "-"; like net/http
		// (and Apache) we tolerate it, since the meaning is unambiguous.
		first, last = trimOWS(first), trimOWS(last)
		sawSpec = true

		if first == "" {
			// suffix-range: the last n bytes.
			n, ok := parseDigits(last)
			if !ok {
				return nil, ErrInvalid
			}
			// RFC 9110 §14.1.2: a zero suffix-length is unsatisfiable, and a
			// suffix longer than the representation selects all of it.
			if n == 0 {
				continue
			}
			if size == 0 {
				emptySatisfiable = true
				continue
			}
			n = min(n, size)
			ranges = append(ranges, Range{Start: size - n, Length: n})
			continue
		}

		start, ok := parseDigits(first)
		if !ok {
			return nil, ErrInvalid
		}
		end := int64(-1) // open int-range: up to the last byte
		if last != "" {
			end, ok = parseDigits(last)
			// RFC 9110 §14.1.1: last-pos < first-pos makes the int-range
			// invalid, which is a syntax problem, not an unsatisfiable one,
			// even when start is beyond size (net/http checks this only for
			// starts inside the representation).
			if !ok || lessDigits(last, end, first, start) {
				return nil, ErrInvalid
			}
		}
		if start >= size {
			continue // §14.1.2: does not overlap the representation
		}
		if end < 0 || end >= size {
			end = size - 1 // §14.1.2: last-pos beyond the end is clamped
		}
		ranges = append(ranges, Range{Start: start, Length: end - start + 1})
	}
	if !sawSpec {
		// range-set is 1#range-spec: at least one non-empty element.
		return nil, ErrInvalid
	}
	if emptySatisfiable {
		return nil, nil
	}
	if len(ranges) == 0 {
		return nil, ErrUnsatisfiable
	}

	// RFC 9110 §15.3.7.2 allows coalescing overlapping ranges and those with
	// small gaps; we coalesce overlapping and adjacent ones so that a client
	// cannot make us send the same bytes twice against its byte budget
	// (net/http instead ignores the header when the ranges add up to more
	// than size).
	ranges = coalesce(ranges)
	if len(ranges) > MaxRanges {
		return nil, ErrTooManyRanges
	}
	return ranges, nil
}

// coalesce merges every group of ranges that overlap or are adjacent,
// directly or through other ranges of the group, into the one range that
// is their union, and puts it where the group's first-requested member
// was. The rest keeps the request's order, as RFC 9110 §15.3.7.2 says a
// server SHOULD (bytes=500-599,0-99 gives 500-599 first): only merged
// ranges move, and the result does not depend on the order of the members
// of a group after its first.
func coalesce(ranges []Range) []Range {
	if len(ranges) < 2 {
		return ranges
	}
	// Merge in offset order, remembering for each merged range the
	// smallest request index among its members; then order the merged
	// ranges by that index. Both sorts are over at most maxRangeSpecs.
	type member struct {
		Range
		first int // request index of the group's first-requested member
	}
	byStart := make([]member, len(ranges))
	for i, r := range ranges {
		byStart[i] = member{r, i}
	}
	slices.SortFunc(byStart, func(a, b member) int { return cmp.Compare(a.Start, b.Start) })
	out := byStart[:1]
	for _, r := range byStart[1:] {
		cur := &out[len(out)-1]
		// Both ends are <= size, so these sums cannot overflow.
		curEnd := cur.Start + cur.Length
		if r.Start <= curEnd {
			cur.Length = max(curEnd, r.Start+r.Length) - cur.Start
			cur.first = min(cur.first, r.first)
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b member) int { return cmp.Compare(a.first, b.first) })
	ranges = ranges[:len(out)]
	for i, m := range out {
		ranges[i] = m.Range
	}
	return ranges
}

// parseDigits parses 1*DIGIT as a non-negative int64, saturating at
// math.MaxInt64. RFC 9110 §14.1.2: "recipients MUST anticipate potentially
// large decimal numerals and prevent parsing errors due to integer
// conversion overflows". No size exceeds math.MaxInt64, so a saturated
// first-pos is still beyond the end, and a saturated last-pos or
// suffix-length still clamps to it: a number too long for int64 is not a
// syntax error. Unlike strconv.ParseInt it refuses signs and underscores, which
// the grammar does not allow; ok is false only for an empty s or a
// non-digit.
func parseDigits(s string) (n int64, ok bool) {
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if d := int64(c - '0'); n <= (math.MaxInt64-d)/10 {
			n = n*10 + d
		} else {
			n = math.MaxInt64
		}
	}
	return n, true
}

// lessDigits reports whether the decimal number a is less than b, given
// their values saturated by parseDigits. Only when both saturated do the
// digits themselves decide, so that bytes=99999999999999999999-
// 99999999999999999998 is still a last-pos below its first-pos.
func lessDigits(a string, av int64, b string, bv int64) bool {
	if av != math.MaxInt64 || bv != math.MaxInt64 {
		return av < bv
	}
	a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}

// trimOWS removes optional whitespace (SP and HTAB, RFC 9110 §5.6.3) from
// both ends of s.
func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// asciiEqualFold reports whether s and t are equal under ASCII case folding.
// strings.EqualFold is not used because it folds Unicode too, and would
// accept "byteſ" (U+017F LATIN SMALL LETTER LONG S) as "bytes".
func asciiEqualFold(s, t string) bool {
	if len(s) != len(t) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if lowerASCII(s[i]) != lowerASCII(t[i]) {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + ('a' - 'A')
	}
	return c
}
