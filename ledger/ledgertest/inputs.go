package ledgertest

import (
	"encoding/base64"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/ledger"
)

// exerciseInputs checks that a value one backend could store and another
// could not is refused by both, the same way (ErrInvalid, an API's 400),
// rather than stored by SQLite and a server error on MySQL.
func exerciseInputs(t *testing.T, newLedger NewLedger) {
	t.Run("ExpiryBeyondTheYear9999IsInvalidOnEveryBackend", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		last := time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
		l := e.MustLink(t, 1, func(l *ledger.Link) { l.ExpiresAt = last })
		got, err := e.l.LinkGetByTokenHash(e.ctx, l.TokenHash)
		if err != nil || !got.ExpiresAt.Equal(last) {
			t.Fatalf("link expiring at the last storable instant reads back %v, %v", got, err)
		}
		if _, err := e.claim(l, ""); err != nil {
			t.Fatalf("claim of a link expiring in 9999: %v", err)
		}
		// 9999-12-31T23:59:59-05:00 is already the year 10000 in UTC.
		for _, at := range []time.Time{
			time.Date(9999, 12, 31, 23, 59, 59, 0, time.FixedZone("EST", -5*3600)),
			last.Add(time.Microsecond),
			time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC),
		} {
			bad := e.newLinkValue(t, func(l *ledger.Link) { l.ExpiresAt = at })
			if _, _, err := e.l.LinkCreate(e.ctx, bad); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("LinkCreate expiring %v = %v, want ErrInvalid", at, err)
			}
		}
	})
	t.Run("SessionExpiryBeyondTheYear9999IsInvalid", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 1)
		_, _, err := e.l.SessionMint(e.ctx, ledger.MintRequest{
			Claim:     ledger.ClaimRequest{LinkID: l.ID, Client: "test"},
			SessionID: uuid.Must(uuid.NewV7()).String(), TokenHash: randomHash(t),
			ByteBudget: 100, MaxConcurrency: 1,
			ExpiresAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		})
		if !errors.Is(err, ledger.ErrInvalid) {
			t.Fatalf("SessionMint expiring in 10000 = %v, want ErrInvalid", err)
		}
		if st := e.mustStatus(t, l.ID); st.Remaining != 1 {
			t.Fatalf("a refused mint spent an allowance: remaining %d", st.Remaining)
		}
	})
	t.Run("ForgedGrantsCursorsAreInvalid", func(t *testing.T) {
		t.Parallel()
		e := setup(t, newLedger)
		l := e.MustLink(t, 1)
		enc := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
		for _, c := range []string{
			enc("9223372036854775807/x"),  // a time no column holds
			enc("-9223372036854775808/x"), // nor this one
			enc("253402300800000000/x"),   // 10000-01-01
			enc("1700000000000000/"),      // no id
			enc("1700000000000000"),       // no separator
			enc("x/0192f000-0000-7000-8000-000000000001"),
			enc("1700000000000000/\x00"),
			"%%%", "////", "",
		} {
			if c == "" {
				continue // the first page
			}
			if _, err := e.l.GrantList(e.ctx, ledger.GrantQuery{LinkID: l.ID, Cursor: c, Limit: 10}); !errors.Is(err, ledger.ErrInvalid) {
				t.Errorf("Grants(cursor %q) = %v, want ErrInvalid", c, err)
			}
		}
	})
}

// newLinkValue is MustLink's link, not inserted.
func (e *env) newLinkValue(tb testing.TB, edit ...func(*ledger.Link)) *ledger.Link {
	tb.Helper()
	l := &ledger.Link{
		ID: uuid.Must(uuid.NewV7()).String(), TokenHash: randomHash(tb),
		Object:    ledger.Object{Bucket: "b", Key: "k", VersionID: "v1", Size: 10},
		Allowance: 1, Remaining: 1, ExpiresAt: e.clock.Now().Add(time.Hour), Delivery: ledger.DeliveryStream,
	}
	for _, f := range edit {
		f(l)
	}
	return l
}
