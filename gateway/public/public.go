// Package public serves the gateway's public routes (SPEC §3, §5, §8): a
// link URL /d/{token} (Link), its explicit mint POST /d/{token}/sessions
// (Mint), and a session URL /s/{token} (Session).
//
// A request is read once (request.go), then goes down one branch, each in
// a file of its own, and what stopped it is answered in one place
// (answer.go). On a link URL the branches are a Range, sent to the
// client's session (range.go); a HEAD or a preview, which claims nothing
// (head.go); and a claim (claim.go), which streams (stream.go) or mints a
// session (mint.go). Every object byte goes out through the one
// pipeline, gateway/deliver; a link's stream is claimed before it, a
// session's budget and slot are its meter (gateway/warm).
package public

import (
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/dlgate/dlgate/auth"
	"github.com/dlgate/dlgate/gateway/deliver"
	"github.com/dlgate/dlgate/gateway/metrics"
	"github.com/dlgate/dlgate/gateway/warm"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/sessions"
	"github.com/dlgate/dlgate/token"
)

// PreviewDetector recognises link previewers and prefetches (SPEC §8); it
// returns a short reason, or "" for a request that may claim.
// preview.Detector is the implementation.
type PreviewDetector interface {
	Check(h http.Header) string
}

// Config is what the public routes need; every field is required (the
// gateway applies its Options' defaults once, in gateway.New).
type Config struct {
	Claims ledger.Claims
	// Deliveries records what stream downloads delivered and serves the
	// retries of interrupted ones (SPEC §1).
	Deliveries ledger.Deliveries
	Warm       *warm.Sessions
	Pipeline   *deliver.Pipeline
	Keys       *token.Keys
	Auth       auth.Authenticator
	Previews   PreviewDetector
	Log        *slog.Logger
	Metrics    *metrics.Metrics
	// PublicURL is the base of session URLs, without a trailing slash.
	PublicURL string
	// Defaults are the gateway-wide session defaults (SPEC §4).
	Defaults sessions.Defaults
	// Affinity is GATEWAY_SESSION_AFFINITY (SPEC §5).
	Affinity string
	// HidePreviewDetails keeps file name and size out of previews.
	HidePreviewDetails bool
	// ClientAddr names a request's client (SPEC §8, trusted proxies).
	ClientAddr func(*http.Request) netip.Addr
	// RefusalHold is how long the 429 of a client throttled for its
	// refusals is held before it is sent (refusals.go); negative sends
	// it at once.
	RefusalHold time.Duration
	// RetryLease is how long a retry's attempt stays in flight without a
	// renewal; the stream renews it every third of it (stream.go).
	RetryLease time.Duration
	Now        func() time.Time
}

// Handler serves the public routes. What is not a route's own step is
// done by small helpers of one role each: who a client is to the ledger
// (clients, affinity.go), the settling of claims whose outcome is unknown
// (settler, reconcile.go) and the refusal limit (refusalGuard,
// refusals.go).
type Handler struct {
	Config
	links    linkCache
	clients  *clients
	settler  *settler
	refusals *refusalGuard
	// records are the delivery records of ended stream responses still
	// being written (stream.go); recording holds a place for each, at
	// most maxPendingRecords.
	records   sync.WaitGroup
	recording chan struct{}
}

// maxPendingRecords bounds the delivery records a process has waiting
// to be written. Past it, a stream response waits for a place before its
// handler returns, so a database slower than the downloads slows the
// downloads (the next request of a kept-alive connection) instead of
// growing the process without bound.
const maxPendingRecords = 4096

// New returns the public routes' handler.
func New(c Config) *Handler {
	h := &Handler{Config: c, recording: make(chan struct{}, maxPendingRecords)}
	h.clients = &clients{mode: c.Affinity, claims: c.Claims, deliveries: c.Deliveries, retryLease: c.RetryLease, log: c.Log, metrics: c.Metrics,
		now: c.Now}
	h.settler = &settler{claims: c.Claims, log: c.Log, metrics: c.Metrics}
	h.refusals = newRefusalGuard(c)
	return h
}
