package config

import (
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/sessions"
)

// The gateway's option groups (gateway.Options embeds them) and their
// defaults. This file and the constants of config.go are the one place
// the gateway's defaults are held, and ApplyDefaults the one way they are
// applied: `gateway serve` wires the settings into the groups
// (cmd/gateway/serve.go), and gateway.New gives every field left zero
// the default named on it, so that a caller that builds the options by
// hand (a test) gets what the settings' defaults give.

// Defaults of the options that are not settings of their own.
const (
	DefaultWriteTimeout      = 2 * time.Minute
	DefaultUploadIdleTimeout = 60 * time.Second
	DefaultReadyTimeout      = 3 * time.Second
	// DefaultRefusalHold is long enough that a client retrying at once
	// makes a few requests a second at most, short enough that no answer
	// waits longer than one that waits for the database (GATEWAY_DB_TIMEOUT,
	// 5 s by default).
	DefaultRefusalHold = 2 * time.Second
	DefaultRetryLease  = ledger.DefaultRetryLease
	DefaultChunk       = sessions.DefaultChunk
	DefaultWarmIdle    = time.Second
	DefaultWarmRowTTL  = time.Second
	DefaultWarmBudget  = sessions.DefaultChunk
	// A download manager's next range follows its last one within a
	// round trip; a slot idle longer than that is better released.
	DefaultSlotIdle = 50 * time.Millisecond
	// Five times SlotIdle: the slot another process kept idle is back in
	// the database well before a waiting request gives up.
	DefaultSlotWait = 250 * time.Millisecond
	// DefaultReportEvery is how often at most a process reports a
	// session's acknowledged ranges while its requests run: a crash loses
	// at most that much delivery evidence.
	DefaultReportEvery = time.Second
	// DefaultUploadMaxSize is S3's largest object, 5 TiB.
	DefaultUploadMaxSize = 5 << 40
	// DefaultUploadLockLease is how long a request's lock of an upload
	// lasts without being renewed: how long the upload of a process that
	// died stays locked.
	DefaultUploadLockLease = 30 * time.Second
	// DefaultUploadLockWait is long enough for a PATCH cut a moment ago to
	// save what it received, so that the client's HEAD finds its offset.
	DefaultUploadLockWait = 10 * time.Second
	// DefaultUploadCheckpoint is what a gateway that dies during a PATCH
	// makes the client send again, at most.
	DefaultUploadCheckpoint = 64 << 20
)

// Timeouts bound what a client or the store may make the gateway wait
// for; a zero field means its default.
type Timeouts struct {
	// WriteTimeout bounds how long one write of a response may stall
	// before the client is considered gone (DefaultWriteTimeout). Slow
	// but moving clients are never cut.
	WriteTimeout time.Duration
	// StoreOpenTimeout bounds opening an object until its first bytes
	// arrive (GATEWAY_STORE_OPEN_TIMEOUT); past it a stream claim is
	// refunded and the answer is 504.
	StoreOpenTimeout time.Duration
	// StoreIdleTimeout bounds the wait for the next byte from the store
	// while a response streams (GATEWAY_STORE_IDLE_TIMEOUT); past it the
	// response is cut.
	StoreIdleTimeout time.Duration
	// BodyTimeout bounds how long a public POST body may take to arrive
	// whole, before anything is looked up or claimed
	// (GATEWAY_BODY_TIMEOUT).
	BodyTimeout time.Duration
	// UploadIdleTimeout bounds how long an admin upload may go without a
	// byte of its body (DefaultUploadIdleTimeout).
	UploadIdleTimeout time.Duration
	// ReadyTimeout is the deadline of each of /readyz's checks
	// (DefaultReadyTimeout).
	ReadyTimeout time.Duration
	// RefusalHold is how long the 429 of a client throttled for its
	// refusals is held before it is sent (DefaultRefusalHold; negative
	// sends it at once).
	RefusalHold time.Duration
	// RetryLease is how long a retry of an interrupted stream download
	// stays in flight without a renewal (DefaultRetryLease; the stream
	// renews it every third of it).
	RetryLease time.Duration
}

