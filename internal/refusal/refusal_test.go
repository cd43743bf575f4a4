package refusal

import (
	"net/netip"
	"strconv"
	"testing"
	"time"
)

var (
	t0     = time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	alice  = netip.MustParseAddr("198.51.100.1")
	bob    = netip.MustParseAddr("198.51.100.2")
	tokenA = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	tokenB = "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB"
)

// burst counts n refusals of k at at and returns the penalty the last
// one started, if any.
func burst(l *Limiter, k Key, at time.Time, n int) (Penalty, bool) {
	var (
		p  Penalty
		ok bool
	)
	for range n {
		p, ok = l.Refused(k, at, 1)
	}
	return p, ok
}

// step is one call in a scenario, at t0 + at.
type step struct {
	at      time.Duration
	refuse  int           // refusals to count; 0 asks Throttled instead
	started bool          // the last refusal started a penalty
	left    time.Duration // the penalty's Left (started, or throttled)
	strike  int
	// throttled is Throttled's answer (when refuse is 0).
	throttled bool
}

func TestLimiterScenarios(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"BelowTheBurstNothingHappens", []step{
			{at: 0, refuse: 49},
			{at: time.Second, throttled: false},
		}},
		{"TheBurstthRefusalStartsAPenalty", []step{
			{at: 0, refuse: 49},
			{at: time.Second, refuse: 1, started: true, left: 5 * time.Second, strike: 1},
			{at: time.Second, throttled: true, left: 5 * time.Second, strike: 1},
			{at: 3 * time.Second, throttled: true, left: 3 * time.Second, strike: 1},
			{at: 6 * time.Second, throttled: false},
		}},
		{"RefusalsSpreadOverWindowsNeverStartOne", []step{
			{at: 0, refuse: 49},
			{at: 10 * time.Second, refuse: 49},
			{at: 20 * time.Second, refuse: 49},
			{at: 21 * time.Second, throttled: false},
		}},
		{"EachRepeatDoublesUpToTheCap", []step{
			{at: 0, refuse: 50, started: true, left: 5 * time.Second, strike: 1},
			{at: 5 * time.Second, refuse: 50, started: true, left: 10 * time.Second, strike: 2},
			{at: 15 * time.Second, refuse: 50, started: true, left: 20 * time.Second, strike: 3},
			{at: 35 * time.Second, refuse: 50, started: true, left: 40 * time.Second, strike: 4},
			{at: 75 * time.Second, refuse: 50, started: true, left: 80 * time.Second, strike: 5},
			{at: 155 * time.Second, refuse: 50, started: true, left: 160 * time.Second, strike: 6},
			{at: 315 * time.Second, refuse: 50, started: true, left: 5 * time.Minute, strike: 7},
			{at: 615 * time.Second, refuse: 50, started: true, left: 5 * time.Minute, strike: 8},
		}},
		{"RefusalsUnderPenaltyAreNotCounted", []step{
			// Requests that passed Throttled just before the penalty.
			{at: 0, refuse: 50, started: true, left: 5 * time.Second, strike: 1},
			{at: time.Second, refuse: 200},
			{at: 5 * time.Second, refuse: 49},
			{at: 5 * time.Second, throttled: false},
		}},
		{"QuietForForgiveIsForgiven", []step{
			{at: 0, refuse: 50, started: true, left: 5 * time.Second, strike: 1},
			{at: 5*time.Second + DefaultForgive, refuse: 50, started: true, left: 5 * time.Second, strike: 1},
		}},
		{"ARequestUnderPenaltyIsNotQuiet", []step{
			{at: 0, refuse: 50, started: true, left: 5 * time.Second, strike: 1},
			{at: 4 * time.Second, throttled: true, left: time.Second, strike: 1},
			{at: 4*time.Second + DefaultForgive - time.Second, refuse: 50, started: true, left: 10 * time.Second, strike: 2},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := New(Config{})
			k := l.Key(alice, "link", tokenA)
			for i, s := range tc.steps {
				at := t0.Add(s.at)
				if s.refuse == 0 {
					p, ok := l.Throttled(k, at)
					if ok != s.throttled || ok && (p.Left != s.left || p.Strike != s.strike) {
						t.Fatalf("step %d: Throttled(t0+%v) = %+v, %v, want {Left:%v Strike:%d}, %v", i, s.at, p, ok, s.left, s.strike, s.throttled)
					}
					if some := l.AnyPenalty(at); some != s.throttled {
						t.Fatalf("step %d: AnyPenalty(t0+%v) = %v, want %v", i, s.at, some, s.throttled)
					}
					if quiet := l.Quiet(); quiet == s.throttled {
						t.Fatalf("step %d: Quiet() = %v after AnyPenalty(t0+%v) = %v", i, quiet, s.at, s.throttled)
					}
					continue
				}
				p, ok := burst(l, k, at, s.refuse)
				if ok != s.started || ok && (p.Left != s.left || p.Strike != s.strike) {
					t.Fatalf("step %d: %d refusals at t0+%v: last = %+v, %v, want {Left:%v Strike:%d}, %v", i, s.refuse, s.at, p, ok, s.left, s.strike, s.started)
				}
			}
		})
	}
}

