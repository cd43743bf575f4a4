package e2e

import (
	"crypto/sha256"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/security"
	"github.com/chromedp/chromedp"
)

// TestBrowserLoadsAConfirmLinkOverHTTP2 opens a confirm link of a gateway
// serving TLS in Chromium (issue 18): DevTools reports the landing page's
// response as h2 over TLS 1.3 with the test's certificate, and the button
// downloads the file byte-exact with one claim. (DevTools reports no
// response for a navigation that becomes a download, so the download's
// protocol is not asserted.)
//
// Chromium is told to accept certificate errors (Security.
// setIgnoreCertificateErrors, as --ignore-certificate-errors would) since
// its trust store is the system's NSS database, which a test cannot add
// a CA to without certutil; the test checks instead that the certificate
// it was shown is the one the gateway serves, issued by the test's CA.
func TestBrowserLoadsAConfirmLinkOverHTTP2(t *testing.T) {
	t.Parallel()
	certFile, keyFile := e2eCA.MustWritePair(t, t.TempDir(), 4001, false)
	g := MustStartTLSGateway(t, "browser-h2", map[string]string{"GATEWAY_TLS_CERT": certFile, "GATEWAY_TLS_KEY": keyFile})
	admin := g.HTTPSAdmin()
	br := MustStartBrowser(t)
	if _, err := chromedp.Call(br.ctx, security.SetIgnoreCertificateErrors, security.SetIgnoreCertificateErrorsParams{Ignore: true}); err != nil {
		t.Fatalf("Security.setIgnoreCertificateErrors: %v", err)
	}
	obj := admin.MustUpload(t, "browser-h2/Annual report.pdf", 2<<20)
	l := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1, Confirm: true})
	resp, err := chromedp.Run(br.ctx, chromedp.NavigateResponse(l.URL))
	if err != nil {
		t.Fatalf("navigating to the landing page: %v", err)
	}
	if resp.Status != http.StatusOK || resp.Protocol != "h2" {
		t.Fatalf("landing page: status %d over %q, want 200 over h2", resp.Status, resp.Protocol)
	}
	sd := resp.SecurityDetails
	if sd == nil || sd.Protocol != "TLS 1.3" || sd.Issuer != "dlgate e2e CA" || sd.SubjectName != "localhost" {
		t.Fatalf("landing page's TLS: %+v, want TLS 1.3 with the test's certificate (localhost, issued by dlgate e2e CA)", sd)
	}
	if got := resp.Headers["strict-transport-security"]; got != "max-age=31536000" {
		t.Errorf("landing page's Strict-Transport-Security %q, want max-age=31536000", got)
	}
	t.Logf("landing page: %d over %s, %s with %s, certificate %s from %s", resp.Status, resp.Protocol, sd.Protocol, sd.Cipher, sd.SubjectName, sd.Issuer)
	if h1 := br.Text(t, "h1"); !strings.Contains(h1, "Annual report.pdf") {
		t.Fatalf("landing page heading %q does not name the file", h1)
	}
	admin.checkCounts(t, l.ID, 1, 0, 0)

	if err := br.do(chromedp.Click(chromedp.CSS("button"))); err != nil {
		t.Fatalf("clicking the button: %v", err)
	}
	name, data := br.WaitDownload(t)
	if name != "Annual report.pdf" || sha256.Sum256(data) != obj.Sum {
		t.Fatalf("downloaded %q (%d bytes), want a byte-exact %q", name, len(data), "Annual report.pdf")
	}
	admin.checkCounts(t, l.ID, 0, 1, 0)
}