// Sessions are the defaults of new transfer sessions (SPEC §4) and how a
// process keeps the sessions it serves warm; a zero field means its
// default.
type Sessions struct {
	// Defaults are the gateway-wide session defaults (GATEWAY_SESSION_TTL,
	// GATEWAY_SESSION_BYTE_BUDGET, GATEWAY_SESSION_MAX_CONCURRENCY), which
	// a link's own settings override.
	Defaults sessions.Defaults
	// Affinity is GATEWAY_SESSION_AFFINITY (SPEC §5): "client", "account"
	// or "off".
	Affinity string
	// SlotLease is how long a concurrency slot stays leased without
	// renewal (GATEWAY_SLOT_LEASE).
	SlotLease time.Duration
	// Chunk is the byte-budget draw size (DefaultChunk).
	Chunk int64
	// WarmIdle, WarmRowTTL and WarmBudget tune warm sessions
	// (gateway/warm): how long a process keeps an idle session's slots and
	// budget, how stale its copy of the session row may be (the delay of a
	// revocation made on another process), and how much drawn budget it
	// keeps.
	WarmIdle   time.Duration
	WarmRowTTL time.Duration
	WarmBudget int64
	// SlotIdle is how long a process keeps a finished request's
	// concurrency slot for the session's next request; SlotWait how long a
	// request that finds every slot held waits for one before its 429 (at
	// least twice SlotIdle).
	SlotIdle time.Duration
	SlotWait time.Duration
	// ReportEvery is how long at least passes between two reports of a
	// session's acknowledged ranges by one process while its requests run
	// (DefaultReportEvery).
	ReportEvery time.Duration
}

// Retention is what the sweeper deletes, and when (SPEC §6); zero keeps
// forever.
type Retention struct {
	// ObjectRetention is how long a version the gateway stored is kept
	// once every link pinning it is dead (GATEWAY_OBJECT_RETENTION).
	ObjectRetention time.Duration
	// AuditRetention is how long dead links, their grants and sessions are
	// kept (GATEWAY_AUDIT_RETENTION).
	AuditRetention time.Duration
}

// UploadLimits bound the resumable uploads of /v1/uploads/ (SPEC §11); a
// zero field means its default.
type UploadLimits struct {
	// UploadExpiry is GATEWAY_UPLOAD_EXPIRY: how long an unfinished upload
	// lives after its creation or its last PATCH, and a finished one's
	// JSON after its finish.
	UploadExpiry time.Duration
	// UploadMaxSize is the largest Upload-Length accepted
	// (DefaultUploadMaxSize).
	UploadMaxSize int64
	// UploadLockLease, UploadLockWait and UploadCheckpoint: how long a
	// request's lock of an upload lasts without renewal, how long a
	// request waits for an upload another request holds before its 423,
	// and how many bytes a PATCH appends between two records of its
	// offset (DefaultUploadLockLease, DefaultUploadLockWait,
	// DefaultUploadCheckpoint).
	UploadLockLease  time.Duration
	UploadLockWait   time.Duration
	UploadCheckpoint int64
}

// ApplyDefaults gives every field of the option groups left zero (or
// negative) its default: the one place the gateway's defaults are
// applied. RefusalHold takes its default only when zero (negative sends
// the 429 at once); the session defaults (Sessions.Defaults) are package
// sessions' to read; SlotWait is at least twice SlotIdle.
func ApplyDefaults(t *Timeouts, s *Sessions, u *UploadLimits) {
	for _, d := range []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&t.WriteTimeout, DefaultWriteTimeout},
		{&t.StoreOpenTimeout, DefaultStoreOpenTimeout},
		{&t.StoreIdleTimeout, DefaultStoreIdleTimeout},
		{&t.BodyTimeout, DefaultBodyTimeout},
		{&t.UploadIdleTimeout, DefaultUploadIdleTimeout},
		{&t.ReadyTimeout, DefaultReadyTimeout},
		{&t.RetryLease, DefaultRetryLease},
		{&s.SlotLease, DefaultSlotLease},
		{&s.WarmIdle, DefaultWarmIdle},
		{&s.WarmRowTTL, DefaultWarmRowTTL},
		{&s.SlotIdle, DefaultSlotIdle},
		{&s.SlotWait, DefaultSlotWait},
		{&s.ReportEvery, DefaultReportEvery},
		{&u.UploadExpiry, DefaultUploadExpiry},
		{&u.UploadLockLease, DefaultUploadLockLease},
		{&u.UploadLockWait, DefaultUploadLockWait},
	} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	for _, d := range []struct {
		v   *int64
		def int64
	}{
		{&s.Chunk, DefaultChunk},
		{&s.WarmBudget, DefaultWarmBudget},
		{&u.UploadMaxSize, DefaultUploadMaxSize},
		{&u.UploadCheckpoint, DefaultUploadCheckpoint},
	} {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	if t.RefusalHold == 0 {
		t.RefusalHold = DefaultRefusalHold
	}
	if s.Affinity == "" {
		s.Affinity = DefaultSessionAffinity
	}
	s.SlotWait = max(s.SlotWait, 2*s.SlotIdle)
}
