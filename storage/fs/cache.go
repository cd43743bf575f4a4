package fs

import "sync"

// cache is a map of at most size entries, safe for concurrent use. When
// full, put evicts an arbitrary entry (map order is random): the store's
// caches hold what is cheap to find again, so which one goes matters
// little. release, when set, is called for every entry that leaves.
type cache[K comparable, V any] struct {
	mu      sync.Mutex
	m       map[K]V
	size    int
	release func(V)
}

func (c *cache[K, V]) get(k K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *cache[K, V]) put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[K]V)
	}
	if old, ok := c.m[k]; ok {
		c.drop(k, old)
	} else if len(c.m) >= c.size {
		for k, old := range c.m {
			c.drop(k, old)
			break
		}
	}
	c.m[k] = v
}

// removeIf removes k's entry when is reports true for it.
func (c *cache[K, V]) removeIf(k K, is func(V) bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m[k]; ok && is(v) {
		c.drop(k, v)
	}
}

// clear removes every entry.
func (c *cache[K, V]) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range c.m {
		c.drop(k, v)
	}
}

// drop removes k, whose entry is v; the caller holds c.mu.
func (c *cache[K, V]) drop(k K, v V) {
	delete(c.m, k)
	if c.release != nil {
		c.release(v)
	}
}
