package engine

import (
	"database/sql"
	"errors"
	"fmt"
	"time"
)

// TimeCol scans a timestamp column of either backend: time.Time from MySQL
// (parseTime=true, loc=UTC) or INTEGER microseconds from SQLite.
type TimeCol struct {
	T     time.Time
	Valid bool
}

func (c *TimeCol) Scan(v any) error {
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

func (c TimeCol) Ptr() *time.Time {
	if !c.Valid {
		return nil
	}
	t := c.T
	return &t
}

// NullStr maps SQL NULL to "".
type NullStr string

func (s *NullStr) Scan(v any) error {
	switch x := v.(type) {
	case nil:
		*s = ""
	case string:
		*s = NullStr(x)
	case []byte:
		*s = NullStr(x)
	default:
		return fmt.Errorf("sqlcore: cannot scan %T into a string", v)
	}
	return nil
}

// OrNull binds "" as NULL, so optional columns stay NULL rather than empty.
func OrNull(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// WithNow scans one more column after the row's own: the {now} that a
// query selected beside it, so a decision read with a row is explained by
// the same clock that made it.
func WithNow(r RowScanner, now *TimeCol) RowScanner { return WithMore(r, now) }

// WithMore scans the columns a query selected after the row's own into
// more.
func WithMore(r RowScanner, more ...any) RowScanner { return moreScanner{r, more} }

type moreScanner struct {
	r    RowScanner
	more []any
}

func (m moreScanner) Scan(dest ...any) error { return m.r.Scan(append(dest, m.more...)...) }

// RowScanner is a *sql.Row or *sql.Rows.
type RowScanner interface{ Scan(dest ...any) error }

// Timestamps every backend can compare with: MySQL's DATETIME range.
var (
	MinTime = time.Date(1000, 1, 1, 0, 0, 0, 0, time.UTC)
	MaxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

// ClampTime brings a caller's bound into the range a timestamp column
// holds; outside it a bound excludes nothing more (or everything).
func ClampTime(t time.Time) time.Time {
	switch {
	case t.Before(MinTime):
		return MinTime
	case t.After(MaxTime):
		return MaxTime
	}
	return t.UTC()
}

// Ptr is a pointer to a copy of v.
func Ptr[T any](v T) *T { return &v }

// IsNoRows reports whether a row read found none.
func IsNoRows(err error) bool { return errors.Is(err, sql.ErrNoRows) }

// The instants both backends can store: MySQL's DATETIME(6) ends with
// the year 9999, and nothing the gateway records predates the epoch (a
// released slot's lease is the epoch itself).
var (
	StorableMin = time.Unix(0, 0).UTC()
	StorableMax = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

// Storable reports whether t lies between storableMin and storableMax.
func Storable(t time.Time) bool { return !t.Before(StorableMin) && !t.After(StorableMax) }
