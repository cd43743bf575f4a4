package ledgertest

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/ledger"
)

// mustKey creates a key named name holding scopes and returns it with
// its text.
func (e *env) mustKey(tb testing.TB, name string, scopes ...apikey.Scope) (*ledger.Key, string) {
	tb.Helper()
	return mustKeyOn(tb, e.ctx, e.l, name, time.Time{}, scopes...)
}

func mustKeyOn(tb testing.TB, ctx context.Context, l ledger.Ledger, name string, expires time.Time, scopes ...apikey.Scope) (*ledger.Key, string) {
	tb.Helper()
	text, hash := apikey.New()
	k, err := l.KeyCreate(ctx, ledger.KeyCreateParams{Name: name, Scopes: apikey.Of(scopes...), SecretHash: hash, ExpiresAt: expires})
	if err != nil {
		tb.Fatalf("KeyCreate(%s) = %v", name, err)
	}
	return k, text
}

// as returns the suite's context carrying k as the actor of request
// requestID.
func (e *env) as(k *ledger.Key, requestID string) context.Context {
	return ledger.WithActor(e.ctx, ledger.Actor{KeyID: k.ID, KeyName: k.Name, RequestID: requestID})
}

func exerciseKeys(t *testing.T, newLedger NewLedger) {
	t.Run("KeysAreCreatedListedAndLookedUpByTheirHashOnly", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		var keys []*ledger.Key
		var texts []string
		for i, name := range []string{"ci uploads", "support top-ups", "release bot"} {
			e.clock.Add(time.Millisecond)
			var expires time.Time
			if i == 1 {
				expires = e.clock.Now().Add(30 * 24 * time.Hour)
			}
			k, text := mustKeyOn(t, e.ctx, e.l, name, expires, apikey.LinksRead, apikey.ObjectsWrite)
			if id, err := uuid.Parse(k.ID); err != nil || id.Version() != 7 {
				t.Fatalf("key id %q is not a UUIDv7 (%v)", k.ID, err)
			}
			keys, texts = append(keys, k), append(texts, text)
		}
		for i, k := range keys {
			got, err := e.l.KeyGetByHash(e.ctx, apikey.Hash(texts[i]))
			if err != nil {
				t.Fatalf("KeyGetByHash(%s) = %v", k.Name, err)
			}
			if !sameKey(got, k) || got.ReadAt.IsZero() || got.LastUsedAt != nil {
				t.Fatalf("KeyGetByHash = %+v, want %+v with the database's now", got, k)
			}
			if byID, err := e.l.KeyGet(e.ctx, k.ID); err != nil || !sameKey(byID, k) {
				t.Fatalf("KeyGet(%s) = %+v, %v", k.ID, byID, err)
			}
		}
		if got := keys[1].ExpiresAt; got == nil || !got.Equal(e.clock.Now().Add(-time.Millisecond).Add(30*24*time.Hour)) {
			t.Fatalf("expires_at = %v", got)
		}
		var listed []ledger.Key
		cursor := ""
		for pages := 1; ; pages++ {
			p, err := e.l.KeyList(e.ctx, cursor, 2)
			if err != nil {
				t.Fatal(err)
			}
			listed = append(listed, p.Keys...)
			if cursor = p.Next; cursor == "" {
				if pages != 2 {
					t.Fatalf("%d pages of 2 for 3 keys, want 2", pages)
				}
				break
			}
		}
		if len(listed) != 3 {
			t.Fatalf("KeyList listed %d keys, want 3", len(listed))
		}
		for i := range listed {
			if k := keys[len(keys)-1-i]; !sameKey(&listed[i], k) {
				t.Fatalf("KeyList[%d] = %+v, want %+v (newest first)", i, listed[i], k)
			}
		}
		if _, err := e.l.KeyGetByHash(e.ctx, apikey.Hash(texts[0]+"x")); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("KeyGetByHash of an unknown secret = %v, want ErrNotFound", err)
		}
		if _, err := e.l.KeyGetByHash(e.ctx, []byte(texts[0])); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("KeyGetByHash of the text itself = %v, want ErrNotFound", err)
		}
		if _, err := e.l.KeyGet(e.ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("KeyGet of an unknown id = %v, want ErrNotFound", err)
		}
		for _, bad := range []struct {
			cursor string
			limit  int
		}{{"%%%", 2}, {"", -1}, {"", ledger.MaxListLimit + 1}} {
			if _, err := e.l.KeyList(e.ctx, bad.cursor, bad.limit); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("KeyList(%q, %d) = %v, want ErrInvalid", bad.cursor, bad.limit, err)
			}
		}
	})
	t.Run("InvalidKeysAreRefused", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		_, hash := apikey.New()
		good := ledger.KeyCreateParams{Name: "n", Scopes: apikey.Of(apikey.LinksRead), SecretHash: hash}
		for _, c := range []struct {
			what string
			edit func(*ledger.KeyCreateParams)
		}{
			{"no name", func(p *ledger.KeyCreateParams) { p.Name = "" }},
			{"a name of spaces", func(p *ledger.KeyCreateParams) { p.Name = "  " }},
			{"a name too long", func(p *ledger.KeyCreateParams) { p.Name = strings.Repeat("é", ledger.MaxKeyName+1) }},
			{"a control character", func(p *ledger.KeyCreateParams) { p.Name = "ci\nbot" }},
			{"not UTF-8", func(p *ledger.KeyCreateParams) { p.Name = "ci\xffbot" }},
			{"no scope", func(p *ledger.KeyCreateParams) { p.Scopes = 0 }},
			{"a scope no one knows", func(p *ledger.KeyCreateParams) { p.Scopes = 1 << 15 }},
			{"no hash", func(p *ledger.KeyCreateParams) { p.SecretHash = nil }},
			{"a short hash", func(p *ledger.KeyCreateParams) { p.SecretHash = hash[:31] }},
			{"an expiry no backend stores", func(p *ledger.KeyCreateParams) {
				p.ExpiresAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
			}},
		} {
			p := good
			c.edit(&p)
			if _, err := e.l.KeyCreate(e.ctx, p); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("KeyCreate with %s = %v, want ErrInvalid", c.what, err)
			}
		}
		if p, err := e.l.KeyList(e.ctx, "", 0); err != nil || len(p.Keys) != 0 {
			t.Fatalf("after refused creations KeyList = %d keys, %v", len(p.Keys), err)
		}
		long := good
		long.Name = strings.Repeat("é", ledger.MaxKeyName)
		if k, err := e.l.KeyCreate(e.ctx, long); err != nil || k.Name != long.Name {
			t.Fatalf("KeyCreate with a name of %d characters = %v, %v", ledger.MaxKeyName, k, err)
		}
		again := good
		again.Name = "another"
		if _, err := e.l.KeyCreate(e.ctx, again); !errors.Is(err, ledger.ErrConflict) {
			t.Fatalf("KeyCreate with a hash in use = %v, want ErrConflict", err)
		}
	})
	t.Run("ARevokedKeyIsNeverValidAndRevokingIsIdempotent", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		k, text := e.mustKey(t, "ci", apikey.LinksWrite)
		other, otherText := e.mustKey(t, "other", apikey.LinksWrite)
		if err := e.l.KeyRevoke(e.ctx, k.ID); err != nil {
			t.Fatal(err)
		}
		got, err := e.l.KeyGetByHash(e.ctx, apikey.Hash(text))
		if !errors.Is(err, ledger.ErrRefused) || ledger.ReasonOf(err) != ledger.ReasonRevoked {
			t.Fatalf("KeyGetByHash of a revoked key = %v, want ErrRefused (revoked)", err)
		}
		if got == nil || got.ID != k.ID || got.RevokedAt == nil || got.Refusal(got.ReadAt) != ledger.ReasonRevoked {
			t.Fatalf("KeyGetByHash of a revoked key returned %+v, want the key with its revocation", got)
		}
		first := *got.RevokedAt
		e.clock.Add(time.Minute)
		if err := e.l.KeyRevoke(e.ctx, k.ID); err != nil {
			t.Fatalf("revoking again = %v", err)
		}
		if again, _ := e.l.KeyGet(e.ctx, k.ID); again.RevokedAt == nil || !again.RevokedAt.Equal(first) {
			t.Fatalf("revoked_at %v after revoking again, want the first %v", again.RevokedAt, first)
		}
		if _, err := e.l.KeyGetByHash(e.ctx, apikey.Hash(otherText)); err != nil {
			t.Fatalf("revoking %s refused %s: %v", k.Name, other.Name, err)
		}
		if err := e.l.KeyRevoke(e.ctx, "00000000-0000-0000-0000-000000000000"); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("KeyRevoke of an unknown key = %v, want ErrNotFound", err)
		}
		if _, err := e.l.KeyTouch(e.ctx, k.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := e.l.KeyGetByHash(e.ctx, apikey.Hash(text)); ledger.ReasonOf(err) != ledger.ReasonRevoked {
			t.Fatalf("a touched revoked key = %v, want still refused as revoked", err)
		}
	})
	t.Run("AKeyExpiresByTheDatabasesClock", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		_, text := mustKeyOn(t, e.ctx, e.l, "temp", e.clock.Now().Add(time.Hour), apikey.AuditRead)
		e.clock.Add(time.Hour - time.Microsecond)
		if k, err := e.l.KeyGetByHash(e.ctx, apikey.Hash(text)); err != nil || k.Refusal(k.ReadAt) != "" {
			t.Fatalf("1µs before its expiry KeyGetByHash = %+v, %v; want valid", k, err)
		}
		e.clock.Add(time.Microsecond)
		k, err := e.l.KeyGetByHash(e.ctx, apikey.Hash(text))
		if ledger.ReasonOf(err) != ledger.ReasonExpired || k == nil || !k.ReadAt.Equal(e.clock.Now()) {
			t.Fatalf("at its expiry KeyGetByHash = %+v, %v; want the key and ErrRefused (expired)", k, err)
		}
	})
	t.Run("KeyTouchWritesAtMostOnceAMinute", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		k, text := e.mustKey(t, "ci", apikey.LinksRead)
		lastUsed := func() *time.Time {
			t.Helper()
			got, err := e.l.KeyGetByHash(e.ctx, apikey.Hash(text))
			if err != nil {
				t.Fatal(err)
			}
			return got.LastUsedAt
		}
		t0 := e.clock.Now()
		touch := func(want bool) {
			t.Helper()
			wrote, err := e.l.KeyTouch(e.ctx, k.ID)
			if err != nil || wrote != want {
				t.Fatalf("KeyTouch at t0+%v = %v, %v; want wrote %v", e.clock.Now().Sub(t0), wrote, err, want)
			}
		}
		touch(true)
		if got := lastUsed(); got == nil || !got.Equal(t0) {
			t.Fatalf("last_used_at = %v, want t0 (the database's now)", got)
		}
		for _, step := range []time.Duration{time.Second, 20 * time.Second, 39*time.Second - time.Microsecond} {
			e.clock.Add(step)
			touch(false)
		}
		if got := lastUsed(); !got.Equal(t0) {
			t.Fatalf("within the minute last_used_at moved to %v", got)
		}
		e.clock.Add(time.Microsecond) // t0 + 1 min
		touch(true)
		if got := lastUsed(); !got.Equal(t0.Add(time.Minute)) {
			t.Fatalf("a minute on last_used_at = %v, want t0+1m", got)
		}
		// Many processes touching at the same instant: one write.
		e.clock.Add(90 * time.Second)
		var wrote atomic.Int32
		releaseAll(t, 16, func(int) error {
			ok, err := e.l.KeyTouch(e.ctx, k.ID)
			if ok {
				wrote.Add(1)
			}
			return err
		})
		if n := wrote.Load(); n != 1 {
			t.Fatalf("16 concurrent touches wrote %d times, want 1", n)
		}
		if got := lastUsed(); !got.Equal(e.clock.Now()) {
			t.Fatalf("after the concurrent touches last_used_at = %v, want %v", got, e.clock.Now())
		}
		if ok, err := e.l.KeyTouch(e.ctx, "00000000-0000-0000-0000-000000000000"); ok || err != nil {
			t.Fatalf("KeyTouch of an unknown key = %v, %v; want no write, no error", ok, err)
		}
	})
	t.Run("KeyTouchWritesOncePerMinuteOverTime", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		k, _ := e.mustKey(t, "ci", apikey.LinksRead)
		writes := 0
		for range 10 * 60 / 5 { // ten minutes of a request every 5 s
			ok, err := e.l.KeyTouch(e.ctx, k.ID)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				writes++
			}
			e.clock.Add(5 * time.Second)
		}
		if writes != 10 {
			t.Fatalf("ten minutes of touches every 5 s wrote %d times, want 10 (one a minute)", writes)
		}
	})
	t.Run("AScopeANewerGatewayWroteGrantsNothingHere", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		k, text := e.mustKey(t, "ci", apikey.LinksRead)
		// A newer gateway, mid-upgrade, gave the key a scope this one
		// does not know.
		if _, err := sqlOf(t, e.l).ExecContext(e.ctx, `UPDATE api_keys SET scopes = ? WHERE id = ?`,
			"links:read reports:read", k.ID); err != nil {
			t.Fatal(err)
		}
		got, err := e.l.KeyGetByHash(e.ctx, apikey.Hash(text))
		if err != nil || got.Scopes != apikey.Of(apikey.LinksRead) {
			t.Fatalf("KeyGetByHash = %+v, %v; want the key with links:read alone", got, err)
		}
	})
	t.Run("AKeyGivesOnlyScopesItHolds", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		admin, _ := e.mustKey(t, "key admin", apikey.KeysWrite, apikey.LinksRead, apikey.LinksWrite)
		reader, _ := e.mustKey(t, "reader", apikey.LinksRead)
		create := func(ctx context.Context, scopes ...apikey.Scope) error {
			_, hash := apikey.New()
			_, err := e.l.KeyCreate(ctx, ledger.KeyCreateParams{Name: "made", Scopes: apikey.Of(scopes...), SecretHash: hash})
			return err
		}
		if err := create(e.as(admin, "r1"), apikey.LinksRead, apikey.KeysWrite); err != nil {
			t.Fatalf("giving scopes held = %v", err)
		}
		var se *ledger.ScopeError
		if err := create(e.as(admin, "r2"), apikey.LinksRead, apikey.ObjectsDelete); !errors.As(err, &se) ||
			se.Missing != apikey.ObjectsDelete || !errors.Is(err, ledger.ErrForbidden) {
			t.Fatalf("giving objects:delete without holding it = %v, want a ScopeError naming objects:delete", err)
		}
		if err := create(e.as(reader, "r3"), apikey.LinksRead); !errors.As(err, &se) || se.Missing != apikey.KeysWrite {
			t.Fatalf("a key without keys:write making a key = %v, want a ScopeError naming keys:write", err)
		}
		boot := ledger.WithActor(e.ctx, ledger.Bootstrap("r4"))
		if err := create(boot, apikey.All().List()...); err != nil {
			t.Fatalf("the bootstrap token giving every scope = %v", err)
		}
		expiring, _ := mustKeyOn(t, e.ctx, e.l, "expiring", e.clock.Now().Add(time.Minute), apikey.KeysWrite, apikey.LinksRead)
		if err := create(e.as(expiring, "r5"), apikey.LinksRead); err != nil {
			t.Fatalf("a live expiring key = %v", err)
		}
		e.clock.Add(time.Minute)
		if err := create(e.as(expiring, "r6"), apikey.LinksRead); ledger.ReasonOf(err) != ledger.ReasonExpired {
			t.Fatalf("an expired key making a key = %v, want ErrRefused (expired)", err)
		}
		if err := e.l.KeyRevoke(e.ctx, admin.ID); err != nil {
			t.Fatal(err)
		}
		if err := create(e.as(admin, "r7"), apikey.LinksRead); ledger.ReasonOf(err) != ledger.ReasonRevoked {
			t.Fatalf("a revoked key making a key = %v, want ErrRefused (revoked)", err)
		}
		ghost := &ledger.Key{ID: "00000000-0000-7000-8000-000000000000", Name: "ghost"}
		if err := create(e.as(ghost, "r8"), apikey.LinksRead); ledger.ReasonOf(err) != ledger.ReasonUnknown {
			t.Fatalf("an unknown key making a key = %v, want ErrRefused (unknown)", err)
		}
		p, err := e.l.KeyList(e.ctx, "", 0)
		if err != nil || len(p.Keys) != 6 { // admin, reader, expiring and the three they made
			t.Fatalf("KeyList = %d keys, %v; want 6: a refused creation made none", len(p.Keys), err)
		}
	})
}

