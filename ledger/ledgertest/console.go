package ledgertest

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/ledger"
)

// mustConsole opens a console session for the key id and returns its
// secret's hash.
func (e *env) mustConsole(tb testing.TB, keyID string) (*ledger.ConsoleSession, []byte) {
	tb.Helper()
	_, hash := apikey.NewSession()
	c, err := e.l.ConsoleSessionCreate(e.ctx, keyID, hash)
	if err != nil {
		tb.Fatalf("ConsoleSessionCreate(%s) = %v", keyID, err)
	}
	return c, hash
}

// consoleAlive fails unless the session of hash is live now.
func (e *env) consoleAlive(tb testing.TB, hash []byte, when string) *ledger.ConsoleSession {
	tb.Helper()
	c, err := e.l.ConsoleSessionGet(e.ctx, hash)
	if err != nil {
		tb.Fatalf("%s: ConsoleSessionGet = %v, want the live session", when, err)
	}
	return c
}

// consoleGone fails unless the session of hash is refused now.
func (e *env) consoleGone(tb testing.TB, hash []byte, when string) {
	tb.Helper()
	if c, err := e.l.ConsoleSessionGet(e.ctx, hash); !errors.Is(err, ledger.ErrNotFound) {
		tb.Fatalf("%s: ConsoleSessionGet = %+v, %v; want ErrNotFound", when, c, err)
	}
}

