package tlsserve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/certmagic"
	"github.com/mholt/acmez/v3/acme"
)

// LetsEncrypt is the default ACME directory (GATEWAY_ACME_DIRECTORY).
const LetsEncrypt = certmagic.LetsEncryptProductionCA

// ACMEOptions configure NewACME.
type ACMEOptions struct {
	// Domains are the names to hold certificates for
	// (GATEWAY_ACME_DOMAINS); required.
	Domains []string
	// Email is the ACME account's contact (GATEWAY_ACME_EMAIL); optional.
	Email string
	// Directory is the CA's directory URL (default LetsEncrypt).
	Directory string
	// CacheDir holds the account key, certificates, keys and the locks
	// that processes sharing it take (created 0700, files 0600).
	CacheDir string
	// TLSAddr is the public listener's bound address: TLS-ALPN-01
	// challenges (RFC 8737) are answered there, in its handshakes.
	TLSAddr string
	// HTTPAddr is the redirect listener's bound address, where HTTP-01
	// challenges are answered; empty turns HTTP-01 off.
	HTTPAddr string
	Logger   *slog.Logger
	// RenewalWindowRatio is the part of a certificate's lifetime, at its
	// end, in which it is renewed (default certmagic's third; Let's
	// Encrypt's ARI, when offered, may say earlier).
	RenewalWindowRatio float64
	// RenewCheckInterval is how often certificates are checked for
	// renewal (default certmagic's 10 minutes).
	RenewCheckInterval time.Duration
}

// ACME holds certificates from an ACME CA (RFC 8555), through certmagic.
// Several processes given the same CacheDir share one certificate per
// name: whichever takes the name's lock in the cache orders it, and the
// others, once they get the lock, find it in the cache and load it
// instead of ordering their own; renewals go the same way.
type ACME struct {
	cfg     *certmagic.Config
	issuer  *certmagic.ACMEIssuer
	cache   *certmagic.Cache
	domains map[string]bool
	log     *slog.Logger
}

// NewACME starts managing o.Domains in the background: certificates
// found in the cache are served at once, missing ones are ordered, and
// every one is renewed ahead of its expiry until Stop. A failed order or
// renewal is logged with what went wrong and retried with backoff; the
// last good certificate keeps serving. Errors: a configuration that
// cannot work (no domain, a bad address, an unusable cache directory).
func NewACME(ctx context.Context, o ACMEOptions) (*ACME, error) {
	if len(o.Domains) == 0 {
		return nil, errors.New("acme: no domain")
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Directory == "" {
		o.Directory = LetsEncrypt
	}
	if err := os.MkdirAll(o.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("acme: cache directory: %w", err)
	}
	tlsHost, tlsPort, err := splitPort(o.TLSAddr)
	if err != nil {
		return nil, fmt.Errorf("acme: public listener: %w", err)
	}
	a := &ACME{domains: map[string]bool{}, log: o.Logger}
	for _, d := range o.Domains {
		a.domains[strings.ToLower(d)] = true
	}
	zl := zapLogger(o.Logger)
	a.cache = certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert:   func(certmagic.Certificate) (*certmagic.Config, error) { return a.cfg, nil },
		RenewCheckInterval: o.RenewCheckInterval,
		Logger:             zl,
	})
	a.cfg = certmagic.New(a.cache, certmagic.Config{
		RenewalWindowRatio: o.RenewalWindowRatio,
		Storage:            &certmagic.FileStorage{Path: o.CacheDir},
		DefaultServerName:  o.Domains[0], // for clients that send no SNI
		Logger:             zl,
		OnEvent:            a.onEvent,
	})
	tmpl := certmagic.ACMEIssuer{
		CA: o.Directory, Email: o.Email,
		// Naming domains in GATEWAY_ACME_DOMAINS is the operator's
		// agreement to the CA's terms (README, "HTTPS").
		Agreed: true,
		// certmagic tries to listen on the challenge address; finding it
		// taken by our own listener, it leaves the answer to that
		// listener's handshakes (TLS-ALPN-01) or to HTTPHandler
		// (HTTP-01).
		ListenHost: tlsHost, AltTLSALPNPort: tlsPort,
		DisableHTTPChallenge: o.HTTPAddr == "",
		Logger:               zl,
	}
	if o.HTTPAddr != "" {
		_, port, err := splitPort(o.HTTPAddr)
		if err != nil {
			return nil, fmt.Errorf("acme: redirect listener: %w", err)
		}
		tmpl.AltHTTPPort = port
	}
	a.issuer = certmagic.NewACMEIssuer(a.cfg, tmpl)
	a.cfg.Issuers = []certmagic.Issuer{a.issuer}
	if err := a.cfg.ManageAsync(ctx, o.Domains); err != nil {
		a.cache.Stop()
		return nil, fmt.Errorf("acme: %w", err)
	}
	return a, nil
}