// sameKey compares what a key reads back as, ReadAt aside.
func sameKey(a, b *ledger.Key) bool {
	eq := func(x, y *time.Time) bool { return x == nil && y == nil || x != nil && y != nil && x.Equal(*y) }
	return a.ID == b.ID && a.Name == b.Name && a.Scopes == b.Scopes && a.CreatedAt.Equal(b.CreatedAt) &&
		eq(a.ExpiresAt, b.ExpiresAt) && eq(a.RevokedAt, b.RevokedAt) && eq(a.LastUsedAt, b.LastUsedAt)
}

// Secrets are what StoreSecrets made: the texts that must never reach a
// column, a dump or a database file, in each form one might take there.
type Secrets struct {
	Texts []string
}

// Needles returns every form of every secret a scan looks for: the text,
// its base64url body (without the key prefix), its 32 decoded bytes, and
// those in hex, upper and lower case.
func (s Secrets) Needles() [][]byte {
	var out [][]byte
	for _, t := range s.Texts {
		body := strings.TrimPrefix(t, apikey.Prefix)
		raw, err := base64.RawURLEncoding.DecodeString(body)
		if err != nil {
			panic(err)
		}
		out = append(out, []byte(t), []byte(body), raw,
			[]byte(hex.EncodeToString(raw)), []byte(strings.ToUpper(hex.EncodeToString(raw))))
	}
	return out
}

