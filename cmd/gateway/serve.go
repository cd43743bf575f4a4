package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dlgate/dlgate/auth"
	"github.com/dlgate/dlgate/config"
	"github.com/dlgate/dlgate/gateway"
	"github.com/dlgate/dlgate/internal/logbuf"
	"github.com/dlgate/dlgate/internal/tlsserve"
	"github.com/dlgate/dlgate/ledger/sqlcore"
	"github.com/dlgate/dlgate/preview"
	"github.com/dlgate/dlgate/sessions"
	"github.com/dlgate/dlgate/storage"
)

// Run loads the configuration from args and the environment and serves.
func (c *serveCommand) Run(ctx context.Context, args []string) error {
	cfg, err := c.main.loadConfig(args, "Usage: gateway serve [flags]\n\nRuns the gateway, applying pending migrations first unless --no-migrate.\nFlags (each also an environment variable and a --config file key):\n")
	if err != nil {
		return err
	}
	jsonLogs.Store(cfg.LogFormat == "json")
	err = serve(ctx, cfg, c.main.Stdout)
	if err != nil && cfg.LogFormat == "json" {
		// Every line is JSON in this format, the last one too.
		slog.New(slog.NewJSONHandler(c.main.Stderr, nil)).Error("gateway stopped", "err", err)
		return &reportedError{err}
	}
	return err
}

// jsonLogs is set once serve runs with GATEWAY_LOG_FORMAT=json, so that
// even the last words of a process killed by a second signal are JSON.
var jsonLogs atomic.Bool

// logs is serve's log writer, which holds info lines for a moment: a
// process ended by a second signal writes them out first.
var logs atomic.Pointer[logbuf.Writer]

// progName is how the person ran this program, for the hints it prints:
// "go run ./cmd/gateway" under go run, else the command as typed.
var progName = "gateway"

// previewDetector is the built-in list of link previewers, or the one
// GATEWAY_PREVIEW_AGENTS names instead ("none": no agent at all).
func previewDetector(list string) (*preview.Detector, error) {
	switch strings.TrimSpace(list) {
	case "":
		return preview.Default(), nil
	case "none":
		return preview.New(nil)
	}
	d, err := preview.New(preview.ParseList(list))
	if err != nil {
		return nil, fmt.Errorf("config: GATEWAY_PREVIEW_AGENTS: %w", err)
	}
	return d, nil
}

// newAuthenticator verifies callers as GATEWAY_AUTH says (SPEC §8). A
// JWKS URL is refreshed in the background until ctx ends.
func newAuthenticator(ctx context.Context, cfg *config.Config, trusted []netip.Prefix, log *slog.Logger) (auth.Authenticator, error) {
	leeway := cfg.JWTLeeway
	if leeway == 0 {
		leeway = -1 // auth reads 0 as "default"; the operator said none
	}
	a, err := auth.New(ctx, auth.Config{
		Mode: cfg.Auth, Cookie: cfg.AuthCookie, Header: cfg.AuthHeader, TrustedProxies: trusted,
		JWTKey: cfg.JWTKey, JWKSURL: cfg.JWTJWKSURL, Issuer: cfg.JWTIssuer, Audience: cfg.JWTAudience,
		AccountClaim: cfg.JWTAccountClaim, Leeway: leeway, Logger: log,
	})
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	return a, nil
}

// logDelay is the longest an info line waits in memory before it is
// written.
const logDelay = 50 * time.Millisecond

// announce tells the person who started the gateway where it listens and,
// on the embedded default, the command that makes a first link from this
// very setup: the binary as it was run, and the admin URL and data
// directory when they are not the defaults the links commands assume. In
// JSON log format it is one JSON line, like everything else.
func announce(w io.Writer, cfg *config.Config, publicURL, adminURL, newToken string) {
	first := ""
	if cfg.DBDriver == "sqlite" && cfg.Store == "fs" {
		// Only the embedded default is someone's first run.
		var b strings.Builder
		if cfg.DataDir != config.DefaultDataDir {
			dir, err := filepath.Abs(cfg.DataDir)
			if err != nil {
				dir = cfg.DataDir
			}
			fmt.Fprintf(&b, "GATEWAY_DATA_DIR=%s ", shellQuote(dir))
		}
		b.WriteString(progName)
		b.WriteString(" links create ./some.file --downloads 3 --expires-in 24h")
		if adminURL != "http://"+config.DefaultAdminListen {
			b.WriteString(" --admin-url " + adminURL)
		}
		first = b.String()
	}
	if cfg.LogFormat == "json" {
		l := slog.New(slog.NewJSONHandler(w, nil))
		l.Info("listening", "public_url", publicURL, "admin_url", adminURL, "database", cfg.DBDriver, "store", cfg.Store)
		if newToken != "" {
			l.Info("generated admin token", "data_dir", cfg.DataDir, "admin_token", newToken)
		}
		if first != "" {
			l.Info("create a first link", "command", first)
		}
		return
	}
	fmt.Fprintf(w, "gateway: public %s, admin %s, database %s, store %s\n", publicURL, adminURL, cfg.DBDriver, cfg.Store)
	if newToken != "" {
		fmt.Fprintf(w, "gateway: generated admin token (saved in %s): %s\n", cfg.DataDir, newToken)
	}
	if first != "" {
		fmt.Fprintf(w, "gateway: create a first link with: %s\n", first)
	}
}

