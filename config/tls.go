package config

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// validateTLS checks the HTTPS settings (SPEC §10). Files are only named
// here; the gateway reads them when it starts, and says then what is
// wrong with their contents.
func (c *Config) validateTLS(bad func(name, format string, args ...any) error) error {
	for _, p := range []struct{ cert, key, certVal, keyVal string }{
		{"TLS_CERT", "TLS_KEY", c.TLSCert, c.TLSKey},
		{"ADMIN_TLS_CERT", "ADMIN_TLS_KEY", c.AdminTLSCert, c.AdminTLSKey},
	} {
		switch {
		case p.certVal != "" && p.keyVal == "":
			return bad(p.key, "required with %s%s", EnvPrefix, p.cert)
		case p.certVal == "" && p.keyVal != "":
			return bad(p.cert, "required with %s%s", EnvPrefix, p.key)
		}
	}
	for i, d := range c.ACMEDomainList() {
		if err := checkDomain(d); err != nil {
			return bad("ACME_DOMAINS", "entry %d: %v", i+1, err)
		}
	}
	if c.ACMEDomains != "" && len(c.ACMEDomainList()) == 0 {
		return bad("ACME_DOMAINS", "no domain in %q", c.ACMEDomains)
	}
	if c.ACMEEmail != "" && !strings.Contains(c.ACMEEmail, "@") {
		return bad("ACME_EMAIL", "must be an email address, got %q", c.ACMEEmail)
	}
	if u, err := url.Parse(c.ACMEDirectory); err != nil || u.Scheme != "https" || u.Host == "" {
		// RFC 8555 §6.1: ACME runs over HTTPS only.
		return bad("ACME_DIRECTORY", "must be an https URL, got %q", c.ACMEDirectory)
	}
	if c.RedirectListen != "" {
		if err := checkListen(c.RedirectListen); err != nil {
			return bad("REDIRECT_LISTEN", "%v", err)
		}
		if !c.TLS() {
			return bad("REDIRECT_LISTEN", "needs HTTPS on the public listener (GATEWAY_TLS_CERT or GATEWAY_ACME_DOMAINS)")
		}
		if !strings.HasPrefix(c.PublicURL, "https://") {
			return bad("REDIRECT_LISTEN", "would redirect to GATEWAY_PUBLIC_URL %q, which is not https", c.PublicURL)
		}
		if _, port, _ := net.SplitHostPort(c.RedirectListen); port != "0" && (c.RedirectListen == c.Listen || c.RedirectListen == c.AdminListen) {
			return bad("REDIRECT_LISTEN", "must differ from GATEWAY_LISTEN and GATEWAY_ADMIN_LISTEN, got %q", c.RedirectListen)
		}
	}
	return nil
}

// checkDomain accepts a host name a CA can validate over HTTP-01 or
// TLS-ALPN-01: no wildcard (those need DNS-01), no IP address, no port.
func checkDomain(d string) error {
	switch {
	case strings.Contains(d, "*"):
		return fmt.Errorf("%q: wildcard names need the DNS-01 challenge, which the gateway does not do", d)
	case net.ParseIP(d) != nil:
		return fmt.Errorf("%q: an IP address, not a domain name", d)
	case strings.ContainsAny(d, ":/ ") || !strings.Contains(d, "."):
		return fmt.Errorf("%q is not a fully qualified domain name", d)
	}
	return nil
}