// StoreSecrets writes what the ledger keeps of operators' credentials:
// keys created by the bootstrap token and by a key (audited, with a
// revocation), keys used (touched), and console sessions of both. It
// returns the secrets, which only their hashes may represent at rest,
// for the backend to scan its own storage for.
func StoreSecrets(t *testing.T, l ledger.Ledger) Secrets {
	t.Helper()
	ctx := ledger.WithActor(context.Background(), ledger.Bootstrap("req-secrets-1"))
	var s Secrets
	admin, text := mustKeyOn(t, ctx, l, "key admin", time.Now().Add(time.Hour), apikey.KeysWrite, apikey.LinksRead)
	s.Texts = append(s.Texts, text)
	byAdmin := ledger.WithActor(context.Background(), ledger.Actor{KeyID: admin.ID, KeyName: admin.Name, RequestID: "req-secrets-2"})
	made, text := mustKeyOn(t, byAdmin, l, "made by a key", time.Time{}, apikey.LinksRead)
	s.Texts = append(s.Texts, text)
	for _, k := range []*ledger.Key{admin, made} {
		if _, err := l.KeyTouch(ctx, k.ID); err != nil {
			t.Fatal(err)
		}
		secret, hash := apikey.NewSession()
		if _, err := l.ConsoleSessionCreate(ctx, k.ID, hash); err != nil {
			t.Fatalf("ConsoleSessionCreate: %v", err)
		}
		if _, err := l.ConsoleSessionGet(ctx, hash); err != nil {
			t.Fatalf("ConsoleSessionGet: %v", err)
		}
		s.Texts = append(s.Texts, secret)
	}
	secret, hash := apikey.NewSession()
	if _, err := l.ConsoleSessionCreate(ctx, ledger.BootstrapKeyID, hash); err != nil {
		t.Fatal(err)
	}
	s.Texts = append(s.Texts, secret)
	if err := l.KeyRevoke(byAdmin, made.ID); err != nil {
		t.Fatal(err)
	}
	if p, err := l.AuditList(ctx, ledger.AuditQuery{}); err != nil || len(p.Entries) != 3 {
		t.Fatalf("AuditList = %d entries, %v; want key.created twice and key.revoked", len(p.Entries), err)
	}
	if !slices.ContainsFunc(s.Texts, func(x string) bool { return strings.HasPrefix(x, apikey.Prefix) }) {
		t.Fatal("no key among the secrets")
	}
	return s
}
