package preview

import (
	_ "embed"
	"fmt"
	"strings"
	"sync"
)

// agentsFile is the built-in agent list, one entry per line with the source
// of each user agent in a comment above it.
//
//go:embed agents.txt
var agentsFile string

// minAgentLen is the shortest entry New accepts: shorter ones are no
// product's name and would match at random.
const minAgentLen = 3

var defaultDetector = sync.OnceValue(func() *Detector {
	d, err := New(parseAgentsFile(agentsFile))
	if err != nil {
		// agents.txt is compiled in and TestDefaultList checks it: a bad
		// entry is a defect of the build, not something to run with.
		panic(err)
	}
	return d
})

// Default returns the detector for the built-in agent list (agents.txt,
// embedded in the binary). It is the same Detector on every call.
func Default() *Detector { return defaultDetector() }

// New returns a detector for the given agent substrings or tokens, in the
// order given: the first one found in a request's User-Agent names Check's
// reason. GATEWAY_PREVIEW_AGENTS replaces the built-in list this way, read
// with ParseList. Entries are trimmed of surrounding spaces. An empty list
// is allowed: then no user agent matches, and prefetch headers still do.
//
// New returns an error for an entry that is empty or shorter than three
// characters, that is not printable ASCII (matching folds ASCII case only,
// and user agents are ASCII), or that occurs in the user agent of an
// ordinary browser or download tool, since such an entry would turn every
// download into a preview.
func New(agents []string) (*Detector, error) {
	d := &Detector{agents: make([]agent, 0, len(agents))}
	for i, a := range agents {
		e := strings.TrimSpace(a)
		switch {
		case e == "":
			return nil, fmt.Errorf("preview: agent entry %d is empty", i+1)
		case len(e) < minAgentLen:
			return nil, fmt.Errorf("preview: agent entry %q is too short to name a previewer", e)
		case !printableASCII(e):
			return nil, fmt.Errorf("preview: agent entry %q is not printable ASCII", e)
		}
		lower := lowerASCII(e)
		for _, ua := range ordinaryClients {
			if strings.Contains(lowerASCII(ua), lower) {
				return nil, fmt.Errorf("preview: agent entry %q occurs in the user agent of an ordinary client (%s) and would turn its downloads into previews", e, ua)
			}
		}
		j := len(d.agents)
		d.agents = append(d.agents, agent{lower: lower, reason: reasonAgentPrefix + e})
		d.first[lower[0]] = append(d.first[lower[0]], j)
		p := pair(lower[0], lower[1])
		d.pairs[p/64] |= 1 << (p % 64)
	}
	return d, nil
}

// ordinaryClients are user agents of people's browsers and of download tools
// that New refuses to match, so that a mistyped GATEWAY_PREVIEW_AGENTS
// ("Mozilla", "Safari", "curl") fails at start instead of serving previews
// where files were due. One of each family is enough: entries that match
// any browser match these.
var ordinaryClients = [...]string{
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36",
	"Mozilla/5.0 (Linux; Android 10; K) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Mobile Safari/537.36",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:125.0) Gecko/20100101 Firefox/125.0",
	"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4.1 Safari/605.1.15",
	"Mozilla/5.0 (iPhone; CPU iPhone OS 17_4_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4.1 Mobile/15E148 Safari/604.1",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36 Edg/124.0.2478.80",
	"Mozilla/5.0 (Linux; Android 14; SAMSUNG SM-S918B) AppleWebKit/537.36 (KHTML, like Gecko) SamsungBrowser/24.0 Chrome/117.0.0.0 Mobile Safari/537.36",
	"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/123.0.0.0 Safari/537.36 OPR/109.0.0.0",
	"curl/8.5.0",
	"Wget/1.21.4",
	"aria2/1.37.0",
	"Go-http-client/1.1",
	"python-requests/2.32.3",
}

// ParseList splits a comma-separated list, as GATEWAY_PREVIEW_AGENTS gives
// it, trims the spaces around each entry and drops empty entries. It returns
// nil for a list with no entries.
func ParseList(s string) []string {
	var out []string
	for e := range strings.SplitSeq(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// parseAgentsFile returns the entries of agents.txt: its lines, trimmed,
// without blank lines and # comments.
func parseAgentsFile(s string) []string {
	var out []string
	for line := range strings.Lines(s) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		out = append(out, line)
	}
	return out
}

// agentReason returns the reason of the entry found in ua that comes first
// in the list, or "".
func (d *Detector) agentReason(ua string) string {
	if len(ua) < minAgentLen {
		return ""
	}
	best := len(d.agents) // index of the first entry found so far
	next := lowerTable[ua[0]]
	for i := 0; i+1 < len(ua) && best > 0; i++ {
		c := next
		next = lowerTable[ua[i+1]]
		p := pair(c, next)
		if d.pairs[p/64]&(1<<(p%64)) == 0 {
			continue
		}
		for _, j := range d.first[c] {
			if j >= best {
				break // first[c] is in list order: nothing better here
			}
			if hasLowerPrefix(ua[i:], d.agents[j].lower) {
				best = j
				break
			}
		}
	}
	if best == len(d.agents) {
		return ""
	}
	return d.agents[best].reason
}

// pair packs two bytes into an index of Detector.pairs.
func pair(a, b byte) uint16 { return uint16(a)<<8 | uint16(b) }

// hasLowerPrefix reports whether s begins with lower (already lowercase)
// when ASCII letters of s are folded to lower case.
func hasLowerPrefix(s, lower string) bool {
	if len(s) < len(lower) {
		return false
	}
	for i := 0; i < len(lower); i++ {
		if lowerByte(s[i]) != lower[i] {
			return false
		}
	}
	return true
}

// lowerByte folds an ASCII letter to lower case and returns any other byte
// as it is. Only ASCII is folded: Unicode folding would let "K" (U+212A
// KELVIN SIGN) match "k".
func lowerByte(c byte) byte { return lowerTable[c] }

// lowerTable is lowerByte as a table: user agents mix cases at random, and a
// load costs less than the branch mispredictions of comparing each byte.
var lowerTable = func() (t [256]byte) {
	for i := range t {
		c := byte(i)
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		t[i] = c
	}
	return t
}()

// lowerASCII returns s with ASCII letters folded to lower case.
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = lowerByte(c)
	}
	return string(b)
}

// printableASCII reports whether s has only bytes from ' ' to '~'.
func printableASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < ' ' || s[i] > '~' {
			return false
		}
	}
	return true
}