// Covers reports whether name is one of the managed domains.
func (a *ACME) Covers(name string) bool {
	return a.domains[strings.ToLower(strings.TrimSuffix(name, "."))]
}

// GetCertificate answers a handshake with the name's certificate, or
// with the challenge certificate of a TLS-ALPN-01 validation.
func (a *ACME) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return a.cfg.GetCertificate(hello)
}

// HTTPHandler answers HTTP-01 challenges (/.well-known/acme-challenge/),
// also those another process sharing the cache is solving, and passes
// every other request to next.
func (a *ACME) HTTPHandler(next http.Handler) http.Handler {
	return a.issuer.HTTPChallengeHandler(next)
}

// Stop ends renewals.
func (a *ACME) Stop() { a.cache.Stop() }

// onEvent logs what the operator needs to know, in our words: a
// certificate obtained or renewed, and a failure with what is wrong.
func (a *ACME) onEvent(ctx context.Context, event string, data map[string]any) error {
	switch event {
	case "cert_obtained":
		renewal, _ := data["renewal"].(bool)
		a.log.Info("acme: certificate obtained", "domain", data["identifier"], "renewal", renewal, "issuer", data["issuer"])
	case "cert_failed":
		renewal, _ := data["renewal"].(bool)
		err, _ := data["error"].(error)
		a.log.Error("acme: could not obtain a certificate; the last good one (if any) keeps serving, retrying with backoff",
			"domain", data["identifier"], "renewal", renewal, "cause", Explain(err), "err", err)
	case "cached_managed_cert":
		a.log.Info("acme: certificate loaded from the cache", "domains", data["sans"])
	}
	return nil
}

// Explain names, from an ACME error, what the operator must fix.
func Explain(err error) string {
	var p acme.Problem
	if !errors.As(err, &p) {
		var dnsErr *net.DNSError
		var opErr *net.OpError
		switch {
		case err == nil:
			return ""
		case errors.As(err, &dnsErr):
			return "DNS: the ACME directory's host does not resolve from here (GATEWAY_ACME_DIRECTORY)"
		case errors.As(err, &opErr):
			return "network: the ACME directory cannot be reached from here (GATEWAY_ACME_DIRECTORY, firewall, proxy)"
		case strings.Contains(err.Error(), "x509:") || strings.Contains(err.Error(), "certificate"):
			return "TLS: the ACME directory's certificate is not trusted (system roots, SSL_CERT_FILE)"
		}
		return "see err"
	}
	kinds := []string{p.Type}
	for _, sp := range p.Subproblems {
		kinds = append(kinds, sp.Type)
	}
	for _, k := range kinds {
		switch k {
		case acme.ProblemTypeRateLimited:
			return "rate limit: the CA refuses more orders for now; wait for the limit to pass (the cached certificate, if any, keeps serving)"
		case acme.ProblemTypeDNS:
			return "DNS: the CA could not resolve the domain; its A/AAAA records must name this machine"
		case acme.ProblemTypeConnection:
			return "port: the CA could not connect to the domain on 443 (TLS-ALPN-01, GATEWAY_LISTEN) or 80 (HTTP-01, GATEWAY_REDIRECT_LISTEN); check DNS, firewall and port forwarding"
		case acme.ProblemTypeUnauthorized, acme.ProblemTypeIncorrectResponse, acme.ProblemTypeTLS:
			return "challenge: the CA reached a server that did not answer the challenge; the domain may point at another machine, or a proxy in front terminates TLS"
		case acme.ProblemTypeCAA:
			return "CAA: the domain's CAA records do not allow this CA"
		case acme.ProblemTypeRejectedIdentifier, acme.ProblemTypeUnsupportedIdentifier, acme.ProblemTypeMalformed:
			return "domain: the CA will not issue for this name (GATEWAY_ACME_DOMAINS)"
		case acme.ProblemTypeInvalidContact, acme.ProblemTypeUnsupportedContact:
			return "email: the CA refuses the contact address (GATEWAY_ACME_EMAIL)"
		case acme.ProblemTypeExternalAccountRequired:
			return "account: the CA requires external account binding, which the gateway does not support"
		}
	}
	return "the CA said: " + p.Detail
}

func splitPort(addr string) (string, int, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		return "", 0, fmt.Errorf("port of %q: %w", addr, err)
	}
	return host, n, nil
}
