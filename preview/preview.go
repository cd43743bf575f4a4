// Package preview recognises requests that open a link with no person behind
// them: browser prefetch, and the link previewers of chat apps, mail
// scanners and crawlers (SPEC §8). It looks at headers only and decides
// nothing; what to answer such a request is the gateway's business.
package preview

import "net/http"

// The reasons Check gives. They go to logs and metrics as they are, so they
// are stable words rather than messages.
const (
	reasonPrefetch    = "prefetch"
	reasonAgentPrefix = "agent:"
)

// Detector recognises link previewers and prefetches from request headers.
// It is immutable, so one Detector serves all requests concurrently.
type Detector struct {
	agents []agent
	// Check walks a user agent once instead of searching it once per entry
	// (forty searches cost microseconds on every request). first[c] lists,
	// in list order, the entries that start with the lowercase byte c, and
	// pairs has a bit for the first two lowercase bytes of every entry, so
	// most positions of a browser's user agent are passed over at one
	// lookup.
	first [256][]int
	pairs [1 << 16 / 64]uint64
}

// agent is one entry of the list, folded and formatted once so that Check
// neither folds case on the entry nor builds its reason per request.
type agent struct {
	lower  string // the entry, ASCII-lowercased
	reason string // "agent:" and the entry as written
}

// Check returns a non-empty reason when the request is a prefetch or comes
// from a known previewer: "prefetch" when a purpose header says so (see
// purpose.go), else "agent:<entry>" for the first entry of the list found in
// the User-Agent, ASCII case-insensitively. It returns "" otherwise, and for
// a request without these headers. A nil Detector knows no agents.
//
// Check runs on every request: it reads each user agent once, does not
// allocate, and involves no regular expression.
func (d *Detector) Check(h http.Header) string {
	if isPrefetch(h) {
		return reasonPrefetch
	}
	if d == nil || len(d.agents) == 0 {
		return ""
	}
	// http.Header keys are canonical as net/http stores them. Every value
	// is looked at: a second User-Agent line is not a way to hide.
	for _, ua := range h["User-Agent"] {
		if r := d.agentReason(ua); r != "" {
			return r
		}
	}
	return ""
}
