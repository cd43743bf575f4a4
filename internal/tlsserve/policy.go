package tlsserve

import (
	"crypto/tls"
	"net/http"
	"time"
)

// intermediateSuites are the TLS 1.2 suites of Mozilla's "intermediate"
// server configuration (version 5.7) that Go implements: forward-secret
// ECDHE with AEAD ciphers only; no CBC, no RSA key exchange, no DHE (Go
// has none). TLS 1.3's suites are not configurable in Go and are all
// AEAD.
var intermediateSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// serverConfig is the policy both listeners share: TLS 1.2 and 1.3 only,
// the intermediate suites, and Go's default key exchanges (X25519MLKEM768,
// X25519, P-256, P-384: the intermediate curves and a post-quantum hybrid
// before them). ALPN offers h2 before http/1.1; net/http's ServeTLS adds
// them to NextProtos, and extra (acme-tls/1) go first here.
func serverConfig(get func(*tls.ClientHelloInfo) (*tls.Certificate, error), extra ...string) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		CipherSuites:   intermediateSuites,
		GetCertificate: get,
		NextProtos:     append(append([]string(nil), extra...), "h2", "http/1.1"),
	}
}

// HTTP/2 limits, chosen to keep what the HTTP/1.1 listener promises a
// hostile client (gateway/limits.go, cmd/gateway/serve.go): a connection
// costs a bounded number of streams and header bytes, and one that stops
// reading or goes silent is closed.
const (
	// MaxStreams is how many requests one HTTP/2 connection may have in
	// flight (net/http's default is 250). A session's concurrency cap is
	// counted per request, so streams never widen it.
	MaxStreams = 100
	// writeByteTimeout closes a connection on which nothing could be
	// written for this long: the HTTP/1.1 handlers' per-write deadline
	// (gateway.Options.WriteTimeout) for the whole connection.
	writeByteTimeout = 2 * time.Minute
	// pingAfter and pingTimeout find a peer that vanished without a FIN
	// while streams were open (no IdleTimeout runs then).
	pingAfter   = time.Minute
	pingTimeout = 15 * time.Second
)

// HTTP2Config is the public and admin servers' HTTP/2 configuration over
// TLS. Header size is the server's MaxHeaderBytes, idle connections its
// IdleTimeout, and the TLS handshake is bounded by its ReadHeaderTimeout,
// on both protocols.
func HTTP2Config() *http.HTTP2Config {
	return &http.HTTP2Config{
		MaxConcurrentStreams: MaxStreams,
		WriteByteTimeout:     writeByteTimeout,
		SendPingTimeout:      pingAfter,
		PingTimeout:          pingTimeout,
	}
}

// HSTS is the Strict-Transport-Security value of every public response
// when the public listener serves TLS: a year, this host only (no
// includeSubDomains: the operator's other names are not ours to pin),
// and no preload.
const HSTS = "max-age=31536000"
