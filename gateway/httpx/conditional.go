package httpx

import (
	"net/http"
	"strings"
	"time"
)

// Conditional requests (RFC 9110 §13) on an object version: a pinned,
// immutable version has one strong ETag and, when the store knows it, a
// Last-Modified time, and that is all the preconditions are judged
// against. The shape follows net/http's fs.go: one function per header,
// each three-valued, combined in one place in the order of §13.2.2.

// Validators are what a representation is judged by.
type Validators struct {
	ETag         string    // strong, quotes included: `"abc"`; "" when unknown
	LastModified time.Time // zero when unknown
}

// Outcome is what the preconditions of a request decide.
type Outcome int

const (
	// Proceed: no precondition stops the request; If-Range and Range come
	// next (§13.2.2 step 5).
	Proceed Outcome = iota
	// NotModified: 304, with the validators and no body (§15.4.5).
	NotModified
	// PreconditionFailed: 412 (§15.5.13).
	PreconditionFailed
)

// cond is one precondition's result: not present (or to be ignored),
// true, or false.
type cond int

const (
	condNone cond = iota
	condTrue
	condFalse
)

// Preconditions evaluates r's If-Match, If-Unmodified-Since,
// If-None-Match and If-Modified-Since against v at now, in RFC 9110
// §13.2.2's order:
//
//  1. If-Match, when present: false → 412.
//  2. Without If-Match, If-Unmodified-Since: false → 412.
//  3. If-None-Match, when present: false → 304 for GET and HEAD, 412
//     for any other method.
//  4. Without If-None-Match, for GET and HEAD, If-Modified-Since: false →
//     304.
//
// If-Range is not a precondition of the request but of its Range
// (§13.1.5): IfRange decides it, after these.
func Preconditions(r *http.Request, v Validators, now time.Time) Outcome {
	safe := r.Method == http.MethodGet || r.Method == http.MethodHead
	c := checkIfMatch(r.Header.Values("If-Match"), v)
	if c == condNone {
		c = checkIfUnmodifiedSince(r.Header.Values("If-Unmodified-Since"), v)
	}
	if c == condFalse {
		return PreconditionFailed
	}
	switch checkIfNoneMatch(r.Header.Values("If-None-Match"), v) {
	case condFalse:
		if safe {
			return NotModified
		}
		return PreconditionFailed
	case condNone:
		if safe && checkIfModifiedSince(r.Header.Values("If-Modified-Since"), v, now) == condFalse {
			return NotModified
		}
	}
	return Proceed
}

// Conditional reports whether r carries any precondition Preconditions
// evaluates: without one, Preconditions is Proceed whatever the
// representation, so a caller that must look the representation up first
// (a link before its claim) need not.
func Conditional(r *http.Request) bool {
	h := r.Header
	return len(h["If-Match"]) > 0 || len(h["If-None-Match"]) > 0 ||
		len(h["If-Modified-Since"]) > 0 || len(h["If-Unmodified-Since"]) > 0
}

// checkIfMatch (§13.1.1): "*" is true (the version exists); a list is
// true when one of its entity-tags matches v's by the strong comparison
// (§8.8.3.2: a weak tag never does). A field that is not a list of
// entity-tags is false: the client's condition cannot be met, and
// serving anyway is what If-Match exists to prevent.
func checkIfMatch(values []string, v Validators) cond {
	if len(values) == 0 {
		return condNone
	}
	field := strings.Join(values, ",")
	if trimOWS(field) == "*" {
		return condTrue
	}
	tags, ok := etagList(field)
	if !ok {
		return condFalse
	}
	for _, t := range tags {
		if v.ETag != "" && strongMatch(t, v.ETag) {
			return condTrue
		}
	}
	return condFalse
}

// checkIfNoneMatch (§13.1.2): "*" is false (the version exists); a list
// is false when one of its entity-tags matches v's by the weak comparison
// (§8.8.3.2). A field that is not a list of entity-tags is ignored, as
// net/http does: a 304 must only answer a validator the client holds.
func checkIfNoneMatch(values []string, v Validators) cond {
	if len(values) == 0 {
		return condNone
	}
	field := strings.Join(values, ",")
	if trimOWS(field) == "*" {
		return condFalse
	}
	tags, ok := etagList(field)
	if !ok {
		return condNone
	}
	for _, t := range tags {
		if v.ETag != "" && weakMatch(t, v.ETag) {
			return condFalse
		}
	}
	return condTrue
}

// checkIfUnmodifiedSince (§13.1.4): ignored without a known Last-Modified,
// for a field that is not one valid HTTP-date, or (by the caller) with
// If-Match; false when the version changed after the date.
func checkIfUnmodifiedSince(values []string, v Validators) cond {
	t, ok := singleDate(values)
	if !ok || v.LastModified.IsZero() {
		return condNone
	}
	if v.LastModified.Truncate(time.Second).After(t) {
		return condFalse
	}
	return condTrue
}

