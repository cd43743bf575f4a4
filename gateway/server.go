// Package gateway is the HTTP layer: public download routes (/d/, /s/) and
// the admin API. It combines the ledger (who may download) with storage
// (the bytes) and the sessions policy (ranges, budgets, defaults).
package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dlgate/dlgate/auth"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/preview"
	"github.com/dlgate/dlgate/sessions"
	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/token"
)

// Options configure a Server. Ledger, Store, Secret and PublicURL are
// required.
type Options struct {
	Ledger     ledger.Ledger
	Store      storage.Store
	Secret     []byte
	PublicURL  string
	AdminToken string
	// Auth verifies callers and names their address (SPEC §8); default
	// GATEWAY_AUTH=none with no trusted proxy.
	Auth   auth.Authenticator
	Logger *slog.Logger
	// Defaults are the gateway-wide session defaults (SPEC §4).
	Defaults sessions.Defaults
	// SlotLease is how long a concurrency slot stays leased without
	// renewal (default 30 s).
	SlotLease time.Duration
	// Chunk is the byte-budget draw size (default sessions.DefaultChunk).
	Chunk int64
	// WriteTimeout bounds how long one write of a response may stall
	// before the client is considered gone (default 2 min). Slow but
	// moving clients are never cut.
	WriteTimeout time.Duration
	// StoreOpenTimeout bounds opening an object until its first bytes
	// arrive (GATEWAY_STORE_OPEN_TIMEOUT, default 10 s); past it a stream
	// claim is refunded and the answer is 504.
	StoreOpenTimeout time.Duration
	// StoreIdleTimeout bounds the wait for the next byte from the store
	// while a response streams (GATEWAY_STORE_IDLE_TIMEOUT, default
	// 30 s); past it the response is cut.
	StoreIdleTimeout time.Duration
	// BodyTimeout bounds how long a public POST body may take to arrive
	// whole, before anything is looked up or claimed
	// (GATEWAY_BODY_TIMEOUT, default DefaultBodyTimeout).
	BodyTimeout time.Duration
	// UploadIdleTimeout bounds how long an admin upload may go without a
	// byte of its body (default DefaultUploadIdleTimeout).
	UploadIdleTimeout time.Duration
	// ReadyTimeout is the deadline of each of /readyz's checks (default
	// 3 s).
	ReadyTimeout time.Duration
	// ObjectRetention is how long a version the gateway stored is kept
	// once every link pinning it is dead (GATEWAY_OBJECT_RETENTION); 0
	// keeps versions forever.
	ObjectRetention time.Duration
	// AuditRetention is how long dead links, their grants and sessions
	// are kept (GATEWAY_AUDIT_RETENTION); 0 keeps them forever.
	AuditRetention time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// SecretPrevious are older secrets whose tokens are still accepted,
	// newest first, so the secret can be rotated (SPEC §2).
	SecretPrevious [][]byte
	// Previews recognises link previewers and prefetches (SPEC §8);
	// default preview.Default().
	Previews PreviewDetector
	// Affinity is GATEWAY_SESSION_AFFINITY (SPEC §5): AffinityClient
	// (the default when empty), AffinityAccount or AffinityOff.
	Affinity string
	// HidePreviewDetails keeps file name and size out of previews
	// (GATEWAY_PREVIEW_DETAILS=false).
	HidePreviewDetails bool
	// ClientAddr names a request's client for the access log (SPEC §8);
	// default the direct peer. The gateway passes auth.ClientAddr with
	// GATEWAY_TRUSTED_PROXIES.
	ClientAddr func(*http.Request) netip.Addr
	// Version labels gateway_build_info.
	Version string
	// HSTS is the Strict-Transport-Security value put on every public
	// response (SPEC §10); empty sends none (plain HTTP, or TLS ended
	// at a proxy, which then owns the header).
	HSTS string
	// WarmIdle, WarmRowTTL and WarmBudget tune warm sessions (warm.go):
	// how long a process keeps an idle session's slots and budget, how
	// stale its copy of the session row may be (the delay of a revocation
	// made on another process), and how much drawn budget it keeps.
	WarmIdle   time.Duration
	WarmRowTTL time.Duration
	WarmBudget int64
	// SlotIdle is how long a process keeps a finished request's
	// concurrency slot for the session's next request (default
	// DefaultSlotIdle); SlotWait how long a request that finds every slot
	// held waits for one before its 429 (default DefaultSlotWait, at
	// least twice SlotIdle).
	SlotIdle time.Duration
	SlotWait time.Duration
	// RefusalHold is how long the 429 of a client throttled for its
	// refusals is held before it is sent (refusals.go; default
	// DefaultRefusalHold, negative sends it at once).
	RefusalHold time.Duration
}

// DefaultSlotLease is Options.SlotLease's default (GATEWAY_SLOT_LEASE):
// how long a crashed process's concurrency slots stay taken (SPEC §3:
// within 30 s).
const DefaultSlotLease = 30 * time.Second

// DefaultSweepInterval is how often RunSweeper runs by default
// (GATEWAY_SWEEP_INTERVAL).
const DefaultSweepInterval = 15 * time.Second

// Server serves the public and admin routes.
type Server struct {
	Options
	log      *slog.Logger
	metrics  *metrics
	keys     *token.Keys
	warm     *warmSessions
	links    linkCache
	refusals *refusalGuard
	draining atomic.Bool
	// claims is the part of the ledger the download path on link URLs
	// uses (link.go, mint.go, affinity.go).
	claims ledger.Claims
	// admin is the part of the ledger the admin API's links and sessions
	// use (admin_links.go, admin_link_create.go, admin_sessions.go);
	// objects the object lifecycle (admin_objects.go, retention.go);
	// upkeep the sweeper and the readiness probe (server.go).
	admin   ledger.Admin
	objects ledger.ObjectLedger
	upkeep  interface {
		ledger.Sweeper
		ledger.Health
	}
	// verifier checks whole downloads from local files against their
	// SHA-256, one check per file at a time (verify.go).
	verifier verifier
}

