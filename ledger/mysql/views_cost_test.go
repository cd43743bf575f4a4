package mysql_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
)

// A page of the console's objects listing (ObjectList) reads about its own
// rows from objects_stored or objects_state_stored, however deep in the
// listing it is, plus the lookups of its keys' links: no scan of the newer
// versions down to the cursor, no sort. Counted as the handler reads of
// the ledger's one connection, per page of 20 from 3,000 versions, a
// third of them deleted.
func TestObjectPagesReadTheirRowsOnly(t *testing.T) {
	db, status := onOneConnection(t)
	ctx := context.Background()
	const n = 3000
	t0 := time.Now().UTC().Truncate(time.Microsecond).Add(-time.Hour)
	var b strings.Builder
	var args []any
	flush := func() {
		if len(args) == 0 {
			return
		}
		if _, err := db.SQL().ExecContext(ctx, `INSERT INTO objects (version_hash, bucket, object_key, version_id, size, etag,
  content_type, stored_at, state, check_at) VALUES `+strings.TrimSuffix(b.String(), ","), args...); err != nil {
			t.Fatal(err)
		}
		b.Reset()
		args = args[:0]
	}
	for i := range n {
		key, vid := fmt.Sprintf("k/%05d", i), uuid.NewString()
		h := sha256.Sum256([]byte("b\x00" + key + "\x00" + vid))
		state := ledger.ObjectStored
		if i%3 == 0 {
			state = ledger.ObjectDeleted
		}
		at := t0.Add(time.Duration(i/2) * time.Millisecond) // pairs share a stored_at: the hash breaks the tie
		b.WriteString("(?, 'b', ?, ?, 1, '\"e\"', 'text/plain', ?, ?, ?),")
		args = append(args, h[:], key, vid, at, string(state), at)
		if i%500 == 499 {
			flush()
		}
	}
	flush()
	rows, err := db.SQL().QueryContext(ctx, `ANALYZE TABLE objects`)
	if err != nil {
		t.Fatal(err)
	}
	rows.Close()
	reads := func() int64 {
		var sum int64
		for _, h := range []string{"Handler_read_first", "Handler_read_key", "Handler_read_last", "Handler_read_next",
			"Handler_read_prev", "Handler_read_rnd", "Handler_read_rnd_next"} {
			sum += status(h)
		}
		return sum
	}
	const limit = 20
	for _, c := range []struct {
		name  string
		q     ledger.ObjectQuery
		total int
	}{
		{"all", ledger.ObjectQuery{}, n},
		{"stored", ledger.ObjectQuery{State: ledger.ObjectStored}, n - n/3},
		{"deleted", ledger.ObjectQuery{State: ledger.ObjectDeleted}, n / 3},
	} {
		q := c.q
		q.Limit = limit
		var worst int64
		pages, seen := 0, 0
		for {
			before := reads()
			p, err := db.ObjectList(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if got := reads() - before; got > worst {
				worst = got
			}
			pages++
			seen += len(p.Objects)
			if q.Cursor = p.Next; q.Cursor == "" {
				break
			}
		}
		t.Logf("%s: %d pages of %d, at most %d handler reads per page", c.name, pages, limit, worst)
		if seen != c.total {
			t.Errorf("%s: %d versions listed, want %d", c.name, seen, c.total)
		}
		// The page's index range (limit+1 entries) with a row read each,
		// and the links index probed once per key of the page.
		if bound := int64(2*(limit+1) + 3*limit + 16); worst > bound {
			t.Errorf("%s: a page of %d cost up to %d handler reads over %d pages, want at most %d", c.name, limit, worst, pages, bound)
		}
	}
}