func isWildcard(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r == '/' || r == '.' || r == '-' || r == '_' || r == ':' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// serve runs the gateway with cfg until ctx is canceled, then shuts down
// gracefully: listeners close at once, running downloads get
// cfg.ShutdownGrace to finish.
func serve(ctx context.Context, cfg *config.Config, stdout io.Writer) error {
	log, flush := openLogs(cfg)
	defer flush()
	previews, err := previewDetector(cfg.PreviewAgents)
	if err != nil {
		return err
	}
	trusted, err := auth.ParsePrefixes(cfg.TrustedProxies)
	if err != nil {
		return fmt.Errorf("config: GATEWAY_TRUSTED_PROXIES: %w", err)
	}
	authn, err := newAuthenticator(ctx, cfg, trusted, log)
	if err != nil {
		return err
	}
	newToken, err := cfg.EnsureSecrets()
	if err != nil {
		return err
	}
	db, err := openLedger(ctx, cfg, cfg.NoMigrate)
	if err != nil {
		return err
	}
	defer db.Close()
	db.Timeout = cfg.DBTimeout
	db.ClaimBatch, db.RefusalCache = cfg.ClaimBatch, cfg.RefusalCache
	// A stream download's delivery record shares a transaction with the
	// others of its 50 ms, not a commit of its own (sqlcore/records.go).
	db.RecordWindow = sqlcore.DefaultRecordWindow
	store, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	if c, ok := store.(io.Closer); ok {
		defer c.Close()
	}
	ls, err := listen(cfg, log)
	if err != nil {
		return err
	}
	defer ls.Close()
	certs, err := newTLS(ctx, cfg, ls.public.Addr().String(), ls.redirectAddr(), log)
	if err != nil {
		return err
	}
	defer certs.Close()
	publicTLS, adminTLS := certs.PublicConfig(), certs.AdminConfig()
	publicURL := cfg.PublicURL
	if publicURL == cfg.DefaultPublicURL(cfg.Listen) {
		// Port 0 (tests) or a wildcard host: name the address we got.
		publicURL = cfg.DefaultPublicURL(ls.public.Addr().String())
	}
	srv, err := gateway.New(gatewayOptions(cfg, db, store, log, previews, authn, trusted, publicURL, publicTLS != nil))
	if err != nil {
		return err
	}
	// Before anything is served: nothing claims yet.
	db.OnClaimBatch = func(b sqlcore.ClaimBatchStats) { srv.ObserveClaimBatch(b.Size, b.QueueWaits, b.Err != nil) }
	hooks, err := newWebhooks(cfg, db, srv.Registry(), log)
	if err != nil {
		return err
	}
	adminURL := scheme(adminTLS != nil) + config.DialableAddr(ls.admin.Addr().String())
	announce(stdout, cfg, publicURL, adminURL, newToken)
	if host, _, _ := net.SplitHostPort(cfg.Listen); cfg.PublicURL == cfg.DefaultPublicURL(cfg.Listen) && len(cfg.ACMEDomainList()) == 0 && isWildcard(host) {
		log.Warn("listening on every interface, but links name localhost; set GATEWAY_PUBLIC_URL to the address people reach",
			"listen", cfg.Listen, "public_url", publicURL)
	}
	log.Info("starting", "config", cfg)

	hs := newHTTPServers(srv, certs, publicURL, ls.redirect != nil, log)
	watchTLS(ctx, certs) // SIGHUP is ours before the first connection
	sweepCtx, stopSweep := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSweep()
	go srv.RunSweeper(sweepCtx, cfg.SweepInterval)
	hooksDone := runWebhooks(sweepCtx, hooks)

	if err := hs.serve(ctx, ls); err != nil {
		return err
	}
	log.Info("shutting down", "grace", cfg.ShutdownGrace)
	srv.Drain() // /readyz answers 503 from now on
	hs.shutdown(ctx, cfg.ShutdownGrace, log)
	stopSweep()
	<-hooksDone // before the database closes
	// Slots and budget kept warm for idle sessions go back now, not when
	// their lease lapses.
	srv.Flush()
	log.Info("stopped")
	return nil
}

// openLogs sets up the process's logger. Info and debug lines (an access
// line per request, a "session bytes sent" per range) wait up to logDelay
// to be written together; warnings and errors are written at once
// (internal/logbuf). flush writes what waits.
func openLogs(cfg *config.Config) (*slog.Logger, func()) {
	lw := logbuf.New(os.Stderr, logDelay)
	logs.Store(lw)
	log := slog.New(logbuf.NewLineHandler(lw, cfg.LogFormat == "json", cfg.LogLevel, slog.LevelWarn))
	return log, func() { lw.Flush() } //nolint:errcheck // stderr is gone
}

// listeners are the gateway's sockets: public, admin and, when set, the
// plain-HTTP redirect listener.
type listeners struct{ public, admin, redirect net.Listener }

// listen opens them. Past GATEWAY_MAX_CONNECTIONS, public connections wait
// in the kernel's backlog instead of taking descriptors (and accept
// failing with EMFILE).
func listen(cfg *config.Config, log *slog.Logger) (*listeners, error) {
	ls := &listeners{}
	pub, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen %s: %w", cfg.Listen, err)
	}
	ls.public = gateway.LimitListener(pub, connectionLimit(cfg.MaxConnections, log))
	if ls.admin, err = net.Listen("tcp", cfg.AdminListen); err != nil {
		ls.Close()
		return nil, fmt.Errorf("admin listen %s: %w", cfg.AdminListen, err)
	}
	if cfg.RedirectListen != "" {
		if ls.redirect, err = net.Listen("tcp", cfg.RedirectListen); err != nil {
			ls.Close()
			return nil, fmt.Errorf("redirect listen %s: %w", cfg.RedirectListen, err)
		}
	}
	return ls, nil
}

