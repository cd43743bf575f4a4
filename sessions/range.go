// Package sessions holds the pure policy of transfer sessions: Range and
// If-Range evaluation, multipart/byteranges framing, byte-budget chunking and
// session defaults. It does no I/O and imports nothing from this module, so
// the gateway, the ledger and the tests can all share one definition.
package sessions

import (
	"errors"
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

	// Thousands of tiny specs that coalesce into a few ranges still cost a
	// sort per request: probably an attack, so count them before allocating.
	maxRangeSpecs = 1000
)

// Errors returned by ParseRange. Compare with errors.Is.
var (
	// ErrMalformed means the Range header is not a valid bytes range-set.
	// RFC 9110 §14.2 lets the server ignore it: answer 200 with the whole
	// representation, exactly as if there were no Range header.
	ErrMalformed = errors.New("sessions: malformed Range header")

	// ErrUnsatisfiable means the header is valid but no range overlaps the
	// representation (RFC 9110 §14.1.3). Answer 416 with
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
// representation of size bytes and returns the satisfiable ranges, sorted by
// Start, with overlapping and adjacent ranges coalesced.
//
// An empty header returns nil, nil. Otherwise the error is one of:
//   - ErrMalformed: the unit is not "bytes" or the range-set is not valid
//     (including numbers that overflow int64); the caller should ignore the
//     header and serve the whole representation.
//   - ErrUnsatisfiable: every range starts at or beyond size, or is a
//     zero-length suffix; always so when size is 0 (or negative).
//   - ErrTooManyRanges: more than MaxRanges ranges remain after coalescing,
//     or the header is unreasonably large.
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
	sawSpec := false
	for spec := range strings.SplitSeq(set, ",") {
		// RFC 9110 §5.6.1: recipients accept empty list elements and OWS
		// around them.
		spec = trimOWS(spec)
		if spec == "" {
			continue
		}
		first, last, ok := strings.Cut(spec, "-")
		if !ok {
			return nil, ErrMalformed
		}
		// The §14.1.1 grammar has no whitespace around "-"; like net/http
		// (and Apache) we tolerate it, since the meaning is unambiguous.
		first, last = trimOWS(first), trimOWS(last)
		sawSpec = true

		if first == "" {
			// suffix-range: the last n bytes.
			n, ok := parseDigits(last)
			if !ok {
				return nil, ErrMalformed
			}
			// RFC 9110 §14.1.3: a zero suffix-length is unsatisfiable, and a
			// suffix longer than the representation selects all of it.
			if n == 0 || size == 0 {
				continue
			}
			n = min(n, size)
			ranges = append(ranges, Range{Start: size - n, Length: n})
			continue
		}

		start, ok := parseDigits(first)
		if !ok {
			return nil, ErrMalformed
		}
		end := int64(-1) // open int-range: up to the last byte
		if last != "" {
			end, ok = parseDigits(last)
			// RFC 9110 §14.1.1: last-pos < first-pos makes the int-range
			// invalid, which is a syntax problem, not an unsatisfiable one,
			// even when start is beyond size (net/http checks this only for
			// starts inside the representation).
			if !ok || end < start {
				return nil, ErrMalformed
			}
		}
		if start >= size {
			continue // §14.1.3: does not overlap the representation
		}
		if end < 0 || end >= size {
			end = size - 1 // §14.1.2: last-pos beyond the end is clamped
		}
		ranges = append(ranges, Range{Start: start, Length: end - start + 1})
	}
	if !sawSpec {
		// range-set is 1#range-spec: at least one non-empty element.
		return nil, ErrMalformed
	}
	if len(ranges) == 0 {
		return nil, ErrUnsatisfiable
	}

	// RFC 9110 §15.3.7.2 allows coalescing overlapping ranges and those with
	// small gaps; we coalesce overlapping and adjacent ones so that a client
	// cannot make us send the same bytes twice against its byte budget
	// (net/http instead ignores the header when the ranges add up to more
	// than size). Returning them sorted deviates from the §15.3.7.2 SHOULD
	// to keep the request's order of parts; download managers do not depend
	// on it, and one canonical plan per header is simpler to check.
	ranges = coalesce(ranges)
	if len(ranges) > MaxRanges {
		return nil, ErrTooManyRanges
	}
	return ranges, nil
}

// coalesce sorts ranges by start and merges overlapping and adjacent ones
// in place.
func coalesce(ranges []Range) []Range {
	if len(ranges) < 2 {
		return ranges
	}
	slices.SortFunc(ranges, func(a, b Range) int {
		switch {
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return 0
	})
	out := ranges[:1]
	for _, r := range ranges[1:] {
		cur := &out[len(out)-1]
		// Both ends are <= size, so these sums cannot overflow.
		curEnd := cur.Start + cur.Length
		if r.Start <= curEnd {
			cur.Length = max(curEnd, r.Start+r.Length) - cur.Start
			continue
		}
		out = append(out, r)
	}
	return out
}

// parseDigits parses 1*DIGIT as a non-negative int64. Unlike
// strconv.ParseInt it refuses signs and underscores, which the grammar of
// RFC 9110 §14.1.1 does not allow; ok is false on overflow.
func parseDigits(s string) (n int64, ok bool) {
	if s == "" {
		return 0, false
	}
	const cutoff = (1<<63 - 1) / 10
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > cutoff {
			return 0, false
		}
		n = n*10 + int64(c-'0')
		if n < 0 {
			return 0, false
		}
	}
	return n, true
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