func exerciseConsole(t *testing.T, newLedger NewLedger) {
	t.Run("ASessionActsWithItsKeyAndLastsTwelveHoursHoweverBusy", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		k, _ := e.mustKey(t, "operator", apikey.LinksRead, apikey.LinksWrite)
		t0 := e.clock.Now()
		c, hash := e.mustConsole(t, k.ID)
		if !c.ExpiresAt.Equal(t0.Add(12*time.Hour)) || !c.LastSeenAt.Equal(t0) || !c.CreatedAt.Equal(t0) {
			t.Fatalf("new session = %+v, want created and seen at t0, ending at t0+12h", c)
		}
		got := e.consoleAlive(t, hash, "at once")
		if got.ID != c.ID || got.Key.ID != k.ID || got.Key.Name != "operator" || got.Key.Scopes != k.Scopes {
			t.Fatalf("ConsoleSessionGet = %+v, want the session of key %+v", got, k)
		}
		for e.clock.Now().Before(t0.Add(12*time.Hour - 50*time.Minute)) {
			e.clock.Add(50 * time.Minute)
			e.consoleAlive(t, hash, "busy")
		}
		e.clock.Set(t0.Add(12*time.Hour - time.Microsecond))
		e.consoleAlive(t, hash, "1µs before 12 h")
		e.clock.Add(time.Microsecond)
		e.consoleGone(t, hash, "at 12 h")
	})
	t.Run("AnIdleSessionEndsAfterAnHour", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		k, _ := e.mustKey(t, "operator", apikey.LinksRead)
		t0 := e.clock.Now()
		_, early := e.mustConsole(t, k.ID)
		_, idle := e.mustConsole(t, k.ID)
		e.clock.Add(time.Hour - time.Microsecond)
		e.consoleAlive(t, early, "1µs before an hour idle")
		e.clock.Add(time.Microsecond)
		e.consoleGone(t, idle, "an hour idle")
		// The request just before the hour restarted the idle timeout.
		e.clock.Set(t0.Add(2*time.Hour - 2*time.Microsecond))
		e.consoleAlive(t, early, "an hour after its last request, less 1µs")
		e.consoleGone(t, idle, "still")
	})
	t.Run("LastSeenMovesAtMostOnceAMinute", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		k, _ := e.mustKey(t, "operator", apikey.LinksRead)
		t0 := e.clock.Now()
		_, hash := e.mustConsole(t, k.ID)
		e.clock.Add(time.Minute - time.Microsecond)
		if c := e.consoleAlive(t, hash, "within the minute"); !c.LastSeenAt.Equal(t0) {
			t.Fatalf("within a minute last_seen_at moved to t0+%v", c.LastSeenAt.Sub(t0))
		}
		e.clock.Add(time.Microsecond)
		if c := e.consoleAlive(t, hash, "a minute on"); !c.LastSeenAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("a minute on last_seen_at = t0+%v, want t0+1m", c.LastSeenAt.Sub(t0))
		}
		// Concurrent requests a minute later: all served, one moves it.
		e.clock.Add(2 * time.Minute)
		releaseAll(t, 8, func(int) error {
			_, err := e.l.ConsoleSessionGet(e.ctx, hash)
			return err
		})
		e.clock.Add(30 * time.Second)
		if c := e.consoleAlive(t, hash, "after concurrent requests"); !c.LastSeenAt.Equal(t0.Add(3 * time.Minute)) {
			t.Fatalf("last_seen_at = t0+%v, want t0+3m", c.LastSeenAt.Sub(t0))
		}
		// The idle hour counts from the last move, so from t0+3m.
		e.clock.Set(t0.Add(3*time.Minute + time.Hour))
		e.consoleGone(t, hash, "an hour after the last move")
	})
	t.Run("ARevokedOrExpiredKeyEndsItsSessionsAndOpensNone", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		revoked, _ := e.mustKey(t, "revoked", apikey.LinksRead)
		kept, _ := e.mustKey(t, "kept", apikey.LinksRead)
		expiring, _ := mustKeyOn(t, e.ctx, e.l, "expiring", e.clock.Now().Add(90*time.Minute), apikey.LinksRead)
		_, r1 := e.mustConsole(t, revoked.ID)
		_, r2 := e.mustConsole(t, revoked.ID)
		_, k1 := e.mustConsole(t, kept.ID)
		_, x1 := e.mustConsole(t, expiring.ID)
		if err := e.l.KeyRevoke(e.ctx, revoked.ID); err != nil {
			t.Fatal(err)
		}
		e.consoleGone(t, r1, "its key revoked")
		e.consoleGone(t, r2, "its key revoked")
		e.consoleAlive(t, k1, "another key revoked")
		e.clock.Add(50 * time.Minute)
		e.consoleAlive(t, x1, "its key live")
		e.clock.Add(40*time.Minute - time.Microsecond)
		e.consoleAlive(t, x1, "1µs before its key expires")
		e.clock.Add(time.Microsecond)
		e.consoleGone(t, x1, "its key expired")
		for _, c := range []struct {
			id     string
			reason ledger.Reason
		}{{revoked.ID, ledger.ReasonRevoked}, {expiring.ID, ledger.ReasonExpired}} {
			_, hash := apikey.NewSession()
			if _, err := e.l.ConsoleSessionCreate(e.ctx, c.id, hash); ledger.ReasonOf(err) != c.reason {
				t.Errorf("ConsoleSessionCreate for a key %s = %v, want ErrRefused (%s)", c.reason, err, c.reason)
			}
			e.consoleGone(t, hash, "refused at sign-in")
		}
		_, hash := apikey.NewSession()
		if _, err := e.l.ConsoleSessionCreate(e.ctx, "00000000-0000-7000-8000-000000000000", hash); !errors.Is(err, ledger.ErrNotFound) {
			t.Errorf("ConsoleSessionCreate for an unknown key = %v, want ErrNotFound", err)
		}
		for _, bad := range []struct {
			id   string
			hash []byte
		}{{"", hash}, {kept.ID, hash[:31]}, {"has space", hash}} {
			if _, err := e.l.ConsoleSessionCreate(e.ctx, bad.id, bad.hash); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("ConsoleSessionCreate(%q, %d bytes) = %v, want ErrInvalid", bad.id, len(bad.hash), err)
			}
		}
		_, taken := e.mustConsole(t, kept.ID)
		if _, err := e.l.ConsoleSessionCreate(e.ctx, kept.ID, taken); !errors.Is(err, ledger.ErrConflict) {
			t.Errorf("ConsoleSessionCreate with a hash in use = %v, want ErrConflict", err)
		}
	})
	t.Run("SignOutEndsTheSession", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		k, _ := e.mustKey(t, "operator", apikey.LinksRead)
		_, out := e.mustConsole(t, k.ID)
		_, in := e.mustConsole(t, k.ID)
		for range 2 { // signing out twice is no error
			if err := e.l.ConsoleSessionDelete(e.ctx, out); err != nil {
				t.Fatal(err)
			}
		}
		e.consoleGone(t, out, "signed out")
		e.consoleAlive(t, in, "another session of the key")
		if _, err := e.l.ConsoleSessionGet(e.ctx, out[:16]); !errors.Is(err, ledger.ErrNotFound) {
			t.Fatalf("ConsoleSessionGet of a short hash = %v, want ErrNotFound", err)
		}
	})
	t.Run("TheAdminTokenSignsInWithEveryScope", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		_, hash := e.mustConsole(t, ledger.BootstrapKeyID)
		c := e.consoleAlive(t, hash, "at once")
		if c.Key.ID != ledger.BootstrapKeyID || c.Key.Scopes != apikey.All() || c.Key.Name != ledger.BootstrapKeyID {
			t.Fatalf("bootstrap session key = %+v, want the bootstrap token with every scope", c.Key)
		}
		e.clock.Add(time.Hour)
		e.consoleGone(t, hash, "idle an hour")
	})
	t.Run("TheSweeperPurgesDeadSessionsInBoundedBatches", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		k, _ := e.mustKey(t, "operator", apikey.LinksRead)
		t0 := e.clock.Now()
		for range 5 {
			e.mustConsole(t, k.ID)
		}
		_, live := e.mustConsole(t, k.ID)
		e.clock.Add(59 * time.Minute)
		e.consoleAlive(t, live, "kept busy")
		if res, err := e.l.SessionSweep(e.ctx, 2); err != nil || res.ConsoleSessionsPurged != 0 {
			t.Fatalf("before any is dead SessionSweep = %+v, %v", res, err)
		}
		e.clock.Set(t0.Add(time.Hour))
		var purged []int
		for range 4 {
			res, err := e.l.SessionSweep(e.ctx, 2)
			if err != nil {
				t.Fatal(err)
			}
			purged = append(purged, res.ConsoleSessionsPurged)
		}
		if want := []int{2, 2, 1, 0}; !slices.Equal(purged, want) {
			t.Fatalf("sweeps of 2 purged %v, want %v", purged, want)
		}
		e.consoleAlive(t, live, "after the sweeps")
		var n int
		if err := sqlOf(t, e.l).QueryRowContext(e.ctx, `SELECT COUNT(*) FROM console_sessions`).Scan(&n); err != nil || n != 1 {
			t.Fatalf("%d console sessions left, %v; want the live one", n, err)
		}
		e.clock.Set(t0.Add(12 * time.Hour))
		if res, err := e.l.SessionSweep(e.ctx, 10); err != nil || res.ConsoleSessionsPurged != 1 {
			t.Fatalf("at the end of the live one SessionSweep = %+v, %v; want it purged", res, err)
		}
	})
}

