// Package tlsserve gives the gateway's listeners their certificates
// (SPEC §10): a PEM pair from files, reloaded on SIGHUP and when the files
// change, or certificates from an ACME CA through certmagic; the TLS and
// HTTP/2 policy both listeners share; OCSP stapling for file certificates
// whose issuer runs a responder; and the plain-HTTP listener that only
// redirects to https.
package tlsserve

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"
)

// DefaultPoll is how often certificate files are checked for changes.
const DefaultPoll = 2 * time.Second

// Options configure New. Each listener gets TLS from its own pair, else
// from the public pair, else, with ACME, from the ACME certificates.
type Options struct {
	CertFile, KeyFile           string // GATEWAY_TLS_CERT, GATEWAY_TLS_KEY
	AdminCertFile, AdminKeyFile string // GATEWAY_ADMIN_TLS_CERT, GATEWAY_ADMIN_TLS_KEY
	// ACME, when set, manages certificates for its domains; a public
	// pair then serves only handshakes for other names (an IP address,
	// an internal name).
	ACME *ACMEOptions
	// Poll is how often the files are looked at (default DefaultPoll).
	Poll time.Duration
	// OCSPClient asks OCSP responders (default: a 10 s timeout).
	OCSPClient *http.Client
	Logger     *slog.Logger
}

// Server holds the listeners' certificates. Its methods are safe for
// concurrent use.
type Server struct {
	public, admin *Pair // admin is public when it has no pair of its own
	acme          *ACME
	opts          Options
	log           *slog.Logger
}

// New loads the pairs and starts ACME management (NewACME). It returns
// an error naming the variable and the file when a pair cannot be loaded:
// a gateway does not start on a certificate it cannot serve.
func New(ctx context.Context, o Options) (*Server, error) {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.OCSPClient == nil {
		o.OCSPClient = &http.Client{Timeout: 10 * time.Second}
	}
	s := &Server{opts: o, log: o.Logger}
	var err error
	if o.CertFile != "" {
		if s.public, err = LoadPair(o.CertFile, o.KeyFile); err != nil {
			return nil, fmt.Errorf("tls: GATEWAY_TLS_CERT/GATEWAY_TLS_KEY: %w", err)
		}
		s.logPair("public", s.public, "certificate loaded")
	}
	s.admin = s.public
	if o.AdminCertFile != "" {
		if s.admin, err = LoadPair(o.AdminCertFile, o.AdminKeyFile); err != nil {
			return nil, fmt.Errorf("tls: GATEWAY_ADMIN_TLS_CERT/GATEWAY_ADMIN_TLS_KEY: %w", err)
		}
		s.logPair("admin", s.admin, "certificate loaded")
	}
	if o.ACME != nil {
		if o.ACME.Logger == nil {
			o.ACME.Logger = o.Logger
		}
		if s.acme, err = NewACME(ctx, *o.ACME); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// PublicConfig is the public listener's TLS configuration; nil when it
// serves plain HTTP.
func (s *Server) PublicConfig() *tls.Config {
	switch {
	case s.acme != nil:
		return serverConfig(s.getWithACME(s.public), "acme-tls/1")
	case s.public != nil:
		return serverConfig(getPair(s.public))
	}
	return nil
}

// AdminConfig is the admin listener's; nil when it serves plain HTTP.
func (s *Server) AdminConfig() *tls.Config {
	switch {
	case s.admin != nil && s.admin != s.public:
		return serverConfig(getPair(s.admin))
	case s.acme != nil:
		return serverConfig(s.getWithACME(s.public))
	case s.admin != nil:
		return serverConfig(getPair(s.admin))
	}
	return nil
}

// HTTPHandler is next, answering ACME HTTP-01 challenges first when ACME
// is on.
func (s *Server) HTTPHandler(next http.Handler) http.Handler {
	if s.acme == nil {
		return next
	}
	return s.acme.HTTPHandler(next)
}

// Close stops ACME renewals.
func (s *Server) Close() {
	if s.acme != nil {
		s.acme.Stop()
	}
}

func getPair(p *Pair) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return p.Certificate(), nil }
}