func (ls *listeners) redirectAddr() string {
	if ls.redirect == nil {
		return ""
	}
	return ls.redirect.Addr().String()
}

func (ls *listeners) Close() {
	for _, l := range []net.Listener{ls.public, ls.admin, ls.redirect} {
		if l != nil {
			l.Close()
		}
	}
}

// gatewayOptions wires the configuration into the gateway's options: the
// one place settings become options. What no setting names is left zero,
// for gateway.New to give config's default.
func gatewayOptions(cfg *config.Config, db *sqlcore.DB, store storage.Store, log *slog.Logger, previews *preview.Detector,
	authn auth.Authenticator, trusted []netip.Prefix, publicURL string, tls bool) gateway.Options {
	hsts := ""
	if tls {
		hsts = tlsserve.HSTS
	}
	return gateway.Options{
		Ledger: db, Store: store, Secret: []byte(cfg.Secret), SecretPrevious: cfg.PreviousSecrets(),
		PublicURL: publicURL, AdminToken: cfg.AdminToken,
		Auth:       authn,
		ClientAddr: func(r *http.Request) netip.Addr { return auth.ClientAddr(r, trusted) },
		Previews:   previews, HidePreviewDetails: !cfg.PreviewDetails,
		// The operator console (SPEC §11).
		NoConsole: !cfg.Console,
		HSTS:      hsts,
		Version:   buildVersion(),
		Logger:    log,
		Timeouts: config.Timeouts{
			// A stalled store answers 504 or cuts the transfer after these.
			StoreOpenTimeout: cfg.StoreOpenTimeout, StoreIdleTimeout: cfg.StoreIdleTimeout,
			// A body that never finishes is refused before anything is claimed.
			BodyTimeout: cfg.BodyTimeout,
		},
		Sessions: config.Sessions{
			Defaults: sessions.Defaults{TTL: cfg.SessionTTL, ByteBudget: cfg.SessionByteBudget, MaxConcurrency: cfg.SessionMaxConcurrency},
			Affinity: cfg.SessionAffinity, SlotLease: cfg.SlotLease,
		},
		// What the sweeper deletes, and when (SPEC §6).
		Retention: config.Retention{ObjectRetention: cfg.ObjectRetention, AuditRetention: cfg.AuditRetention},
		// Unfinished resumable uploads (SPEC §11).
		UploadLimits: config.UploadLimits{UploadExpiry: cfg.UploadExpiry},
	}
}

