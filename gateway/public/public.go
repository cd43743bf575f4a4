// Package public serves the gateway's public routes (SPEC §3, §5, §8): a
// link URL /d/{token} (Link: claims, streams, session mints, affinity,
// previews and landing pages), its explicit mint POST /d/{token}/sessions
// (Mint), and a session URL /s/{token} (Session). Every object byte goes
// out through the one pipeline, gateway/deliver; a link's stream is
// claimed before it, a session's budget and slot are its meter
// (gateway/warm).
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

// Handler serves the public routes.
type Handler struct {
	Config
	links    linkCache
	refusals *refusalGuard
	// records are the delivery records of ended stream responses still
	// being written (stream.go).
	records sync.WaitGroup
}

// New returns the public routes' handler.
func New(c Config) *Handler {
	h := &Handler{Config: c}
	h.refusals = newRefusalGuard(h)
	return h
}

// sessionDefaults layers the link's session settings over the gateway's.
func (h *Handler) sessionDefaults(l *ledger.Link) sessions.Defaults {
	return sessions.Defaults{TTL: l.Session.TTL, ByteBudget: l.Session.ByteBudget, MaxConcurrency: l.Session.MaxConcurrency}.Or(h.Defaults)
}