func TestPenaltyIsPerClientAndToken(t *testing.T) {
	l := New(Config{})
	k := l.Key(alice, "link", tokenA)
	if _, ok := burst(l, k, t0, 50); !ok {
		t.Fatal("no penalty after 50 refusals")
	}
	for _, other := range []struct {
		name string
		k    Key
	}{
		{"AnotherAddress", l.Key(bob, "link", tokenA)},
		{"AnotherToken", l.Key(alice, "link", tokenB)},
		{"AnotherKind", l.Key(alice, "session", tokenA)},
	} {
		if other.k == k {
			t.Errorf("%s: same key", other.name)
		}
		if _, ok := l.Throttled(other.k, t0); ok {
			t.Errorf("%s is throttled with alice's token", other.name)
		}
	}
	if _, ok := l.Throttled(k, t0); !ok {
		t.Error("alice's own key is not throttled")
	}
}

func TestRefusedCountsN(t *testing.T) {
	l := New(Config{})
	k := l.Key(alice, "link", tokenA)
	if _, ok := l.Refused(k, t0, 0); ok || l.Len() != 0 {
		t.Fatal("0 refusals counted")
	}
	l.Refused(k, t0, 2)
	if _, ok := burst(l, k, t0, 47); ok {
		t.Fatal("a penalty after 2 + 47 refusals")
	}
	if _, ok := burst(l, k, t0, 1); !ok {
		t.Fatal("no penalty after 2 + 48 refusals")
	}
}

func TestTheTableIsBoundedAndKeepsKeysUnderPenalty(t *testing.T) {
	l := New(Config{Entries: 512})
	k := l.Key(alice, "link", tokenA)
	if _, ok := burst(l, k, t0, 50); !ok {
		t.Fatal("no penalty after 50 refusals")
	}
	for i := range 20000 {
		l.Refused(l.Key(bob, "link", strconv.Itoa(i)), t0.Add(time.Second), 1)
	}
	if n := l.Len(); n != 512 {
		t.Errorf("Len() = %d after 20000 keys, want the table's 512", n)
	}
	if _, ok := l.Throttled(k, t0.Add(2*time.Second)); !ok {
		t.Error("the key under penalty was displaced by keys that were not")
	}
}

func TestANewKeyDisplacesTheLeastValuable(t *testing.T) {
	l := New(Config{Entries: ways}) // one set
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	old := make([]Key, ways)
	for i := range old {
		old[i] = l.Key(alice, "link", strconv.Itoa(i))
	}
	// old[0] under penalty until t0+5s, seen first; old[1] seen last;
	// old[2], old[3], … in that order between.
	burst(l, old[0], ms(0), 50)
	for i := 2; i < ways; i++ {
		l.Refused(old[i], ms(100*i), 1)
	}
	l.Refused(old[1], ms(1000), 1)
	for i, want := range []Key{old[2], old[3], old[4]} {
		k := l.Key(bob, "link", strconv.Itoa(i))
		l.Refused(k, ms(2000), 1)
		if l.sets[0].find(k) == nil || l.sets[0].find(want) != nil {
			t.Fatalf("new key %d did not displace old[%d], the one seen least recently", i, i+2)
		}
	}
	for i := 3; i < 3*ways; i++ {
		l.Refused(l.Key(bob, "link", strconv.Itoa(i)), ms(2000+i), 1)
	}
	if l.sets[0].find(old[0]) == nil {
		t.Error("the key under penalty was displaced")
	}
}

func TestHoldIsBoundedPerKey(t *testing.T) {
	l := New(Config{})
	k := l.Key(alice, "link", tokenA)
	if l.Hold(k) {
		t.Fatal("Hold granted for a key never refused")
	}
	burst(l, k, t0, 50)
	for i := range DefaultHeldPerKey {
		if !l.Hold(k) {
			t.Fatalf("Hold %d refused, want %d granted", i+1, DefaultHeldPerKey)
		}
	}
	if l.Hold(k) {
		t.Fatalf("Hold %d granted, want at most %d", DefaultHeldPerKey+1, DefaultHeldPerKey)
	}
	l.Release(k)
	if !l.Hold(k) {
		t.Error("Hold refused after a Release")
	}
}

