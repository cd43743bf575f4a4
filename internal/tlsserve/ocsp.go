package tlsserve

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"golang.org/x/crypto/ocsp"
)

// errNoResponder is a certificate without an OCSP responder URL, such as
// a self-signed one or, since 2025, one from Let's Encrypt: nothing to
// staple.
var errNoResponder = errors.New("no OCSP responder in the certificate")

// maxOCSPResponse bounds what a responder may send.
const maxOCSPResponse = 1 << 20

// fetchStaple asks cert's OCSP responder (RFC 6960, the POST form of
// appendix A.1) for the leaf's status and returns the response to staple
// and when to ask again: half-way to its nextUpdate, as RFC 6960 §4.2.2.1
// leaves to the client. A response that does not verify against the
// issuer, or that says anything but "good", is an error: a revoked
// certificate's staple would only make clients refuse it sooner.
func fetchStaple(ctx context.Context, hc *http.Client, cert *tls.Certificate, now time.Time) ([]byte, time.Time, error) {
	leaf := cert.Leaf
	if leaf == nil || len(leaf.OCSPServer) == 0 {
		return nil, time.Time{}, errNoResponder
	}
	if len(cert.Certificate) < 2 {
		return nil, time.Time{}, fmt.Errorf("OCSP: the certificate file has no issuer certificate after the leaf, needed to ask %s", leaf.OCSPServer[0])
	}
	issuer, err := x509.ParseCertificate(cert.Certificate[1])
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("OCSP: issuer certificate: %w", err)
	}
	body, err := ocsp.CreateRequest(leaf, issuer, nil)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("OCSP: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, leaf.OCSPServer[0], bytes.NewReader(body))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("OCSP: responder URL: %w", err)
	}
	req.Header.Set("Content-Type", "application/ocsp-request")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("OCSP: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, time.Time{}, fmt.Errorf("OCSP: responder %s answered %s", leaf.OCSPServer[0], resp.Status)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxOCSPResponse))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("OCSP: reading the response: %w", err)
	}
	parsed, err := ocsp.ParseResponseForCert(raw, leaf, issuer)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("OCSP: response from %s: %w", leaf.OCSPServer[0], err)
	}
	switch parsed.Status {
	case ocsp.Good:
	case ocsp.Revoked:
		return nil, time.Time{}, fmt.Errorf("OCSP: %s says the certificate was revoked at %s", leaf.OCSPServer[0], parsed.RevokedAt.UTC().Format(time.RFC3339))
	default:
		return nil, time.Time{}, fmt.Errorf("OCSP: %s does not know the certificate", leaf.OCSPServer[0])
	}
	if !parsed.NextUpdate.IsZero() && now.After(parsed.NextUpdate) {
		return nil, time.Time{}, fmt.Errorf("OCSP: stale response from %s (next update %s)", leaf.OCSPServer[0], parsed.NextUpdate.UTC().Format(time.RFC3339))
	}
	next := now.Add(time.Hour)
	if !parsed.NextUpdate.IsZero() {
		next = parsed.ThisUpdate.Add(parsed.NextUpdate.Sub(parsed.ThisUpdate) / 2)
	}
	if soonest := now.Add(time.Minute); next.Before(soonest) {
		next = soonest
	}
	return raw, next, nil
}
