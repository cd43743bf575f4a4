package sessions

import (
	"math"
	"testing"
	"time"
)

func TestNextChunk(t *testing.T) {
	tests := []struct {
		remaining, chunk, want int64
	}{
		{100, 10, 10},
		{10, 100, 10},
		{10, 10, 10},
		{0, 10, 0},
		{-5, 10, 0},
		{math.MaxInt64, DefaultChunk, DefaultChunk},
		{100, 0, 100},
		{1 << 30, 0, DefaultChunk},
		{1 << 30, -1, DefaultChunk},
		{-1, -1, 0},
	}
	for _, test := range tests {
		if got := NextChunk(test.remaining, test.chunk); got != test.want {
			t.Errorf("NextChunk(%d, %d) = %d, want %d", test.remaining, test.chunk, got, test.want)
		}
	}
}

func TestDefaultByteBudget(t *testing.T) {
	tests := []struct {
		size, want int64
	}{
		{0, 1 << 20},
		{-1, 1 << 20},
		{math.MinInt64, 1 << 20},
		{1, 1 << 20},
		{1 << 19, 1 << 20},
		{1<<19 + 1, 1<<20 + 2},
		{1 << 30, 1 << 31},
		{math.MaxInt64 / 2, math.MaxInt64 - 1},
		{math.MaxInt64/2 + 1, math.MaxInt64},
		{math.MaxInt64, math.MaxInt64},
	}
	for _, test := range tests {
		if got := DefaultByteBudget(test.size); got != test.want {
			t.Errorf("DefaultByteBudget(%d) = %d, want %d", test.size, got, test.want)
		}
	}
}

func TestDefaultsResolve(t *testing.T) {
	tests := []struct {
		d       Defaults
		size    int64
		ttl     time.Duration
		budget  int64
		maxConc int
	}{
		{Defaults{}, 10 << 20, time.Hour, 20 << 20, 4},
		{Defaults{}, 0, time.Hour, 1 << 20, 4},
		{Defaults{TTL: time.Minute}, 10 << 20, time.Minute, 20 << 20, 4},
		{Defaults{ByteBudget: 5}, 10 << 20, time.Hour, 5, 4},
		{Defaults{MaxConcurrency: 1}, 10 << 20, time.Hour, 20 << 20, 1},
		{Defaults{TTL: 2 * time.Hour, ByteBudget: 1 << 40, MaxConcurrency: 16}, 1, 2 * time.Hour, 1 << 40, 16},
		{Defaults{TTL: -time.Second, ByteBudget: -1, MaxConcurrency: -1}, 10 << 20, time.Hour, 20 << 20, 4},
	}
	for _, test := range tests {
		ttl, budget, maxConc := test.d.Resolve(test.size)
		if ttl != test.ttl || budget != test.budget || maxConc != test.maxConc {
			t.Errorf("%+v.Resolve(%d) = %v, %d, %d; want %v, %d, %d",
				test.d, test.size, ttl, budget, maxConc, test.ttl, test.budget, test.maxConc)
		}
	}
}

func TestDefaultsOr(t *testing.T) {
	gateway := Defaults{TTL: 30 * time.Minute, ByteBudget: 1 << 30, MaxConcurrency: 8}
	tests := []struct {
		link, want Defaults
	}{
		{Defaults{}, gateway},
		{Defaults{TTL: time.Minute}, Defaults{TTL: time.Minute, ByteBudget: 1 << 30, MaxConcurrency: 8}},
		{Defaults{ByteBudget: 7, MaxConcurrency: 2}, Defaults{TTL: 30 * time.Minute, ByteBudget: 7, MaxConcurrency: 2}},
	}
	for _, test := range tests {
		if got := test.link.Or(gateway); got != test.want {
			t.Errorf("%+v.Or(%+v) = %+v, want %+v", test.link, gateway, got, test.want)
		}
	}
	// Unset in both: Resolve still supplies SPEC §4's defaults.
	ttl, budget, maxConc := Defaults{}.Or(Defaults{}).Resolve(3 << 20)
	if ttl != DefaultTTL || budget != 6<<20 || maxConc != DefaultMaxConcurrency {
		t.Errorf("Defaults{}.Or(Defaults{}).Resolve(3 MiB) = %v, %d, %d", ttl, budget, maxConc)
	}
}