// checkIfModifiedSince (§13.1.3): ignored without a known Last-Modified,
// for a field that is not one valid HTTP-date, and for a date later than
// the server's clock ("invalid", §13.1.3: a client's clock must not make
// a version look unchanged); false when the version did not change after
// the date.
func checkIfModifiedSince(values []string, v Validators, now time.Time) cond {
	t, ok := singleDate(values)
	if !ok || v.LastModified.IsZero() || t.After(now) {
		return condNone
	}
	if !v.LastModified.Truncate(time.Second).After(t) {
		return condFalse
	}
	return condTrue
}

// singleDate parses a field that must be one HTTP-date (§5.6.7, any of
// its three formats): several field lines, or a list, are not.
func singleDate(values []string) (time.Time, bool) {
	if len(values) != 1 {
		return time.Time{}, false
	}
	t, err := http.ParseTime(trimOWS(values[0]))
	return t, err == nil
}

// IfRange reports whether the Range of a request may be honoured given
// its If-Range field lines (RFC 9110 §13.1.5), as http.Header.Values
// returns them, against v. It has no error result: false means "serve the
// whole representation with 200".
//
//   - No If-Range field (values is empty) allows ranges.
//   - An entity-tag allows ranges only if it is strong and strongly equal to
//     v's; a weak tag never matches (§8.8.3.2 strong comparison).
//   - An HTTP-date (any of the three §5.6.7 formats) allows ranges only if
//     the Last-Modified is known and equal to it at one-second precision.
//   - Anything else does not allow ranges: §13.1.5 evaluates the condition
//     as false unless the validator is an entity-tag or an HTTP-date that
//     matches. That includes a field that is present but empty, a list of
//     tags or a tag followed by other text, and several If-Range field
//     lines (If-Range is a singleton, and two lines combine into a list,
//     §5.3).
//
// §13.1.5 also says the server MUST ignore If-Range on a request without
// Range; that is the caller's job, since it is the one that looks at Range.
func IfRange(values []string, v Validators) bool {
	if len(values) == 0 {
		return true
	}
	if len(values) > 1 {
		return false
	}
	ifRange := trimOWS(values[0])
	if ifRange == "" {
		return false
	}
	// §13.1.5: an entity-tag is told from an HTTP-date by its first
	// characters: DQUOTE, or W/ for a weak tag.
	if ifRange[0] == '"' || len(ifRange) >= 2 && ifRange[:2] == "W/" {
		tag, rest := scanETag(ifRange)
		// A weak tag can never pass strong comparison. net/http ignores what
		// follows the tag; If-Range is a single value, so trailing text is
		// invalid, which errs towards the always-correct full 200.
		return tag != "" && rest == "" && strongMatch(tag, v.ETag)
	}
	// §13.1.5 wants a date validator to be strong (§8.8.2.2), which a server
	// cannot judge from a date alone; like net/http's checkIfRange we accept
	// an exact match. Our objects are immutable pinned versions, so their
	// modification time never changes within a second.
	if v.LastModified.IsZero() {
		return false
	}
	t, err := http.ParseTime(ifRange)
	if err != nil {
		return false
	}
	return t.Unix() == v.LastModified.Unix()
}

// strongMatch is §8.8.3.2's strong comparison: both tags strong and their
// opaque-tags equal character by character.
func strongMatch(a, b string) bool {
	return a == b && a != "" && a[0] == '"'
}

// weakMatch is §8.8.3.2's weak comparison: the opaque-tags equal, weak
// or not.
func weakMatch(a, b string) bool {
	return strings.TrimPrefix(a, "W/") == strings.TrimPrefix(b, "W/")
}

// etagList parses a #entity-tag list (§5.6.1, §8.8.3): entity-tags
// separated by commas and optional white space, empty elements allowed.
// ok is false when anything else stands in it.
func etagList(s string) (tags []string, ok bool) {
	for {
		s = trimOWS(s)
		for s != "" && s[0] == ',' {
			s = trimOWS(s[1:])
		}
		if s == "" {
			return tags, len(tags) > 0
		}
		tag, rest := scanETag(s)
		if tag == "" {
			return nil, false
		}
		tags = append(tags, tag)
		rest = trimOWS(rest)
		if rest != "" && rest[0] != ',' {
			return nil, false
		}
		s = rest
	}
}

// scanETag returns the entity-tag at the start of s (RFC 9110 §8.8.3),
// W/ prefix included, and the text after it; tag is "" when s does not start
// with a valid entity-tag.
func scanETag(s string) (tag, rest string) {
	start := 0
	if len(s) >= 2 && s[:2] == "W/" {
		start = 2
	}
	if len(s)-start < 2 || s[start] != '"' {
		return "", ""
	}
	for i := start + 1; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			return s[:i+1], s[i+1:]
		// etagc = %x21 / %x23-7E / obs-text
		case c == 0x21 || c >= 0x23 && c <= 0x7E || c >= 0x80:
		default:
			return "", ""
		}
	}
	return "", ""
}

// trimOWS trims optional white space (§5.6.3: SP and HTAB).
func trimOWS(s string) string {
	return strings.Trim(s, " \t")
}
