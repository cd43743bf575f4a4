// Package gateway is the HTTP layer, assembled: the options, the one route
// table of both listeners (routes.go) and the one router (router.go), the
// wrapper every request passes (middleware.go, limits.go) and the
// background upkeep (upkeep.go). The routes' handlers are in
// gateway/public (links and sessions) and gateway/admin (the admin API);
// every object byte goes out through gateway/deliver; docs/design.md opens
// with the map.
package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/dlgate/dlgate/auth"
	"github.com/dlgate/dlgate/config"
	"github.com/dlgate/dlgate/gateway/admin"
	"github.com/dlgate/dlgate/gateway/console"
	"github.com/dlgate/dlgate/gateway/deliver"
	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/metrics"
	"github.com/dlgate/dlgate/gateway/public"
	"github.com/dlgate/dlgate/gateway/uploads"
	"github.com/dlgate/dlgate/gateway/warm"
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
	Previews public.PreviewDetector
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
	// Uploads keeps the resumable uploads of /v1/uploads/ (SPEC §11); nil
	// takes Ledger when it implements ledger.Uploads. Without either the
	// route answers 501 delete-unsupported's sibling, uploads-unsupported.
	Uploads ledger.Uploads
	// UploadExpiry is GATEWAY_UPLOAD_EXPIRY: how long an unfinished
	// upload lives after its creation or its last PATCH.
	UploadExpiry time.Duration
	// UploadLockWait is how long a tus request waits for an upload that
	// another request holds before its 423 (0: the uploads package's
	// default, uploads.DefaultLockWait).
	UploadLockWait time.Duration
	// NoConsole turns the operator console off (GATEWAY_CONSOLE=false):
	// nothing is served under /console/ (404).
	NoConsole bool
	// RefusalHold is how long the 429 of a client throttled for its
	// refusals is held before it is sent (refusals.go; default
	// DefaultRefusalHold, negative sends it at once).
	RefusalHold time.Duration
	// RetryLease is how long a retry of an interrupted stream download
	// stays in flight without a renewal (default ledger.DefaultRetryLease;
	// the stream renews it every third of it).
	RetryLease time.Duration
}

// Server serves the public and admin routes.
type Server struct {
	Options
	log     *slog.Logger
	metrics *metrics.Metrics
	keys    *token.Keys
	warm    *warm.Sessions
	public  *public.Handler
	admin   *admin.Handler
	// uploads serves /v1/uploads/ (tus), nil when the store or the ledger
	// cannot keep resumable uploads; consoleUploads the same uploads at
	// the console's path.
	uploads        *uploads.Handler
	consoleUploads *uploads.Handler
	// console serves /console/, nil when NoConsole.
	console  *console.Handler
	draining atomic.Bool
	// objects is the object lifecycle the retention runs (upkeep.go);
	// upkeep the sweeper and the readiness probe.
	objects ledger.ObjectLedger
	upkeep  interface {
		ledger.Sweeper
		ledger.Health
	}
}

