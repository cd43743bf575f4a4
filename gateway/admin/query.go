package admin

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlgate/dlgate/ledger"
)

// The query parameters of the listings (GET /v1/links, /v1/keys,
// /v1/audit, and a link's grants): known ones only, each once, a cursor
// the ledger checks.

// badCursor is the detail of a 400 for a cursor the ledger refused.
const badCursor = "cursor is not one this API returned; pass a previous page's next_cursor unchanged."

// pageErr is a listing's error from the ledger: ErrInvalid is the
// cursor's (every other parameter was checked before the ledger was
// asked), anything else is itself.
func pageErr(err error) error {
	if errors.Is(err, ledger.ErrInvalid) {
		return badRequest("cursor", badCursor)
	}
	return err
}

// parsePage reads the cursor and limit of a listing whose only query
// parameters are known, or returns the one-line detail of a 400: a
// misspelt filter would otherwise list everything.
func parsePage(v url.Values, known []string) (cursor string, limit int, detail string) {
	if d := checkParams(v, known); d != "" {
		return "", 0, d
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > ledger.MaxListLimit {
			return "", 0, fmt.Sprintf("limit must be a whole number between 1 and %d.", ledger.MaxListLimit)
		}
		limit = n
	}
	return v.Get("cursor"), limit, ""
}

// checkParams refuses a query with a parameter not in known, one given
// twice, or an empty one (the cursor aside).
func checkParams(v url.Values, known []string) string {
	for name, vals := range v {
		switch {
		case !slices.Contains(known, name):
			return fmt.Sprintf("Unknown query parameter %s; known: %s.", quoteShort(name), strings.Join(known, ", "))
		case len(vals) > 1:
			return name + " is given more than once."
		case vals[0] == "" && name != "cursor":
			return name + " must not be empty."
		}
	}
	return ""
}

// timeParam is a query parameter that holds a time, and where it goes.
type timeParam struct {
	name string
	t    *time.Time
}

// parseTimes reads each of params that v has as an RFC 3339 time; the
// first that is not one is returned with the detail of its 400.
func parseTimes(v url.Values, params ...timeParam) (name, detail string) {
	for _, p := range params {
		if s := v.Get(p.name); s != "" {
			t, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return p.name, p.name + " must be an RFC 3339 time, like 2030-01-02T03:04:05Z."
			}
			*p.t = t
		}
	}
	return "", ""
}

// quoteShort quotes a value the caller sent, cut to 40 bytes, for a
// detail that names it.
func quoteShort(s string) string {
	if len(s) > 40 {
		cut := 40
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		return strconv.Quote(s[:cut]) + "…"
	}
	return strconv.Quote(s)
}
