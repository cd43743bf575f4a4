package engine

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

// Listings are newest first, by (time, id) descending, and read one row
// past the page: the page's last item names the next page in its cursor
// when that row was there.

// PageOf cuts items, read with one row past limit, to the page and
// returns the next page's cursor ("" on the last page). Unless sorted, the
// items are first put newest first (a join returns them in no particular
// order). key gives an item's time and id.
func PageOf[T any](items []T, limit int, sorted bool, key func(*T) (time.Time, string)) ([]T, string) {
	if !sorted {
		slices.SortFunc(items, func(a, b T) int {
			at, aid := key(&a)
			bt, bid := key(&b)
			if c := bt.Compare(at); c != 0 {
				return c
			}
			return strings.Compare(bid, aid)
		})
	}
	if len(items) <= limit {
		return items, ""
	}
	items = items[:limit]
	return items, encodeCursor(key(&items[limit-1]))
}

// encodeCursor is the cursor of the page after the item at, id.
func encodeCursor(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at.UnixMicro(), 10) + "/" + id))
}

// DecodeCursor reads a cursor from encodeCursor. Anything else, forged
// ones included, is ErrInvalid: a time outside what a timestamp column
// holds or an id no row can have would otherwise reach the database and
// come back as a server error.
func DecodeCursor(c string) (time.Time, string, error) {
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil && len(raw) <= 64 {
		micros, id, ok := strings.Cut(string(raw), "/")
		n, perr := strconv.ParseInt(micros, 10, 64)
		at := time.UnixMicro(n).UTC()
		if ok && perr == nil && !at.Before(MinTime) && !at.After(MaxTime) && ValidCursorID(id) {
			return at, id, nil
		}
	}
	return time.Time{}, "", fmt.Errorf("%w: bad cursor", ledger.ErrInvalid)
}

// ValidCursorID accepts what ids are: at most 36 visible ASCII characters.
func ValidCursorID(id string) bool {
	if id == "" || len(id) > 36 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' {
			return false
		}
	}
	return true
}
