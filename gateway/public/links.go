package public

import (
	"context"
	"sync"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

// linkCache keeps, by token hash, the link rows this process read. A GET
// or POST that claims needs only a link's immutable part (its object,
// file name, account, delivery, confirm flag, session settings): whether
// it may be claimed is decided by the claim itself, in the database. So a
// claim of a link this process has seen costs no lookup. Every answer that
// reports a link's state without claiming (HEAD, previews, landing pages)
// reads the row afresh.
type linkCache struct {
	mu sync.Mutex
	m  map[string]cachedLink
}

type cachedLink struct {
	l  *ledger.Link
	at time.Time // monotonic: when l was read
}

// linkCacheSize bounds the cache: about 1 KiB a link, so a few MiB.
const linkCacheSize = 4096

// get returns the immutable part of the link with token hash, reading it
// from the ledger on a miss. Its ReadAt is the database's clock now, as
// far as the copy can tell.
func (c *linkCache) get(ctx context.Context, lg ledger.Claims, hash []byte) (*ledger.Link, error) {
	if l, ok := c.peek(hash); ok {
		return l, nil
	}
	l, err := lg.LinkGetByTokenHash(ctx, hash)
	if err != nil {
		return nil, err
	}
	c.put(hash, l)
	return l, nil
}

// peek returns the cached copy of the link with token hash, if any, with
// its ReadAt moved on by the time since it was read.
func (c *linkCache) peek(hash []byte) (*ledger.Link, bool) {
	c.mu.Lock()
	e, ok := c.m[string(hash)]
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	l := *e.l
	if !l.ReadAt.IsZero() {
		l.ReadAt = l.ReadAt.Add(time.Since(e.at))
	}
	return &l, true
}

// put caches a copy of l, just read, under its token hash.
func (c *linkCache) put(hash []byte, l *ledger.Link) {
	cp := *l
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]cachedLink)
	}
	if len(c.m) >= linkCacheSize {
		for k := range c.m { // drop any one: a map's order is random enough
			delete(c.m, k)
			break
		}
	}
	c.m[string(hash)] = cachedLink{l: &cp, at: time.Now()}
}
