package ledger

import (
	"context"
	"time"
)

// Console session lifetimes (SPEC §11). Both are judged by the database's
// clock.
const (
	// ConsoleLifetime is how long a console session lasts at most,
	// however busy.
	ConsoleLifetime = 12 * time.Hour
	// ConsoleIdle ends a session that saw no request for that long.
	ConsoleIdle = time.Hour
	// ConsoleSeenEvery is how stale a session's last-seen time may get
	// before a request moves it: at most one write a minute per session,
	// enough for an idle timeout of an hour.
	ConsoleSeenEvery = time.Minute
)

// ConsoleSession is a signed-in operator console (SPEC §11): a
// server-side session in the ledger, so that every gateway process
// serves it and a sign-out ends it on all of them. The cookie holds a
// random secret whose SHA-256 is all the ledger keeps.
type ConsoleSession struct {
	ID string
	// Key is the key the session signed in with, as it reads now (for
	// the admin token: ID BootstrapKeyID, every scope): the console acts
	// with its scopes and is audited as it.
	Key        Key
	CreatedAt  time.Time
	ExpiresAt  time.Time // the absolute end
	LastSeenAt time.Time // the idle timeout runs from here
}

// ConsoleSessions keeps console sessions. The sweeper purges dead ones
// (SessionSweep).
type ConsoleSessions interface {
	// ConsoleSessionCreate opens a session for the key keyID (or
	// BootstrapKeyID), its cookie's secret hashing to secretHash, lasting
	// ConsoleLifetime and ConsoleIdle from the database's now. A key that
	// is unknown, revoked or expired opens nothing. Errors: ErrInvalid,
	// ErrNotFound (no such key), ErrRefused (revoked or expired),
	// ErrConflict (the hash is taken), ErrUnavailable.
	ConsoleSessionCreate(ctx context.Context, keyID string, secretHash []byte) (*ConsoleSession, error)
	// ConsoleSessionGet returns the live session whose secret hashes to
	// secretHash, and moves its last-seen time to the database's now when
	// that is ConsoleSeenEvery or more behind. A session past its
	// absolute end, idle for ConsoleIdle, signed out, or whose key is
	// revoked, expired or gone, is ErrNotFound, all alike. Errors:
	// ErrNotFound, ErrUnavailable.
	ConsoleSessionGet(ctx context.Context, secretHash []byte) (*ConsoleSession, error)
	// ConsoleSessionDelete ends the session (sign-out); ending one that is
	// not there is not an error. Errors: ErrUnavailable.
	ConsoleSessionDelete(ctx context.Context, secretHash []byte) error
}