// Drain marks the server as shutting down: /readyz answers 503 so load
// balancers stop sending new work while running downloads finish.
func (s *Server) Drain() { s.draining.Store(true) }

// New checks opts and returns a Server.
func New(opts Options) (*Server, error) {
	if opts.Ledger == nil || opts.Store == nil || len(opts.Secret) < 16 || opts.PublicURL == "" {
		return nil, errors.New("gateway: ledger, store, a secret of at least 16 bytes and a public URL are required")
	}
	if opts.Affinity != "" && !ValidAffinity(opts.Affinity) {
		return nil, errors.New("gateway: session affinity must be client, account or off")
	}
	for _, p := range opts.SecretPrevious {
		if len(p) < 16 {
			return nil, errors.New("gateway: every previous secret must be at least 16 bytes")
		}
	}
	opts.PublicURL = strings.TrimRight(opts.PublicURL, "/")
	if opts.Auth == nil {
		opts.Auth, _ = auth.New(context.Background(), auth.Config{Mode: auth.ModeNone})
	}
	if opts.Previews == nil {
		opts.Previews = preview.Default()
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.SlotLease <= 0 {
		opts.SlotLease = DefaultSlotLease
	}
	if opts.Chunk <= 0 {
		opts.Chunk = sessions.DefaultChunk
	}
	if opts.WriteTimeout <= 0 {
		opts.WriteTimeout = 2 * time.Minute
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = DefaultBodyTimeout
	}
	if opts.UploadIdleTimeout <= 0 {
		opts.UploadIdleTimeout = DefaultUploadIdleTimeout
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 3 * time.Second
	}
	if opts.WarmIdle <= 0 {
		opts.WarmIdle = DefaultWarmIdle
	}
	if opts.SlotIdle <= 0 {
		opts.SlotIdle = DefaultSlotIdle
	}
	if opts.SlotWait <= 0 {
		opts.SlotWait = DefaultSlotWait
	}
	opts.SlotWait = max(opts.SlotWait, 2*opts.SlotIdle)
	if opts.WarmRowTTL <= 0 {
		opts.WarmRowTTL = DefaultWarmRowTTL
	}
	if opts.WarmBudget <= 0 {
		opts.WarmBudget = DefaultWarmBudget
	}
	if opts.RefusalHold == 0 {
		opts.RefusalHold = DefaultRefusalHold
	}
	if opts.ClientAddr == nil {
		opts.ClientAddr = func(r *http.Request) netip.Addr { return auth.ClientAddr(r, nil) }
	}
	log := slog.New(contextHandler{opts.Logger.Handler()})
	srv := &Server{Options: opts, log: log, metrics: newMetrics(opts.Version),
		keys: token.NewKeys(opts.Secret, opts.SecretPrevious...), claims: opts.Ledger,
		admin: opts.Ledger, objects: opts.Ledger, upkeep: opts.Ledger}
	srv.warm = newWarmSessions(warmConfig{
		sessions: opts.Ledger, budget: opts.Ledger, slots: opts.Ledger, log: log, now: opts.Now,
		drew:   srv.metrics.budgetDraw.Inc,
		rowTTL: opts.WarmRowTTL, idle: opts.WarmIdle, lease: opts.SlotLease, keep: opts.WarmBudget,
		slotIdle: opts.SlotIdle, slotWait: opts.SlotWait,
	})
	srv.refusals = newRefusalGuard(srv)
	return srv, nil
}

// handleReady checks the database and the store at once, each under its
// own deadline, and reports each as it found it: a hung database must
// neither delay the store's check nor make the store look down.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	checks := map[string]string{"database": "ok", "store": "ok"}
	status := http.StatusOK
	if s.draining.Load() {
		checks["gateway"], status = "draining", http.StatusServiceUnavailable
	}
	probes := map[string]func(context.Context) error{"database": s.upkeep.Ping}
	if p, ok := s.Store.(storage.Pinger); ok {
		probes["store"] = p.Ping
	}
	var (
		mu sync.Mutex
		wg sync.WaitGroup
	)
	for name, ping := range probes {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(r.Context(), s.ReadyTimeout)
			defer cancel()
			if err := ping(ctx); err != nil {
				s.log.WarnContext(ctx, "readiness: "+name, "err", err)
				mu.Lock()
				checks[name], status = "unavailable", http.StatusServiceUnavailable
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	writeJSON(w, status, checks)
}

// RunSweeper ends expired sessions, clears lapsed leases and applies the
// retention (gateway/retention.go) every interval until ctx ends. Every
// process runs one; they do not collide.
func (s *Server) RunSweeper(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for {
			res, err := s.upkeep.SessionSweep(ctx, 500)
			if err != nil {
				if ctx.Err() == nil {
					s.log.WarnContext(ctx, "sweep failed", "err", err)
				}
				break
			}
			s.metrics.swept.WithLabelValues("sessions_ended").Add(float64(res.SessionsEnded))
			s.metrics.swept.WithLabelValues("leases_cleared").Add(float64(res.LeasesCleared))
			if res.SessionsEnded < 500 && res.LeasesCleared < 500 {
				break
			}
		}
		s.Retain(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
