package client

import (
	"net/url"
	"strconv"
	"time"
)

// query builds a listing's query string; what is zero is left out, as
// the server's default.
type query struct{ v url.Values }

// page sets the cursor and the limit every listing takes.
func (q *query) page(cursor string, limit int) *query {
	q.str("cursor", cursor)
	if limit != 0 {
		q.set("limit", strconv.Itoa(limit))
	}
	return q
}

func (q *query) str(k, v string) *query {
	if v != "" {
		q.set(k, v)
	}
	return q
}

func (q *query) time(k string, t time.Time) *query {
	if !t.IsZero() {
		q.set(k, t.UTC().Format(time.RFC3339Nano))
	}
	return q
}

func (q *query) set(k, v string) {
	if q.v == nil {
		q.v = url.Values{}
	}
	q.v.Set(k, v)
}

// String is "?" and the query, or "" without one.
func (q *query) String() string {
	if len(q.v) == 0 {
		return ""
	}
	return "?" + q.v.Encode()
}