// httpServers are the gateway's HTTP servers, one per listener.
type httpServers struct{ public, admin, redirect *http.Server }

// baseServer has what every listener shares: the header and idle limits
// on both protocols (tlsserve.HTTP2Config), the error log at debug, and
// OPTIONS * left to the handler, so that it carries the listener's
// headers and request id (docs/api.md) instead of net/http's answer.
func baseServer(h http.Handler, tlsConf *tls.Config, log *slog.Logger) *http.Server {
	return &http.Server{
		Handler:                      h,
		ReadHeaderTimeout:            10 * time.Second,
		IdleTimeout:                  2 * time.Minute,
		MaxHeaderBytes:               64 << 10,
		ErrorLog:                     slog.NewLogLogger(log.Handler(), slog.LevelDebug),
		DisableGeneralOptionsHandler: true,
		TLSConfig:                    tlsConf,
		HTTP2:                        tlsserve.HTTP2Config(),
		ConnState:                    tlsserve.EnableHTTP2Batching, // a no-op without TLS
	}
}

func newHTTPServers(srv *gateway.Server, certs *tlsserve.Server, publicURL string, redirect bool, log *slog.Logger) *httpServers {
	// The public server has no ReadTimeout and no WriteTimeout: either
	// would cut a slow reader of a large file (an expired read deadline
	// even cancels the request context through net/http's background
	// read). The handlers renew a per-write deadline instead, and public
	// request bodies are size-limited and must arrive whole within
	// GATEWAY_BODY_TIMEOUT (gateway/limits.go). An idle keep-alive
	// connection is closed after IdleTimeout.
	public := baseServer(srv.PublicHandler(), certs.PublicConfig(), log)
	public.ConnContext = srv.ConnContext // a cut session response is charged what the connection carried
	hs := &httpServers{public: public, admin: baseServer(srv.AdminHandler(), certs.AdminConfig(), log)}
	if redirect {
		// Plain HTTP: 308 to the https public URL, and ACME HTTP-01.
		hs.redirect = baseServer(certs.HTTPHandler(tlsserve.Redirect(publicURL, log)), nil, log)
		hs.redirect.HTTP2 = nil
	}
	return hs
}

// serve runs each server on its listener until ctx ends (nil) or one of
// them fails (its error).
func (hs *httpServers) serve(ctx context.Context, ls *listeners) error {
	errc := make(chan error, 3)
	go func() { errc <- serveOn(hs.public, ls.public) }()
	go func() { errc <- serveOn(hs.admin, ls.admin) }()
	if hs.redirect != nil {
		go func() { errc <- hs.redirect.Serve(ls.redirect) }()
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
		return nil
	}
}

// shutdown closes the listeners at once; each server then waits for its
// own running requests (downloads, uploads) up to grace, and what still
// runs after it is cut.
func (hs *httpServers) shutdown(ctx context.Context, grace time.Duration, log *slog.Logger) {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if hs.redirect != nil {
		defer hs.redirect.Close()
	}
	admErr := make(chan error, 1)
	go func() { admErr <- hs.admin.Shutdown(sctx) }()
	errPub := hs.public.Shutdown(sctx)
	errAdm := <-admErr
	if errors.Is(errPub, context.DeadlineExceeded) || errors.Is(errAdm, context.DeadlineExceeded) {
		log.Warn("grace period over; closing the remaining connections")
		hs.public.Close()
		hs.admin.Close()
	}
}

// fdReserve is what connectionLimit leaves, below the open-file limit, for
// everything but public connections: the database pool (64), the store's
// connections, admin connections, open objects and log files.
const fdReserve = 256

// connectionLimit is GATEWAY_MAX_CONNECTIONS, lowered (with a warning)
// when the process may not open that many descriptors plus fdReserve: a
// limit above RLIMIT_NOFILE would turn the queue into accept errors. Go
// raises the soft limit to the hard one at start, so that is what counts.
func connectionLimit(want int, log *slog.Logger) int {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil || rl.Cur > math.MaxInt32 {
		return want
	}
	if most := int(rl.Cur) - fdReserve; want > most {
		most = max(most, 1)
		log.Warn("GATEWAY_MAX_CONNECTIONS is above what the open-file limit allows; lowered",
			"max_connections", want, "open_file_limit", rl.Cur, "lowered_to", most)
		return most
	}
	return want
}
