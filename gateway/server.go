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
	"github.com/dlgate/dlgate/internal/logbuf"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/preview"
	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/token"
)

// Options configure a Server. Ledger, Store, Secret and PublicURL are
// required. The tuning is in the groups config declares (config/options.go),
// each field zero meaning the default config names on it: `gateway serve`
// wires the settings into them (cmd/gateway/serve.go), and New applies
// config's defaults to whatever was left zero.
type Options struct {
	Ledger ledger.Ledger
	Store  storage.Store
	// Uploads keeps the resumable uploads of /v1/uploads/ (SPEC §11); nil
	// takes Ledger when it implements ledger.Uploads. Without either the
	// route answers 501 delete-unsupported's sibling, uploads-unsupported.
	Uploads ledger.Uploads
	Secret  []byte
	// SecretPrevious are older secrets whose tokens are still accepted,
	// newest first, so the secret can be rotated (SPEC §2).
	SecretPrevious [][]byte
	PublicURL      string
	AdminToken     string
	// Auth verifies callers and names their address (SPEC §8); default
	// GATEWAY_AUTH=none with no trusted proxy.
	Auth auth.Authenticator
	// ClientAddr names a request's client for the access log (SPEC §8);
	// default the direct peer. The gateway passes auth.ClientAddr with
	// GATEWAY_TRUSTED_PROXIES.
	ClientAddr func(*http.Request) netip.Addr
	// Previews recognises link previewers and prefetches (SPEC §8);
	// default preview.Default().
	Previews public.PreviewDetector
	// HidePreviewDetails keeps file name and size out of previews
	// (GATEWAY_PREVIEW_DETAILS=false).
	HidePreviewDetails bool
	// NoConsole turns the operator console off (GATEWAY_CONSOLE=false):
	// nothing is served under /console/ (404).
	NoConsole bool
	// HSTS is the Strict-Transport-Security value put on every public
	// response (SPEC §10); empty sends none (plain HTTP, or TLS ended
	// at a proxy, which then owns the header).
	HSTS string
	// Version labels gateway_build_info.
	Version string
	// Logger defaults to slog.Default(); Now, the clock, to time.Now.
	Logger *slog.Logger
	Now    func() time.Time

	config.Timeouts
	config.Sessions
	config.Retention
	config.UploadLimits
}

// Server serves the public and admin routes.
type Server struct {
	Options
	log *slog.Logger
	// lines is the process's log handler when it writes the access line
	// itself (logbuf.NewLineHandler, as gateway serve's): nil otherwise.
	lines   *logbuf.Handler
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

// New checks opts, applies config's defaults to every option left zero
// (Options.withDefaults) and assembles the server's parts.
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
		SlotIdle: opts.SlotIdle, SlotWait: opts.SlotWait, Chunk: opts.Chunk, ReportEvery: opts.ReportEvery,
	})
	pipeline := deliver.New(deliver.Config{Store: opts.Store, Log: log, Metrics: m, WriteTimeout: opts.WriteTimeout,
		OpenTimeout: opts.StoreOpenTimeout, IdleTimeout: opts.StoreIdleTimeout, Now: opts.Now})
	s := &Server{Options: opts, log: log, metrics: m, keys: keys, warm: w, objects: opts.Ledger, upkeep: opts.Ledger}
	s.lines, _ = opts.Logger.Handler().(*logbuf.Handler)
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
		Expiry: opts.UploadExpiry, MaxSize: opts.UploadMaxSize, LockLease: opts.UploadLockLease, LockWait: opts.UploadLockWait,
		Checkpoint: opts.UploadCheckpoint, Logger: s.log,
		// Stored exactly as PUT /v1/objects stores a version: recorded
		// (with the audit entry of the request's actor) or deleted again.
		Record: func(ctx context.Context, v storage.Version) error {
			return opts.Ledger.ObjectRecord(ctx, v)
		}})
}

// withDefaults returns o with config's default of every tuning field left
// zero, and the plain implementation of every dependency left nil.
func (o Options) withDefaults() Options {
	config.ApplyDefaults(&o.Timeouts, &o.Sessions, &o.UploadLimits)
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
	return o
}

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
// claims, queueWaits how long each claim it decided waited in the queue
// for it, failed when it did not commit. The process hands it to the
// ledger (sqlcore.DB.OnClaimBatch) for gateway_claim_batch_size,
// gateway_claim_batches_total and gateway_claim_queue_wait_seconds.
func (s *Server) ObserveClaimBatch(size int, queueWaits []time.Duration, failed bool) {
	s.metrics.ClaimBatch(size, queueWaits, failed)
}

// Session affinity modes (GATEWAY_SESSION_AFFINITY, SPEC §5).
const (
	AffinityClient  = public.AffinityClient
	AffinityAccount = public.AffinityAccount
	AffinityOff     = public.AffinityOff
)

// ValidAffinity reports whether mode is one of the affinity modes.
func ValidAffinity(mode string) bool { return public.ValidAffinity(mode) }