func TestConfigDefaults(t *testing.T) {
	for _, tc := range []struct {
		in   Config
		want Config
	}{
		{Config{}, Config{Burst: 50, Window: 10 * time.Second, Penalty: 5 * time.Second, MaxPenalty: 5 * time.Minute,
			Forgive: 10 * time.Minute, Entries: 16384, HeldPerKey: 2}},
		{Config{Penalty: 10 * time.Minute}, Config{Burst: 50, Window: 10 * time.Second, Penalty: 10 * time.Minute,
			MaxPenalty: 10 * time.Minute, Forgive: 10 * time.Minute, Entries: 16384, HeldPerKey: 2}},
		{Config{Burst: 3, MaxPenalty: time.Hour}, Config{Burst: 3, Window: 10 * time.Second, Penalty: 5 * time.Second,
			MaxPenalty: time.Hour, Forgive: 10 * time.Minute, Entries: 16384, HeldPerKey: 2}},
	} {
		if got := tc.in.withDefaults(); got != tc.want {
			t.Errorf("%+v.withDefaults() = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

// BenchmarkRefused is what a genuine token's refusal adds: one key,
// hashed and counted (its lookup cost far more).
func BenchmarkRefused(b *testing.B) {
	l := New(Config{})
	b.ReportAllocs()
	for b.Loop() {
		l.Refused(l.Key(alice, "link", tokenA), t0, 1)
	}
}

// BenchmarkRefusedParallel is BenchmarkRefused from every core, each on
// its own key.
func BenchmarkRefusedParallel(b *testing.B) {
	l := New(Config{})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		k := l.Key(alice, "link", strconv.Itoa(int(time.Now().UnixNano())))
		for pb.Next() {
			l.Refused(k, t0, 1)
		}
	})
}

// BenchmarkRefusedNewKeys is many clients, each refused once: every
// refusal inserts a key, displacing one once the table is full.
func BenchmarkRefusedNewKeys(b *testing.B) {
	l := New(Config{})
	keys := make([]Key, 1<<16)
	for i := range keys {
		keys[i] = l.Key(alice, "link", strconv.Itoa(i))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		l.Refused(keys[i%len(keys)], t0, 1)
		i++
	}
}

// BenchmarkThrottledWhileSomeKeyIsUnderPenalty is the check every
// request pays while any client is under penalty (none pays it
// otherwise: Quiet is one atomic load).
func BenchmarkThrottledWhileSomeKeyIsUnderPenalty(b *testing.B) {
	l := New(Config{})
	burst(l, l.Key(bob, "link", tokenB), t0, 50)
	b.ReportAllocs()
	for b.Loop() {
		if !l.Quiet() && l.AnyPenalty(t0) {
			l.Throttled(l.Key(alice, "link", tokenA), t0)
		}
	}
}

// The admin API's rule (SPEC §6): more than 20 failed authentications
// from one address within 10 s, and its requests are 429 with Retry-After
// without any key checked, whatever key they carry; another address is
// not affected.
func TestMoreThanTwentyFailedAuthenticationsThrottleTheAddress(t *testing.T) {
	l := New(AuthConfig())
	k := l.AddrKey(alice, "admin")
	// 30 requests with bad keys, 300 ms apart: each asks Throttled first
	// (a 429 checks no key), then counts its failure.
	var unauthorized, throttled int
	var retryAfter time.Duration
	for i := range 30 {
		at := t0.Add(time.Duration(i) * 300 * time.Millisecond)
		if p, ok := l.Throttled(k, at); ok {
			throttled++
			retryAfter = p.Left
			continue
		}
		unauthorized++
		l.Refused(k, at, 1)
	}
	if unauthorized != AuthFailures+1 || throttled != 30-AuthFailures-1 {
		t.Fatalf("30 bad keys: %d checked (401), %d throttled (429); want %d and %d", unauthorized, throttled, AuthFailures+1, 30-AuthFailures-1)
	}
	// The 21st failure came at t0+6s: the penalty runs to t0+16s.
	if want := 10*time.Second - 2700*time.Millisecond; retryAfter != want {
		t.Fatalf("Retry-After of the last 429 = %v, want %v", retryAfter, want)
	}
	if _, ok := l.Throttled(l.AddrKey(bob, "admin"), t0.Add(9*time.Second)); ok {
		t.Fatal("another address is throttled")
	}
	// A good key from the throttled address is still 429: Throttled is
	// asked before the key.
	if p, ok := l.Throttled(k, t0.Add(16*time.Second-time.Millisecond)); !ok || p.Left != time.Millisecond {
		t.Fatalf("just before the penalty ends Throttled = %+v, %v", p, ok)
	}
	if _, ok := l.Throttled(k, t0.Add(16*time.Second)); ok {
		t.Fatal("still throttled when the penalty ended")
	}
	// Twenty failures in a window never throttle.
	m := New(AuthConfig())
	j := m.AddrKey(alice, "admin")
	if _, started := burst(m, j, t0, AuthFailures); started {
		t.Fatal("20 failures started a penalty")
	}
	if _, ok := m.Throttled(j, t0); ok {
		t.Fatal("20 failures throttle the address")
	}
	if p, started := burst(m, j, t0.Add(AuthWindow-time.Nanosecond), 1); !started || p.Left != AuthWindow {
		t.Fatalf("the 21st failure within 10 s = %+v, %v; want a penalty of 10 s", p, started)
	}
}

func TestAddrKeyIsPerAddressAndKindAndNoTokensKey(t *testing.T) {
	l := New(AuthConfig())
	k := l.AddrKey(alice, "admin")
	for name, other := range map[string]Key{
		"another address":      l.AddrKey(bob, "admin"),
		"another kind":         l.AddrKey(alice, "console"),
		"a token with no text": l.Key(alice, "admin", ""),
	} {
		if other == k {
			t.Errorf("AddrKey(alice, admin) equals the key of %s", name)
		}
	}
	if l.AddrKey(alice, "admin") != k {
		t.Error("AddrKey is not stable")
	}
}
