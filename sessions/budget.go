package sessions

import (
	"math"
	"time"
)

// DefaultChunk is how many bytes of byte budget the gateway reserves from
// the database at a time while streaming. Large enough that the database
// sees a few queries per second per stream even on fast links, small enough
// that a request ending early returns little unsent reservation.
const DefaultChunk = 8 << 20

// Session defaults of SPEC §4, used where neither the link nor the
// gateway's configuration sets a value.
const (
	DefaultTTL            = time.Hour
	DefaultMaxConcurrency = 4
	// MinByteBudget is the floor of the 2 × size rule, so that tiny objects
	// still allow a few retries.
	MinByteBudget = 1 << 20
)

// NextChunk returns how many bytes to reserve for the next step of a range
// that still has remainingInRange bytes to send: the smaller of the two,
// never negative (0 means the range is done). A chunkSize <= 0 is taken as
// DefaultChunk, so that a misconfiguration cannot turn the budget loop into
// one that never advances.
func NextChunk(remainingInRange, chunkSize int64) int64 {
	if chunkSize <= 0 {
		chunkSize = DefaultChunk
	}
	return max(0, min(remainingInRange, chunkSize))
}

// DrawAhead returns the least a request of a session draws at a time, so
// that a run of small ranges draws once for many and what one response
// cannot send stays warm for the next (gateway warm sessions): one chunk,
// at most what a process keeps warm (keep), and at most a sixteenth of
// the budget, so that what one process holds never starves the session's
// requests on other processes. Never below 1.
func DrawAhead(keep, chunk, byteBudget int64) int64 {
	if chunk <= 0 {
		chunk = DefaultChunk
	}
	return max(1, min(keep, chunk, byteBudget/16))
}

// DrawSize returns how many bytes one draw of a response with left bytes
// still to send asks for: the next chunk of its range (NextChunk), but at
// least ahead (DrawAhead).
func DrawSize(left, chunk, ahead int64) int64 {
	return max(NextChunk(left, chunk), ahead)
}

// Keep splits the budget a process holds for a session after a complete
// response into what it keeps warm for the session's next request (at
// most keep) and what it gives back to the database at once. Negative
// values count as 0.
func Keep(held, keep int64) (kept, give int64) {
	held, keep = max(held, 0), max(keep, 0)
	kept = min(held, keep)
	return kept, held - kept
}

// DefaultByteBudget returns SPEC §4's default byte budget for an object of
// objectSize bytes: twice its size, at least MinByteBudget, saturating at
// math.MaxInt64 instead of overflowing. A negative size counts as 0.
func DefaultByteBudget(objectSize int64) int64 {
	if objectSize > math.MaxInt64/2 {
		return math.MaxInt64
	}
	return max(2*objectSize, MinByteBudget)
}

// Defaults are the session settings of a link or of the gateway's
// configuration. A zero (or negative) field means "not set".
type Defaults struct {
	TTL            time.Duration
	ByteBudget     int64 // 0: DefaultByteBudget(object size)
	MaxConcurrency int
}

// Or returns d with each unset field taken from fallback.
func (d Defaults) Or(fallback Defaults) Defaults {
	if d.TTL <= 0 {
		d.TTL = fallback.TTL
	}
	if d.ByteBudget <= 0 {
		d.ByteBudget = fallback.ByteBudget
	}
	if d.MaxConcurrency <= 0 {
		d.MaxConcurrency = fallback.MaxConcurrency
	}
	return d
}

// Resolve returns the settings of a new session on an object of objectSize
// bytes, replacing each unset field of d with its SPEC §4 default:
// DefaultTTL, DefaultByteBudget(objectSize) and DefaultMaxConcurrency. To
// layer a link's settings over the gateway's, use
// link.Or(gateway).Resolve(size).
func (d Defaults) Resolve(objectSize int64) (ttl time.Duration, budget int64, maxConc int) {
	ttl, budget, maxConc = d.TTL, d.ByteBudget, d.MaxConcurrency
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if budget <= 0 {
		budget = DefaultByteBudget(objectSize)
	}
	if maxConc <= 0 {
		maxConc = DefaultMaxConcurrency
	}
	return ttl, budget, maxConc
}

// SessionExpiry returns when a session minted at now with the given ttl
// expires: now+ttl, but never later than linkExpiresAt+ttl (SPEC §4: a
// session never outlives its link's expiry plus its own ttl). A zero
// linkExpiresAt yields a time long past, so a link missing its expiry fails
// closed.
func SessionExpiry(now, linkExpiresAt time.Time, ttl time.Duration) time.Time {
	a, b := now.Add(ttl), linkExpiresAt.Add(ttl)
	if b.Before(a) {
		return b
	}
	return a
}
