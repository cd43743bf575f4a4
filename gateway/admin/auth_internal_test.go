package admin

import (
	"context"
	"testing"
	"time"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/ledger"
)

// fakeKeys is ledger.Keys made of function fields; the methods a test
// does not set are not expected to be called.
type fakeKeys struct {
	ledger.Keys
	GetByHash func(ctx context.Context, hash []byte) (*ledger.Key, error)
	lookups   int
}

func (f *fakeKeys) KeyGetByHash(ctx context.Context, hash []byte) (*ledger.Key, error) {
	f.lookups++
	return f.GetByHash(ctx, hash)
}

// TestACachedKeyStopsAtItsExpiryByTheDatabasesClock: the database's clock
// is an hour ahead of the process's; a key that expires 100 ms after the
// database read it is trusted from the cache for 100 ms of the process's
// clock, not for KeyCacheTTL, and not judged by comparing the two clocks.
func TestACachedKeyStopsAtItsExpiryByTheDatabasesClock(t *testing.T) {
	text, hash := apikey.New()
	t0 := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	dbNow := t0.Add(time.Hour)
	expires := dbNow.Add(100 * time.Millisecond)
	keys := &fakeKeys{GetByHash: func(_ context.Context, h []byte) (*ledger.Key, error) {
		if string(h) != string(hash) {
			return nil, ledger.ErrNotFound
		}
		return &ledger.Key{ID: "k", Name: "short", Scopes: apikey.Of(apikey.LinksRead), ExpiresAt: &expires, ReadAt: dbNow}, nil
	}}
	v := newVerifier(keys, "", func() {})
	for _, c := range []struct {
		at      time.Duration
		lookups int
	}{{0, 1}, {99 * time.Millisecond, 1}, {100 * time.Millisecond, 2}} {
		p, fail, err := v.verify(context.Background(), "Bearer "+text, t0.Add(c.at))
		if err != nil || fail != nil || p.KeyID != "k" {
			t.Fatalf("verify at +%v = %+v, %+v, %v", c.at, p, fail, err)
		}
		if keys.lookups != c.lookups {
			t.Errorf("at +%v: %d lookups in all, want %d", c.at, keys.lookups, c.lookups)
		}
	}
	// Without an expiry the cache holds for KeyCacheTTL from the lookup.
	expires = dbNow.Add(time.Hour)
	start := t0.Add(time.Second)
	v.verify(context.Background(), "Bearer "+text, start)
	n := keys.lookups
	v.verify(context.Background(), "Bearer "+text, start.Add(KeyCacheTTL-time.Nanosecond))
	v.verify(context.Background(), "Bearer "+text, start.Add(KeyCacheTTL))
	if keys.lookups != n+1 {
		t.Errorf("%d lookups within and at the end of KeyCacheTTL, want 1 (at the end)", keys.lookups-n)
	}
}

// TestVerifyRefusesWithoutALookup: what is not the bootstrap token and
// not a key's shape costs no lookup, and says why.
func TestVerifyRefusesWithoutALookup(t *testing.T) {
	keys := &fakeKeys{GetByHash: func(context.Context, []byte) (*ledger.Key, error) { return nil, ledger.ErrNotFound }}
	v := newVerifier(keys, "the-bootstrap-token-0123456789", func() {})
	now := time.Now()
	for _, c := range []struct {
		header, reason string
		presented      bool
	}{
		{"", "missing", false},
		{"Basic dXNlcjpwYXNz", "malformed", false},
		{"Bearer", "malformed", false},
		{"Bearer ", "malformed", false},
		{"Bearer the-bootstrap-token-012345678", "malformed", true},
		{"Bearer dlk_short", "malformed", true},
		{"Bearer DLK_" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", "malformed", true},
	} {
		_, fail, err := v.verify(context.Background(), c.header, now)
		if err != nil || fail == nil || fail.reason != c.reason || fail.presented != c.presented {
			t.Errorf("verify(%q) = %+v, %v; want reason %s, presented %v", c.header, fail, err, c.reason, c.presented)
		}
	}
	if keys.lookups != 0 {
		t.Errorf("%d lookups, want none", keys.lookups)
	}
	for _, h := range []string{"Bearer the-bootstrap-token-0123456789", "bearer  the-bootstrap-token-0123456789 "} {
		if p, fail, err := v.verify(context.Background(), h, now); err != nil || fail != nil || !p.Bootstrap || p.Scopes != apikey.All() {
			t.Errorf("verify(%q) = %+v, %+v, %v; want the bootstrap token with every scope", h, p, fail, err)
		}
	}
	text, _ := apikey.New()
	if _, fail, _ := v.verify(context.Background(), "Bearer "+text, now); fail == nil || fail.reason != "unknown" || keys.lookups != 1 {
		t.Errorf("an unknown key: %+v after %d lookups, want reason unknown after 1", fail, keys.lookups)
	}
}

// BenchmarkVerify measures the credential check of one admin request, past
// the throttle: the bootstrap token, a key found in the cache, and a
// malformed bearer.
func BenchmarkVerify(b *testing.B) {
	text, _ := apikey.New()
	keys := &fakeKeys{GetByHash: func(context.Context, []byte) (*ledger.Key, error) {
		return &ledger.Key{ID: "k", Name: "bench", Scopes: apikey.All()}, nil
	}}
	v := newVerifier(keys, "the-bootstrap-token-0123456789", func() {})
	now := time.Now()
	for _, c := range []struct{ name, header string }{
		{"Bootstrap", "Bearer the-bootstrap-token-0123456789"},
		{"CachedKey", "Bearer " + text},
		{"Malformed", "Bearer dlk_short"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				v.verify(context.Background(), c.header, now)
			}
		})
	}
}
