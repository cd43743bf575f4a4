package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/dlgate/dlgate/config"
	"github.com/dlgate/dlgate/internal/tlsserve"
)

// newTLS gives the listeners their certificates (SPEC §10): cfg's PEM
// pairs, and ACME for cfg's domains with its cache under the data
// directory. publicAddr and redirectAddr are the bound addresses, where
// the ACME challenges are answered.
func newTLS(ctx context.Context, cfg *config.Config, publicAddr, redirectAddr string, log *slog.Logger) (*tlsserve.Server, error) {
	o := tlsserve.Options{
		CertFile: cfg.TLSCert, KeyFile: cfg.TLSKey,
		AdminCertFile: cfg.AdminTLSCert, AdminKeyFile: cfg.AdminTLSKey,
		Logger: log,
	}
	testPoll(&o)
	if domains := cfg.ACMEDomainList(); len(domains) > 0 {
		o.ACME = &tlsserve.ACMEOptions{
			Domains: domains, Email: cfg.ACMEEmail, Directory: cfg.ACMEDirectory,
			CacheDir: filepath.Join(cfg.DataDir, "acme"),
			TLSAddr:  publicAddr, HTTPAddr: redirectAddr,
			Logger: log,
		}
		testRenewal(o.ACME)
	}
	return tlsserve.New(ctx, o)
}

// testRenewal lets the e2e tests renew certificates of a test CA within
// seconds (e2e/pebble_test.go): DLGATE_TEST_ACME_RENEWAL_RATIO is the
// part of a lifetime in which a certificate is renewed, and
// DLGATE_TEST_ACME_RENEW_CHECK how often that is checked. Operators have
// no reason to set them: the defaults follow the CA.
func testRenewal(o *tlsserve.ACMEOptions) {
	if r, err := strconv.ParseFloat(os.Getenv("DLGATE_TEST_ACME_RENEWAL_RATIO"), 64); err == nil && r > 0 && r < 1 {
		o.RenewalWindowRatio = r
	}
	if d, err := time.ParseDuration(os.Getenv("DLGATE_TEST_ACME_RENEW_CHECK")); err == nil && d > 0 {
		o.RenewCheckInterval = d
	}
}

// testPoll lets the e2e tests show that SIGHUP alone reloads the
// certificate files (e2e/https_test.go): DLGATE_TEST_TLS_POLL, a Go
// duration, is how often the files are looked at (default
// tlsserve.DefaultPoll); an hour keeps the poller out of a test's way.
// Operators have no reason to set it.
func testPoll(o *tlsserve.Options) {
	if d, err := time.ParseDuration(os.Getenv("DLGATE_TEST_TLS_POLL")); err == nil && d > 0 {
		o.Poll = d
	}
}

// serveOn serves s on l, over TLS when s has a TLS configuration, with
// the writes of HTTP/2 connections batched beneath TLS (baseServer sets
// the ConnState hook that turns them on; internal/tlsserve/batch.go).
func serveOn(s *http.Server, l net.Listener) error {
	if s.TLSConfig != nil {
		return s.ServeTLS(tlsserve.BatchListener(l), "", "")
	}
	return s.Serve(l)
}

// watchTLS reloads the certificate files on SIGHUP and when they change,
// until ctx ends. It subscribes to SIGHUP before it returns (a SIGHUP's
// default action would end the process) and watches in the background.
func watchTLS(ctx context.Context, t *tlsserve.Server) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go t.Run(ctx)
	go reloadOnHUP(ctx, t, hup)
}

func reloadOnHUP(ctx context.Context, t *tlsserve.Server, hup chan os.Signal) {
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			t.Reload()
		}
	}
}

// scheme is the URL scheme of a listener that serves TLS or not.
func scheme(tls bool) string {
	if tls {
		return "https://"
	}
	return "http://"
}
