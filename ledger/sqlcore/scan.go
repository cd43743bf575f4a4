package sqlcore

import (
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// timeCol scans a timestamp column of either backend: time.Time from MySQL
// (parseTime=true, loc=UTC) or INTEGER microseconds from SQLite.
type timeCol struct {
	T     time.Time
	Valid bool
}

func (c *timeCol) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		c.T, c.Valid = time.Time{}, false
	case time.Time:
		c.T, c.Valid = x.UTC(), true
	case int64:
		c.T, c.Valid = time.UnixMicro(x).UTC(), true
	default:
		return fmt.Errorf("sqlcore: cannot scan %T into a time", v)
	}
	return nil
}

func (c timeCol) ptr() *time.Time {
	if !c.Valid {
		return nil
	}
	t := c.T
	return &t
}

// nullStr maps SQL NULL to "".
type nullStr string

func (s *nullStr) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		*s = ""
	case string:
		*s = nullStr(x)
	case []byte:
		*s = nullStr(x)
	default:
		return fmt.Errorf("sqlcore: cannot scan %T into a string", v)
	}
	return nil
}

// orNull binds "" as NULL, so optional columns stay NULL rather than empty.
func orNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// withNow scans one more column after the row's own: the {now} that a
// query selected beside it, so a decision read with a row is explained by
// the same clock that made it.
func withNow(r rowScanner, now *timeCol) rowScanner { return withMore(r, now) }

// withMore scans the columns a query selected after the row's own into
// more.
func withMore(r rowScanner, more ...any) rowScanner { return moreScanner{r, more} }

type moreScanner struct {
	r    rowScanner
	more []any
}

func (m moreScanner) Scan(dest ...any) error { return m.r.Scan(append(dest, m.more...)...) }

// rowScanner is a *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

// Timestamps every backend can compare with: MySQL's DATETIME range.
var (
	minTime = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

// clampTime brings a caller's bound into the range a timestamp column
// holds; outside it a bound excludes nothing more (or everything).
func clampTime(t time.Time) time.Time {
	switch {
	case t.Before(minTime):
		return minTime
	case t.After(maxTime):
		return maxTime
	}
	return t.UTC()
}

// ptr is a pointer to a copy of v.
func ptr[T any](v T) *T { return &v }

// isNoRows reports whether a row read found none.
func isNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// The instants both backends can store: MySQL's DATETIME(6) ends with
// the year 9999, and nothing the gateway records predates the epoch (a
// released slot's lease is the epoch itself).
var (
	storableMin = time.Unix(0, 0).UTC()
	storableMax = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

// storable reports whether t lies between storableMin and storableMax.
func storable(t time.Time) bool { return !t.Before(storableMin) && !t.After(storableMax) }
