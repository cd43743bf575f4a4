package testenv

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3Option configures StartS3.
type S3Option func(*S3)

// s3TLS is the certificate a versitygw serves https with.
type s3TLS struct {
	certFile, keyFile string
	roots             *x509.CertPool
}

// WithTLS makes the server speak https only, with the PEM pair certFile
// and keyFile (a certificate for 127.0.0.1, made by the test), so that
// Endpoint is "https://127.0.0.1:PORT". Client and the readiness check
// trust roots, which must hold the certificate's issuer; anything else,
// a gateway included, must be told about it (GATEWAY_S3_CA).
func WithTLS(certFile, keyFile string, roots *x509.CertPool) S3Option {
	return func(s *S3) { s.tls = &s3TLS{certFile: certFile, keyFile: keyFile, roots: roots} }
}

func (s *S3) scheme() string {
	if s.tls != nil {
		return "https://"
	}
	return "http://"
}

// tlsArgs are versitygw's flags for s.tls, global flags that go before
// the backend's name.
func (s *S3) tlsArgs() []string {
	if s.tls == nil {
		return nil
	}
	return []string{"--cert", s.tls.certFile, "--key", s.tls.keyFile}
}

// transport trusts s.tls's roots; nil (the default transport) for plain
// HTTP.
func (s *S3) transport() http.RoundTripper {
	if s.tls == nil {
		return nil
	}
	return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: s.tls.roots}}
}

// useTLS gives Client's SDK options a transport trusting s.tls's roots.
func (s *S3) useTLS(o *s3.Options) {
	if t := s.transport(); t != nil {
		o.HTTPClient = &http.Client{Transport: t}
	}
}
