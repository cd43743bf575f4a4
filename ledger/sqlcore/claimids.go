package sqlcore

import (
	"context"
	"sync"

	"github.com/dlgate/dlgate/ledger"
)

// resolve finds the link ids of the batch's token hashes, so that its
// rows can be locked in id order, when it names more than one row. A
// token hash names its link for good (both are set at creation and
// never change), so ids found once are kept (DB.ids); the read is a
// plain one. A hash without a link leaves its claim ErrNotFound.
func (s *DB) resolve(ctx context.Context, batch []*claim) error {
	var (
		want  []any
		names = map[string]bool{}
	)
	for _, c := range batch {
		if c.linkID == "" {
			if id, ok := s.ids.get(c.hash); ok {
				c.linkID = id
			}
		}
		if c.linkID != "" {
			names[c.linkID] = true
		} else {
			names["\x00"+string(c.hash)] = true
		}
	}
	if len(names) < 2 {
		return nil
	}
	seen := map[string]bool{}
	for _, c := range batch {
		if c.linkID == "" && !seen[string(c.hash)] {
			seen[string(c.hash)] = true
			want = append(want, c.hash)
		}
	}
	if len(want) == 0 {
		return nil
	}
	rows, err := s.Pool.QueryContext(ctx, `SELECT token_hash, id FROM links WHERE token_hash IN (`+marks(len(want))+`)`, want...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			hash []byte
			id   string
		)
		if err := rows.Scan(&hash, &id); err != nil {
			return err
		}
		s.ids.put(hash, id)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	for _, c := range batch {
		if c.linkID == "" {
			if id, ok := s.ids.get(c.hash); ok {
				c.linkID = id
			} else {
				c.err = ledger.ErrNotFound
			}
		}
	}
	return nil
}

// idCache keeps the link ids of token hashes this process resolved (a
// hash names its link for good), up to maxIDs of them.
type idCache struct {
	mu sync.RWMutex
	m  map[string]string
}

const maxIDs = 1 << 16

func (c *idCache) get(hash []byte) (string, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	id, ok := c.m[string(hash)]
	return id, ok
}

func (c *idCache) put(hash []byte, id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]string{}
	}
	if _, ok := c.m[string(hash)]; !ok && len(c.m) >= maxIDs {
		// Full: let an eighth go, whichever the map hands out first.
		n := maxIDs / 8
		for k := range c.m {
			delete(c.m, k)
			if n--; n == 0 {
				break
			}
		}
	}
	c.m[string(hash)] = id
}
