package preview

import (
	"net/http"
	"strings"
)

// purposeHeaders are the request headers by which browsers mark a request as
// speculative, each with the token that says so. Names are canonical, as
// net/http stores them, so they index http.Header directly.
//
// Only the prefetch token of Sec-Purpose counts, as SPEC §8 says. Every
// speculative request Chromium makes carries it ("prefetch",
// "prefetch;anonymous-client-ip", "prefetch;prerender",
// "prefetch;prerender;preview"; Chromium's own IsSecPurposeForPrefetch tests
// for the prefix), so a bare "prerender", which no browser sends, is not
// taken as speculative: an unknown purpose downloads like any request.
var purposeHeaders = [...]struct{ name, token string }{
	// Fetch Standard, Sec-Purpose (https://fetch.spec.whatwg.org/#sec-purpose-header),
	// sent by Chromium 110+ and Firefox 115+.
	{"Sec-Purpose", "prefetch"},
	// Chrome's legacy header for <link rel=prefetch>, which it still sends
	// instead of Sec-Purpose (crbug.com/1358419, MDN browser compat data).
	{"Purpose", "prefetch"},
	// Firefox before 115 (MDN, "Link prefetching FAQ").
	{"X-Moz", "prefetch"},
	// Safari's Top Sites thumbnails and Chrome's old Instant pages.
	{"X-Purpose", "preview"},
}

// isPrefetch reports whether any purpose header of h carries its token.
func isPrefetch(h http.Header) bool {
	for _, p := range purposeHeaders {
		for _, v := range h[p.name] {
			if hasToken(v, p.token) {
				return true
			}
		}
	}
	return false
}

// hasToken reports whether the header value v, read as a structured-field
// list of items with parameters (RFC 8941 §3.1, "a;b, c"), has token as an
// item or a parameter name, ASCII case-insensitively. "prefetch;prerender"
// and "PREFETCH" have prefetch; "no-prefetch", "x=prefetch" and
// "prefetchx" do not, which a plain substring test would get wrong.
func hasToken(v, token string) bool {
	for v != "" {
		var part string
		if i := strings.IndexAny(v, ",;"); i >= 0 {
			part, v = v[:i], v[i+1:]
		} else {
			part, v = v, ""
		}
		if equalFoldASCII(strings.Trim(part, " \t"), token) {
			return true
		}
	}
	return false
}

// equalFoldASCII reports whether s and t are equal when ASCII letters are
// folded to lower case; other bytes must be equal as they are.
func equalFoldASCII(s, t string) bool {
	if len(s) != len(t) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if lowerByte(s[i]) != lowerByte(t[i]) {
			return false
		}
	}
	return true
}
