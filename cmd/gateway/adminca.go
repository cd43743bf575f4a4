package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
)

// adminScheme is the scheme of the admin URL the links commands assume
// when none is given: https when the environment configures TLS for the
// admin listener as `gateway serve` reads it (its own pair, else the
// public pair, else ACME).
func adminScheme(env func(string) string) string {
	if env("GATEWAY_ADMIN_TLS_CERT") != "" || env("GATEWAY_TLS_CERT") != "" || env("GATEWAY_ACME_DOMAINS") != "" {
		return "https://"
	}
	return "http://"
}

// adminHTTPClient is the links commands' HTTP client: nil (the default
// client, trusting the system roots, which SSL_CERT_FILE and SSL_CERT_DIR
// replace as everywhere in Go and OpenSSL) unless a CA file is named by
// --admin-ca or GATEWAY_ADMIN_CA, whose certificates are then trusted on
// top of the system's.
func adminHTTPClient(caFile string, env func(string) string) (*http.Client, error) {
	if caFile == "" {
		caFile = env("GATEWAY_ADMIN_CA")
	}
	if caFile == "" {
		return nil, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("--admin-ca: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, errors.New("--admin-ca: " + caFile + " holds no PEM certificate")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}