// New checks opts, applies the defaults of every option left zero
// (Options.withDefaults, the one place they are applied) and assembles
// the server's parts.
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
	opts = opts.withDefaults()
	log := slog.New(httpx.LogHandler(opts.Logger.Handler()))
	m := metrics.New(opts.Version)
	keys := token.NewKeys(opts.Secret, opts.SecretPrevious...)
	w := warm.New(warm.Config{
		Rows: opts.Ledger, Budget: opts.Ledger, Slots: opts.Ledger, Reports: opts.Ledger, Log: log, Now: opts.Now, Drew: m.BudgetDraw.Inc,
		RowTTL: opts.WarmRowTTL, Idle: opts.WarmIdle, Lease: opts.SlotLease, Keep: opts.WarmBudget,
		SlotIdle: opts.SlotIdle, SlotWait: opts.SlotWait, Chunk: opts.Chunk,
	})
	pipeline := deliver.New(deliver.Config{Store: opts.Store, Log: log, Metrics: m, WriteTimeout: opts.WriteTimeout,
		OpenTimeout: opts.StoreOpenTimeout, IdleTimeout: opts.StoreIdleTimeout, Now: opts.Now})
	s := &Server{Options: opts, log: log, metrics: m, keys: keys, warm: w, objects: opts.Ledger, upkeep: opts.Ledger}
	s.public = public.New(public.Config{
		Claims: opts.Ledger, Deliveries: opts.Ledger, Warm: w, Pipeline: pipeline, Keys: keys, Auth: opts.Auth, Previews: opts.Previews,
		Log: log, Metrics: m, PublicURL: opts.PublicURL, Defaults: opts.Defaults, Affinity: opts.Affinity,
		HidePreviewDetails: opts.HidePreviewDetails, ClientAddr: opts.ClientAddr, RefusalHold: opts.RefusalHold, RetryLease: opts.RetryLease,
		Now: opts.Now,
	})
	s.admin = admin.New(admin.Config{
		Admin: opts.Ledger, Objects: opts.Ledger, APIKeys: opts.Ledger, Audit: opts.Ledger, Store: opts.Store, Keys: keys, Warm: w, Log: log,
		PublicURL: opts.PublicURL, AdminToken: opts.AdminToken, ClientAddr: opts.ClientAddr, Metrics: m,
		Defaults: opts.Defaults, Now: opts.Now,
	})
	if opts.Uploads == nil {
		opts.Uploads, _ = opts.Ledger.(ledger.Uploads)
		s.Uploads = opts.Uploads
	}
	if _, ok := opts.Store.(storage.Uploader); ok && opts.Uploads != nil {
		var err error
		if s.uploads, err = s.newUploads(uploadsPath); err != nil {
			return nil, err
		}
		if !opts.NoConsole {
			if s.consoleUploads, err = s.newUploads(console.UploadsPath); err != nil {
				return nil, err
			}
		}
	}
	if !opts.NoConsole {
		c := console.Config{Admin: s.admin, Sessions: opts.Ledger, Views: opts.Ledger, Log: log, Now: opts.Now}
		if s.consoleUploads != nil {
			c.Uploads = s.consoleUploads
		}
		s.console = console.New(c)
	}
	for _, rt := range s.adminRoutes() {
		if err := checkScope(rt); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// uploadsPath is where resumable uploads are served (SPEC §11).
const uploadsPath = "/v1/uploads/"

// newUploads is the tus handler of resumable uploads at base: the admin
// API's at /v1/uploads/, the console's at console.UploadsPath. Both keep
// their state in the ledger and the store, so they serve the same uploads.
func (s *Server) newUploads(base string) (*uploads.Handler, error) {
	opts := s.Options
	return uploads.New(uploads.Config{Store: opts.Store, Ledger: opts.Uploads, BasePath: base,
		Expiry: opts.UploadExpiry, LockWait: opts.UploadLockWait, Logger: s.log,
		// Stored exactly as PUT /v1/objects stores a version: recorded
		// (with the audit entry of the request's actor) or deleted again.
		Record: func(ctx context.Context, v storage.Version) error {
			return opts.Ledger.ObjectRecord(ctx, v)
		}})
}

// withDefaults returns o with the default of every option left zero: the
// one place the gateway's defaults are applied (the configurable ones are
// config's constants, the others their packages').
func (o Options) withDefaults() Options {
	o.PublicURL = strings.TrimRight(o.PublicURL, "/")
	if o.Auth == nil {
		o.Auth, _ = auth.New(context.Background(), auth.Config{Mode: auth.ModeNone})
	}
	if o.Previews == nil {
		o.Previews = preview.Default()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.ClientAddr == nil {
		o.ClientAddr = func(r *http.Request) netip.Addr { return auth.ClientAddr(r, nil) }
	}
	if o.Affinity == "" {
		o.Affinity = config.DefaultSessionAffinity
	}
	durations := []struct {
		v   *time.Duration
		def time.Duration
	}{
		{&o.SlotLease, config.DefaultSlotLease},
		{&o.WriteTimeout, DefaultWriteTimeout},
		{&o.StoreOpenTimeout, config.DefaultStoreOpenTimeout},
		{&o.StoreIdleTimeout, config.DefaultStoreIdleTimeout},
		{&o.BodyTimeout, config.DefaultBodyTimeout},
		{&o.UploadIdleTimeout, DefaultUploadIdleTimeout},
		{&o.ReadyTimeout, DefaultReadyTimeout},
		{&o.UploadExpiry, config.DefaultUploadExpiry},
		{&o.WarmIdle, warm.DefaultWarmIdle},
		{&o.WarmRowTTL, warm.DefaultWarmRowTTL},
		{&o.SlotIdle, warm.DefaultSlotIdle},
		{&o.SlotWait, warm.DefaultSlotWait},
		{&o.RetryLease, ledger.DefaultRetryLease},
	}
	for _, d := range durations {
		if *d.v <= 0 {
			*d.v = d.def
		}
	}
	o.SlotWait = max(o.SlotWait, 2*o.SlotIdle)
	if o.RefusalHold == 0 {
		o.RefusalHold = public.DefaultRefusalHold
	}
	if o.Chunk <= 0 {
		o.Chunk = sessions.DefaultChunk
	}
	if o.WarmBudget <= 0 {
		o.WarmBudget = warm.DefaultWarmBudget
	}
	return o
}

// Defaults of the options that are not configuration settings.
const (
	DefaultWriteTimeout = 2 * time.Minute
	DefaultReadyTimeout = 3 * time.Second
)

// Drain marks the server as shutting down: /readyz answers 503 so load
// balancers stop sending new work while running downloads finish.
func (s *Server) Drain() { s.draining.Store(true) }

// Flush writes the delivery records of the stream responses that ended,
// releases every slot, returns every byte this process keeps for idle
// sessions and reports what their clients acknowledged; serve calls it
// once the listeners drained.
func (s *Server) Flush() {
	s.public.WaitRecords()
	s.warm.Flush()
}

// WaitDeliveries returns once the delivery records of the stream
// responses that ended were written (they are written beside the
// response, after it: gateway/public/stream.go).
func (s *Server) WaitDeliveries() { s.public.WaitRecords() }

// ConnContext is the public http.Server's ConnContext: it keeps each
// connection in its requests' contexts, so that a response can ask the
// connection's TCP stack what it carried (gateway/deliver/acked.go).
func (s *Server) ConnContext(ctx context.Context, c net.Conn) context.Context {
	return deliver.ConnContext(ctx, c)
}

// Registry is where the gateway's metrics live. Other parts of the process
// (the webhook deliverer) register their collectors on it, so that
// /metrics shows them too.
func (s *Server) Registry() prometheus.Registerer { return s.metrics.Reg }

// ObserveClaimBatch counts one claim transaction of the ledger's: size
// claims, the oldest of which waited queueWait for it, failed when it did
// not commit. The process hands it to the ledger (sqlcore.DB.OnClaimBatch)
// for gateway_claim_batch_size, gateway_claim_batches_total and
// gateway_claim_queue_wait_seconds.
func (s *Server) ObserveClaimBatch(size int, queueWait time.Duration, failed bool) {
	s.metrics.ClaimBatch(size, queueWait, failed)
}

// Session affinity modes (GATEWAY_SESSION_AFFINITY, SPEC §5).
const (
	AffinityClient  = public.AffinityClient
	AffinityAccount = public.AffinityAccount
	AffinityOff     = public.AffinityOff
)

// ValidAffinity reports whether mode is one of the affinity modes.
func ValidAffinity(mode string) bool { return public.ValidAffinity(mode) }
