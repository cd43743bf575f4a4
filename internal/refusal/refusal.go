// Package refusal bounds how many refusals one client may draw on one
// token, and how many failed authentications one address may make
// (AuthConfig, AddrKey). A refusal that spends nothing (a 404 for a used-up link, a 409
// for a Range on a link URL, a 416) costs the client nothing either, so
// a download manager that retries it does so forever: wget2
// --chunk-size retries its 409 thousands of times a second. The Limiter
// counts refusals per key (a hash of client address and token) in fixed
// windows and, past a burst, puts the key under a penalty whose length
// doubles with each repeat, up to a cap; a key that stays quiet long
// enough is forgotten.
//
// Tokens stands in front of it and lets through only the refusals of
// genuine tokens, so that the cheapest refusals (forged tokens, answered
// without a lookup) stay cheap.
//
// The package is pure policy: it keeps no clock (every call takes now),
// does no I/O, and knows nothing of HTTP; the gateway decides what a
// refusal is and how to answer a key under penalty.
package refusal

import (
	"hash/maphash"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config.
const (
	DefaultBurst      = 50
	DefaultWindow     = 10 * time.Second
	DefaultPenalty    = 5 * time.Second
	DefaultMaxPenalty = 5 * time.Minute
	DefaultForgive    = 10 * time.Minute
	DefaultEntries    = 16384
	DefaultHeldPerKey = 2
)

// Config tunes a Limiter; zero fields take the defaults above.
type Config struct {
	// Burst refusals of one key within Window start a penalty.
	Burst  int
	Window time.Duration
	// Penalty is the first penalty of a key; each next one doubles, up
	// to MaxPenalty.
	Penalty    time.Duration
	MaxPenalty time.Duration
	// Forgive is how long a key must go without a refusal and without a
	// request under penalty, once its penalty is over, to be forgotten:
	// its next penalty starts from Penalty again.
	Forgive time.Duration
	// Entries bounds the keys remembered (rounded up to a multiple of
	// 8). The table is allocated whole, 41 bytes an entry (670 KB by
	// default); a new key displaces an old one of its set (see victim),
	// a key under penalty last.
	Entries int
	// HeldPerKey bounds how many requests of one key Hold grants at once.
	HeldPerKey int
}

func (c Config) withDefaults() Config {
	if c.Burst <= 0 {
		c.Burst = DefaultBurst
	}
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.Penalty <= 0 {
		c.Penalty = DefaultPenalty
	}
	if c.MaxPenalty < c.Penalty {
		c.MaxPenalty = max(DefaultMaxPenalty, c.Penalty)
	}
	if c.Forgive <= 0 {
		c.Forgive = DefaultForgive
	}
	if c.Entries <= 0 {
		c.Entries = DefaultEntries
	}
	if c.HeldPerKey <= 0 {
		c.HeldPerKey = DefaultHeldPerKey
	}
	return c
}

// Key names one client and one token. It is a keyed hash (the seed is
// random per Limiter), so the table holds no token and a client cannot
// choose where in the table its keys land.
type Key uint64

// Penalty is a key's current penalty.
type Penalty struct {
	// Left is how long the penalty still runs: the Retry-After.
	Left time.Duration
	// Strike counts the penalties of the key since it was last
	// forgiven; the first is 1.
	Strike int
}

// ways is the number of entries of one set: a key lives in the set its
// hash names, in any of its ways, as in a CPU cache. Memory is fixed (the
// table is allocated whole), a lookup reads one set, and inserting into
// a full set displaces the least valuable of its entries.
const ways = 8

// Limiter is the table of keys. Its methods are safe for concurrent use.
type Limiter struct {
	cfg  Config
	seed maphash.Seed
	// until is the latest end of any penalty (Unix nanoseconds): while
	// now is past it no key is under penalty, and Throttled answers
	// without hashing or locking.
	until atomic.Int64
	sets  []set
}

// set is one lock and the entries it guards; sets are independent, so
// requests of different keys seldom wait for one another.
type set struct {
	mu sync.Mutex
	e  [ways]entry
}

// entry is what the Limiter knows of one key. Times are Unix
// nanoseconds.
type entry struct {
	key     Key   // 0: the way is free (Key never returns 0)
	start   int64 // the current window's start
	until   int64 // end of the current or last penalty; 0 for none
	seen    int64 // the last refusal or request under penalty
	count   int32 // refusals in the current window
	strikes uint8
	held    uint8
}

// New returns an empty Limiter.
func New(cfg Config) *Limiter {
	cfg = cfg.withDefaults()
	return &Limiter{cfg: cfg, seed: maphash.MakeSeed(), sets: make([]set, max(1, (cfg.Entries+ways-1)/ways))}
}

// Key returns the key of a client address and a token of one kind.
func (l *Limiter) Key(addr netip.Addr, kind, tok string) Key {
	var h maphash.Hash
	h.SetSeed(l.seed)
	a := addr.As16()
	h.Write(a[:])
	h.WriteString(kind)
	h.WriteByte(0)
	h.WriteString(tok)
	return Key(max(1, h.Sum64()))
}

// AddrKey returns the key of a client address alone, within kind, for
// refusals counted per client whatever it presented: failed
// authentications on the admin API, each with another guess. It is never
// the Key of a token of that kind (the address is followed by another
// separator).
func (l *Limiter) AddrKey(addr netip.Addr, kind string) Key {
	var h maphash.Hash
	h.SetSeed(l.seed)
	a := addr.As16()
	h.Write(a[:])
	h.WriteString(kind)
	h.WriteByte(1)
	return Key(max(1, h.Sum64()))
}

// Failed authentications on the admin API and the console's sign-in
// (SPEC §6, §11): more than AuthFailures from one address within
// AuthWindow, and the address is answered 429 with Retry-After, no key
// checked, for the penalty (AuthConfig). The caller asks Throttled before
// it looks a key up, and counts each failure with Refused(…, 1).
const (
	AuthFailures = 20
	AuthWindow   = 10 * time.Second
)

// AuthConfig is the Limiter of failed authentications, keyed by AddrKey:
// the (AuthFailures+1)th failure within a window starts a penalty of
// AuthWindow, doubling with each repeat up to DefaultMaxPenalty. The
// window is the Limiter's: it starts with the first failure after the
// previous one ended, so failures on both sides of a window's end are
// counted in two windows (at most 2 × AuthFailures in the 10 s around
// it), as the public side's refusals are.
func AuthConfig() Config {
	return Config{Burst: AuthFailures + 1, Window: AuthWindow, Penalty: AuthWindow}
}

// lock locks k's set and returns it; the caller unlocks.
func (l *Limiter) lock(k Key) *set {
	s := &l.sets[uint64(k)%uint64(len(l.sets))]
	s.mu.Lock()
	return s
}

// find returns k's entry in s, or nil.
func (s *set) find(k Key) *entry {
	for i := range s.e {
		if s.e[i].key == k {
			return &s.e[i]
		}
	}
	return nil
}

// Quiet reports, without a clock, that no key is under penalty: then
// Throttled is false for every key, and the caller need not even compute
// one. It stays false after the last penalty ended until AnyPenalty
// notices.
func (l *Limiter) Quiet() bool { return l.until.Load() == 0 }

// AnyPenalty reports whether some key may be under penalty at now; when
// it is false, Throttled is false for every key.
func (l *Limiter) AnyPenalty(now time.Time) bool {
	u := l.until.Load()
	if t := now.UnixNano(); t >= u {
		if u != 0 {
			l.until.CompareAndSwap(u, 0) // a penalty begun since keeps its end
		}
		return false
	}
	return true
}

// Throttled reports whether k is under penalty at now, and which. A
// request under penalty keeps the key from being forgiven.
func (l *Limiter) Throttled(k Key, now time.Time) (Penalty, bool) {
	if !l.AnyPenalty(now) {
		return Penalty{}, false
	}
	t := now.UnixNano()
	s := l.lock(k)
	defer s.mu.Unlock()
	e := s.find(k)
	if e == nil || t >= e.until {
		return Penalty{}, false
	}
	e.seen = t
	return Penalty{Left: time.Duration(e.until - t), Strike: int(e.strikes)}, true
}

// Refused counts n refusals of k at now (n as Tokens.Refused returns it).
// When they reach Burst within the window, a penalty starts and is
// returned with started true.
func (l *Limiter) Refused(k Key, now time.Time, n int) (p Penalty, started bool) {
	if n <= 0 {
		return Penalty{}, false
	}
	t := now.UnixNano()
	s := l.lock(k)
	defer s.mu.Unlock()
	e := s.find(k)
	switch {
	case e == nil:
		e = l.victim(s, t)
		*e = entry{key: k}
	case l.forgiven(e, t):
		*e = entry{key: k}
	}
	e.seen = t
	if t < e.until {
		// Under penalty already: a request that passed Throttled just
		// before the penalty began.
		return Penalty{}, false
	}
	if t-e.start >= int64(l.cfg.Window) {
		e.start, e.count = t, 0
	}
	e.count = int32(min(int(e.count)+n, l.cfg.Burst))
	if int(e.count) < l.cfg.Burst {
		return Penalty{}, false
	}
	e.strikes = min(e.strikes+1, 100)
	d := l.cfg.Penalty
	for i := uint8(1); i < e.strikes && d < l.cfg.MaxPenalty; i++ {
		d *= 2
	}
	d = min(d, l.cfg.MaxPenalty)
	e.until, e.count, e.start = t+int64(d), 0, t+int64(d)
	for {
		u := l.until.Load()
		if u >= e.until || l.until.CompareAndSwap(u, e.until) {
			break
		}
	}
	return Penalty{Left: d, Strike: int(e.strikes)}, true
}

// Hold asks to hold one request of k under penalty (the gateway delays
// its answer, see gateway/refusals.go). At most HeldPerKey requests of a
// key are held at once; each granted Hold must be followed by Release.
func (l *Limiter) Hold(k Key) bool {
	s := l.lock(k)
	defer s.mu.Unlock()
	e := s.find(k)
	if e == nil || int(e.held) >= l.cfg.HeldPerKey {
		return false
	}
	e.held++
	return true
}

// Release ends a request Hold granted.
func (l *Limiter) Release(k Key) {
	s := l.lock(k)
	defer s.mu.Unlock()
	if e := s.find(k); e != nil && e.held > 0 {
		e.held--
	}
}

// Len returns the number of keys remembered.
func (l *Limiter) Len() int {
	n := 0
	for i := range l.sets {
		s := &l.sets[i]
		s.mu.Lock()
		for j := range s.e {
			if s.e[j].key != 0 {
				n++
			}
		}
		s.mu.Unlock()
	}
	return n
}

// forgiven reports whether e has been quiet for Forgive since its last
// refusal, its last request under penalty and the end of its penalty.
func (l *Limiter) forgiven(e *entry, t int64) bool {
	return e.held == 0 && t-max(e.seen, e.until) >= int64(l.cfg.Forgive)
}

// victim returns the way of s a new key takes: a free one, else a
// forgiven one, else the least valuable (see less). The caller holds
// s.mu.
func (l *Limiter) victim(s *set, t int64) *entry {
	v := &s.e[0]
	for i := range s.e {
		e := &s.e[i]
		if e.key == 0 || l.forgiven(e, t) {
			return e
		}
		if less(e, v, t) {
			v = e
		}
	}
	return v
}

// less reports whether a is a better eviction victim than b at t: a key
// under penalty (or holding a request) is kept over one that is not,
// then the one seen least recently goes.
func less(a, b *entry, t int64) bool {
	pa, pb := t < a.until || a.held > 0, t < b.until || b.held > 0
	if pa != pb {
		return pb
	}
	return a.seen < b.seen
}
