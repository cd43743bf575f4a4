package sessions

import (
	"net/http"
	"time"
)

// IfRangeAllows reports whether the Range header of a request may be honoured
// given its If-Range field lines (RFC 9110 §13.1.5), as http.Header.Values
// returns them, the representation's current ETag (in header form, quotes
// included, e.g. `"abc"`) and its Last-Modified time (zero when unknown).
// It has no error result: false means "serve the whole representation with
// 200".
//
//   - No If-Range field (values is empty) allows ranges.
//   - An entity-tag allows ranges only if it is strong and strongly equal to
//     etag; a weak tag never matches (§8.8.3.2 strong comparison).
//   - An HTTP-date (any of the three §5.6.7 formats) allows ranges only if
//     lastModified is known and equal to it at one-second precision.
//   - Anything else does not allow ranges: §13.1.5 evaluates the condition
//     as false unless the validator is an entity-tag or an HTTP-date that
//     matches. That includes a field that is present but empty, a list of
//     tags or a tag followed by other text, and several If-Range field
//     lines (If-Range is a singleton, and two lines combine into a list,
//     §5.3).
//
// §13.1.5 also says the server MUST ignore If-Range on a request without
// Range; that is the caller's job, since it is the one that looks at Range.
func IfRangeAllows(values []string, etag string, lastModified time.Time) bool {
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
		// follows the tag; If-Range is a single value, so we treat trailing
		// text as invalid, which errs towards the always-correct full 200.
		return tag != "" && rest == "" && tag[0] == '"' && tag == etag
	}
	// §13.1.5 wants a date validator to be strong (§8.8.2.2), which a server
	// cannot judge from a date alone; like net/http's checkIfRange we accept
	// an exact match. Our objects are immutable pinned versions, so their
	// modification time never changes within a second.
	if lastModified.IsZero() {
		return false
	}
	t, err := http.ParseTime(ifRange)
	if err != nil {
		return false
	}
	return t.Unix() == lastModified.Unix()
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
