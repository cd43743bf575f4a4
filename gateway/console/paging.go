package console

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The listings' pages (links, objects, keys, the audit trail): a page of
// pageLimit rows at a time, the filters a form typed, and the link to the
// next page (templates/parts.html, "nextpage").

// pageLimit is how many rows of each list a page shows.
const pageLimit = 50

// listQuery reads the query of a listing's page. filter holds the fields
// names of the form as typed (trimmed, the empty ones left out), which the
// page shows again and its next page's URL carries; api is the query the
// admin core reads, as GET /v1/… reads it: the same fields, those among
// times typed as a browser's datetime-local (apiTime), the page's cursor
// and pageLimit.
func listQuery(q url.Values, names, times []string) (filter, api url.Values) {
	filter, api = url.Values{}, url.Values{"limit": {strconv.Itoa(pageLimit)}}
	for _, name := range names {
		v := strings.TrimSpace(q.Get(name))
		if v == "" {
			continue
		}
		filter.Set(name, v)
		if slices.Contains(times, name) {
			v = apiTime(v)
		}
		api.Set(name, v)
	}
	if c := q.Get("cursor"); c != "" {
		api.Set("cursor", c)
	}
	return filter, api
}

// nextURL is the URL of the listing's page at path (under Base) that
// follows this one: the same filter, and next for the cursor; "" when
// there is no next page (next is "").
func nextURL(path string, filter url.Values, next string) string {
	if next == "" {
		return ""
	}
	q := url.Values{}
	for k, v := range filter {
		q[k] = v
	}
	q.Set("cursor", next)
	return Base + path + "?" + q.Encode()
}

// apiTime turns a browser's datetime-local value (2030-01-02T03:04, or
// with seconds), read as UTC, into the RFC 3339 time the admin API takes;
// anything else goes on as typed, for the API's rule to refuse with its
// own words.
func apiTime(v string) string {
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC().Format(time.RFC3339)
		}
	}
	return v
}
