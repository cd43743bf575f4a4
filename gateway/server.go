// Package gateway is the HTTP layer: public download routes (/d/, /s/) and
// the admin API. It combines the ledger (who may download) with storage
// (the bytes) and the sessions policy (ranges, budgets, defaults).
package gateway

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/sessions"
	"github.com/dlgate/dlgate/storage"
)

// Authenticator verifies the caller's account on public routes (SPEC §8).
// It returns "" for an anonymous caller and an error for credentials that
// are present but invalid.
type Authenticator interface {
	Authenticate(r *http.Request) (account string, err error)
}

// Anonymous verifies nobody: GATEWAY_AUTH=none.
type Anonymous struct{}

// Authenticate always returns "".
func (Anonymous) Authenticate(*http.Request) (string, error) { return "", nil }

// Options configure a Server. Ledger, Store, Secret and PublicURL are
// required.
type Options struct {
	Ledger     ledger.Ledger
	Store      storage.Store
	Secret     []byte
	PublicURL  string
	AdminToken string
	Auth       Authenticator
	Logger     *slog.Logger
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
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Server serves the public and admin routes.
type Server struct {
	Options
	log      *slog.Logger
	metrics  *metrics
	draining atomic.Bool
}

// Drain marks the server as shutting down: /readyz answers 503 so load
// balancers stop sending new work while running downloads finish.
func (s *Server) Drain() { s.draining.Store(true) }

// New checks opts and returns a Server.
func New(opts Options) (*Server, error) {
	if opts.Ledger == nil || opts.Store == nil || len(opts.Secret) < 16 || opts.PublicURL == "" {
		return nil, errors.New("gateway: ledger, store, a secret of at least 16 bytes and a public URL are required")
	}
	opts.PublicURL = strings.TrimRight(opts.PublicURL, "/")
	if opts.Auth == nil {
		opts.Auth = Anonymous{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.SlotLease <= 0 {
		opts.SlotLease = 30 * time.Second
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
	return &Server{Options: opts, log: opts.Logger, metrics: newMetrics()}, nil
}

// PublicHandler returns the handler for GATEWAY_LISTEN.
func (s *Server) PublicHandler() http.Handler {
	r := mux.NewRouter()
	r.Handle("/d/{token}", s.instrument("link", true, s.handleLink)).Methods(http.MethodGet, http.MethodHead)
	r.Handle("/d/{token}/sessions", s.instrument("mint", true, s.handleMint)).Methods(http.MethodPost)
	r.Handle("/s/{token}", s.instrument("session", true, s.handleSession)).Methods(http.MethodGet, http.MethodHead)
	// The same paths with any other method: 405 with Allow (RFC 9110
	// §15.5.6), which mux's own MethodNotAllowedHandler cannot name.
	r.Handle("/d/{token}", s.notAllowed(true, "GET, HEAD"))
	r.Handle("/d/{token}/sessions", s.notAllowed(true, "POST"))
	r.Handle("/s/{token}", s.notAllowed(true, "GET, HEAD"))
	r.NotFoundHandler = s.instrument("unknown", true, func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, probNotFound, "")
	})
	r.MethodNotAllowedHandler = s.instrument("unknown", true, func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, probMethodNotAllowed, "")
	})
	return r
}

// AdminHandler returns the handler for GATEWAY_ADMIN_LISTEN.
func (s *Server) AdminHandler() http.Handler {
	r := mux.NewRouter()
	// Keys may contain encoded characters; match on the raw path and
	// unescape the variable ourselves.
	r.UseEncodedPath()
	auth := func(route string, h http.HandlerFunc) http.Handler {
		return s.instrument(route, false, s.requireAdmin(h))
	}
	r.Handle("/v1/links", auth("admin_links_create", s.handleCreateLink)).Methods(http.MethodPost)
	r.Handle("/v1/links/{id}", auth("admin_links_show", s.handleShowLink)).Methods(http.MethodGet)
	r.Handle("/v1/links/{id}/revoke", auth("admin_links_revoke", s.handleRevokeLink)).Methods(http.MethodPost)
	r.Handle("/v1/links/{id}/allowance", auth("admin_links_allowance", s.handleAllowance)).Methods(http.MethodPost)
	r.Handle("/v1/links/{id}/grants", auth("admin_links_grants", s.handleGrants)).Methods(http.MethodGet)
	r.Handle("/v1/sessions/{id}", auth("admin_sessions_revoke", s.handleRevokeSession)).Methods(http.MethodDelete)
	r.Handle("/v1/objects/{key:.+}", auth("admin_objects_put", s.handlePutObject)).Methods(http.MethodPut)
	r.Handle("/v1/links", s.notAllowed(false, "POST"))
	r.Handle("/v1/links/{id}", s.notAllowed(false, "GET"))
	r.Handle("/v1/links/{id}/revoke", s.notAllowed(false, "POST"))
	r.Handle("/v1/links/{id}/allowance", s.notAllowed(false, "POST"))
	r.Handle("/v1/links/{id}/grants", s.notAllowed(false, "GET"))
	r.Handle("/v1/sessions/{id}", s.notAllowed(false, "DELETE"))
	r.Handle("/v1/objects/{key:.+}", s.notAllowed(false, "PUT"))
	r.Handle("/healthz", s.instrument("healthz", false, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})).Methods(http.MethodGet, http.MethodHead)
	r.Handle("/readyz", s.instrument("readyz", false, s.handleReady)).Methods(http.MethodGet, http.MethodHead)
	r.Handle("/metrics", promhttp.HandlerFor(s.metrics.reg, promhttp.HandlerOpts{})).Methods(http.MethodGet)
	r.NotFoundHandler = s.instrument("unknown", false, func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, probNotFound, "")
	})
	r.MethodNotAllowedHandler = s.instrument("unknown", false, func(w http.ResponseWriter, r *http.Request) {
		writeProblem(w, r, probMethodNotAllowed, "")
	})
	return r
}

// notAllowed answers 405 naming the methods the path does allow.
func (s *Server) notAllowed(public bool, allow string) http.Handler {
	return s.instrument("method_not_allowed", public, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Allow", allow)
		writeProblem(w, r, probMethodNotAllowed, "")
	})
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 3*time.Second)
	defer cancel()
	checks := map[string]string{"database": "ok", "store": "ok"}
	status := http.StatusOK
	if s.draining.Load() {
		checks["gateway"], status = "draining", http.StatusServiceUnavailable
	}
	if err := s.Ledger.Ping(ctx); err != nil {
		checks["database"], status = "unavailable", http.StatusServiceUnavailable
		s.log.WarnContext(ctx, "readiness: database", "err", err)
	}
	if p, ok := s.Store.(storage.Pinger); ok {
		if err := p.Ping(ctx); err != nil {
			checks["store"], status = "unavailable", http.StatusServiceUnavailable
			s.log.WarnContext(ctx, "readiness: store", "err", err)
		}
	}
	writeJSON(w, status, checks)
}

// RunSweeper ends expired sessions and clears lapsed leases every
// interval until ctx ends. Every process runs one; they do not collide.
func (s *Server) RunSweeper(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		for {
			res, err := s.Ledger.Sweep(ctx, 500)
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
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