// ExerciseConsoleAcrossProcesses shows that console sessions and keys are
// the database's, not a process's: what one process opens another
// serves, and a sign-out or a revocation on one is seen by every other at
// once.
func ExerciseConsoleAcrossProcesses(t *testing.T, open OpenShared) {
	t.Run("SignOutAndRevocationEndSessionsOnEveryProcess", func(t *testing.T) {
		t.Parallel()
		now := func() time.Time { return time.Now() }
		ls := open(t, now, now, now)
		a, b, c := ls[0], ls[1], ls[2]
		ctx := t.Context()
		k, text := mustKeyOn(t, ctx, a, "operator", time.Time{}, apikey.LinksRead, apikey.LinksWrite)
		signIn := func(l ledger.Ledger) []byte {
			t.Helper()
			_, hash := apikey.NewSession()
			if _, err := l.ConsoleSessionCreate(ctx, k.ID, hash); err != nil {
				t.Fatal(err)
			}
			return hash
		}
		first, second := signIn(a), signIn(b)
		for i, l := range ls {
			for _, h := range [][]byte{first, second} {
				if s, err := l.ConsoleSessionGet(ctx, h); err != nil || s.Key.ID != k.ID {
					t.Fatalf("process %d: ConsoleSessionGet = %+v, %v", i, s, err)
				}
			}
		}
		if err := c.ConsoleSessionDelete(ctx, first); err != nil {
			t.Fatal(err)
		}
		for i, l := range ls {
			if _, err := l.ConsoleSessionGet(ctx, first); !errors.Is(err, ledger.ErrNotFound) {
				t.Fatalf("process %d after a sign-out on another: %v, want ErrNotFound", i, err)
			}
			if _, err := l.ConsoleSessionGet(ctx, second); err != nil {
				t.Fatalf("process %d: the other session = %v", i, err)
			}
		}
		if err := b.KeyRevoke(ctx, k.ID); err != nil {
			t.Fatal(err)
		}
		for i, l := range ls {
			if _, err := l.ConsoleSessionGet(ctx, second); !errors.Is(err, ledger.ErrNotFound) {
				t.Fatalf("process %d after a revocation on another: %v, want ErrNotFound", i, err)
			}
			if _, err := l.KeyGetByHash(ctx, apikey.Hash(text)); ledger.ReasonOf(err) != ledger.ReasonRevoked {
				t.Fatalf("process %d: KeyGetByHash after a revocation on another = %v, want revoked", i, err)
			}
		}
	})
}