// getWithACME serves the ACME certificates to their names and to
// TLS-ALPN-01 validations, and fallback (if any) to everything else.
func (s *Server) getWithACME(fallback *Pair) func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return func(h *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if fallback == nil || s.acme.Covers(h.ServerName) || slices.Contains(h.SupportedProtos, "acme-tls/1") {
			return s.acme.GetCertificate(h)
		}
		return fallback.Certificate(), nil
	}
}

// pairs are the distinct pairs, with the listeners each serves.
func (s *Server) pairs() map[*Pair]string {
	m := map[*Pair]string{}
	if s.public != nil {
		m[s.public] = "public"
	}
	if s.admin != nil {
		if _, ok := m[s.admin]; ok {
			m[s.admin] = "public,admin"
		} else {
			m[s.admin] = "admin"
		}
	}
	return m
}

// Reload reads every pair's files again (SIGHUP) and logs what happened:
// a new certificate in force, a refused one and the old kept, or (at
// debug) the certificate in force read again unchanged.
func (s *Server) Reload() {
	for p, listeners := range s.pairs() {
		if changed, err := s.reload(p, listeners); !changed && err == nil {
			certFile, _ := p.Files()
			s.log.Debug("tls: certificate files read again; the certificate is unchanged", "listener", listeners,
				"cert_file", certFile, "serial", serial(p.Certificate().Leaf))
		}
	}
}

func (s *Server) reload(p *Pair, listeners string) (bool, error) {
	changed, err := p.Reload()
	certFile, keyFile := p.Files()
	switch {
	case err != nil:
		old := p.Certificate()
		s.log.Error("tls: new certificate refused; the old one keeps serving", "listener", listeners,
			"cert_file", certFile, "key_file", keyFile, "err", err, "serving_serial", serial(old.Leaf))
	case changed:
		s.logPair(listeners, p, "certificate reloaded")
	}
	return changed, err
}

func (s *Server) logPair(listeners string, p *Pair, msg string) {
	c := p.Certificate()
	certFile, _ := p.Files()
	s.log.Info("tls: "+msg, "listener", listeners, "cert_file", certFile, "serial", serial(c.Leaf),
		"names", strings.Join(c.Leaf.DNSNames, ","), "not_after", c.Leaf.NotAfter.UTC().Format(time.RFC3339))
}

// Run watches the pairs' files until ctx ends, reloading a pair when its
// files change, and keeps each one's OCSP staple fresh.
func (s *Server) Run(ctx context.Context) {
	pairs := s.pairs()
	if len(pairs) == 0 {
		<-ctx.Done()
		return
	}
	nextStaple := map[*Pair]time.Time{}
	for p := range pairs {
		nextStaple[p] = time.Now()
	}
	t := time.NewTicker(s.opts.Poll)
	defer t.Stop()
	for first := true; ; first = false {
		for p, listeners := range pairs {
			if p.changed() {
				if changed, _ := s.reload(p, listeners); changed {
					nextStaple[p] = time.Now()
				}
			}
			if now := time.Now(); !now.Before(nextStaple[p]) {
				nextStaple[p] = s.staple(ctx, p, listeners, now)
			}
		}
		if first {
			// Files changed from now on are read at the next poll (or
			// SIGHUP): e2e/https_test.go waits for this line.
			s.log.Debug("tls: watching the certificate files", "poll", s.opts.Poll.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// ocspRetry is how soon a failed OCSP request is tried again.
const ocspRetry = 10 * time.Minute

// staple fetches p's OCSP response and returns when to fetch again.
func (s *Server) staple(ctx context.Context, p *Pair, listeners string, now time.Time) time.Time {
	cert := p.Certificate()
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	raw, next, err := fetchStaple(rctx, s.opts.OCSPClient, cert, now)
	switch {
	case errors.Is(err, errNoResponder):
		return now.Add(100 * 365 * 24 * time.Hour) // until the files change
	case err != nil:
		if ctx.Err() == nil {
			s.log.Warn("tls: no OCSP staple; handshakes go on without one", "listener", listeners, "serial", serial(cert.Leaf), "err", err)
		}
		return now.Add(ocspRetry)
	}
	p.setStaple(cert.Leaf, raw)
	s.log.Debug("tls: OCSP staple refreshed", "listener", listeners, "serial", serial(cert.Leaf), "next", next.UTC().Format(time.RFC3339))
	return next
}

func serial(c *x509.Certificate) string {
	if c == nil {
		return ""
	}
	return fmt.Sprintf("%x", c.SerialNumber)
}