func TestSessionExpiry(t *testing.T) {
	now := time.Date(2024, 5, 6, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		linkExpiresAt time.Time
		ttl           time.Duration
		want          time.Time
	}{
		// The link outlives the session: now+ttl.
		{now.Add(24 * time.Hour), time.Hour, now.Add(time.Hour)},
		// The link expires in 10 minutes: the session still gets its ttl
		// past the link's expiry, but no more.
		{now.Add(10 * time.Minute), time.Hour, now.Add(time.Hour)},
		{now.Add(-10 * time.Minute), time.Hour, now.Add(50 * time.Minute)},
		{now, time.Hour, now.Add(time.Hour)},
		// A link that expired long ago gives a session that is born dead.
		{now.Add(-2 * time.Hour), time.Hour, now.Add(-time.Hour)},
		// Fail closed without a link expiry.
		{time.Time{}, time.Hour, time.Time{}.Add(time.Hour)},
	}
	for _, test := range tests {
		if got := SessionExpiry(now, test.linkExpiresAt, test.ttl); !got.Equal(test.want) {
			t.Errorf("SessionExpiry(%v, %v, %v) = %v, want %v", now, test.linkExpiresAt, test.ttl, got, test.want)
		}
	}
}

func TestDrawAheadDrawSizeAndKeep(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct{ keep, chunk, budget, want int64 }{
		{8 * mib, 8 * mib, 1 << 40, 8 * mib},  // a large budget: one chunk
		{8 * mib, 8 * mib, 64 * mib, 4 * mib}, // a sixteenth of the budget
		{2 * mib, 8 * mib, 1 << 40, 2 * mib},  // what a process keeps warm
		{8 * mib, 1 * mib, 1 << 40, 1 * mib},  // the chunk
		{8 * mib, 0, 1 << 40, 8 * mib},        // a chunk <= 0 is the default chunk
		{8 * mib, 8 * mib, 10, 1},             // never below 1
		{0, 8 * mib, 1 << 40, 1},
	} {
		if got := DrawAhead(c.keep, c.chunk, c.budget); got != c.want {
			t.Errorf("DrawAhead(%d, %d, %d) = %d, want %d", c.keep, c.chunk, c.budget, got, c.want)
		}
	}
	for _, c := range []struct{ left, chunk, ahead, want int64 }{
		{64 << 10, 8 * mib, 4 * mib, 4 * mib}, // a small range draws ahead for the next
		{20 * mib, 8 * mib, 4 * mib, 8 * mib}, // a long one, a chunk at a time
		{0, 8 * mib, 4 * mib, 4 * mib},
		{3 * mib, 8 * mib, 1, 3 * mib}, // only what the range needs
	} {
		if got := DrawSize(c.left, c.chunk, c.ahead); got != c.want {
			t.Errorf("DrawSize(%d, %d, %d) = %d, want %d", c.left, c.chunk, c.ahead, got, c.want)
		}
	}
	for _, c := range []struct{ held, keep, kept, give int64 }{
		{5, 10, 5, 0},
		{15, 10, 10, 5},
		{10, 10, 10, 0},
		{7, 0, 0, 7},
		{-3, 10, 0, 0},
		{5, -1, 0, 5},
	} {
		if kept, give := Keep(c.held, c.keep); kept != c.kept || give != c.give {
			t.Errorf("Keep(%d, %d) = %d, %d; want %d, %d", c.held, c.keep, kept, give, c.kept, c.give)
		}
	}
}
