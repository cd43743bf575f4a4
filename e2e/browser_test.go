package e2e

import (
	"context"
	"crypto/sha256"

	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/dlgate/dlgate/internal/testenv"
)

// Browser is one headless Chromium (Debian's chromium package) driven over
// the DevTools protocol, with downloads going to Dir.
type Browser struct {
	ctx context.Context
	Dir string

	mu        sync.Mutex
	downloads map[string]string  // download GUID → suggested file name
	received  map[string]float64 // download GUID → bytes received so far
	started   chan string        // GUIDs of downloads that began
	done      chan string        // GUIDs of finished downloads
}

// MustStartBrowser starts Chromium with the flags this machine needs (no
// sandbox as root, no background networking on a closed network) and a
// fresh profile; it is stopped by tb.Cleanup.
func MustStartBrowser(tb testing.TB) *Browser {
	tb.Helper()
	bin := testenv.MustBinary(tb, "chromium", "chromium")
	b := &Browser{Dir: tb.TempDir(), downloads: map[string]string{}, received: map[string]float64{},
		started: make(chan string, 16), done: make(chan string, 16)}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.UserDataDir(tb.TempDir()),
		chromedp.WindowSize(480, 720), // a phone-sized window: the pages must read well there
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	tb.Cleanup(func() { cancel(); cancelAlloc() })
	b.ctx = ctx
	// The first Run starts the browser; it must have no timeout.
	err := chromedp.Do(ctx)
	testenv.Require(tb, "headless Chromium (Debian package chromium)", err)
	err = chromedp.ListenBrowser(ctx, func(ev any) {
		switch e := ev.(type) {
		case *browser.EventDownloadWillBegin:
			b.mu.Lock()
			b.downloads[e.GUID] = e.SuggestedFilename
			b.mu.Unlock()
			select {
			case b.started <- e.GUID:
			default:
			}
		case *browser.EventDownloadProgress:
			b.mu.Lock()
			b.received[e.GUID] = e.ReceivedBytes
			b.mu.Unlock()
			if e.State == browser.DownloadProgressStateCompleted {
				select {
				case b.done <- e.GUID:
				default:
				}
			}
		}
	})
	if err != nil {
		tb.Fatal(err)
	}
	events := true
	if _, err := chromedp.CallBrowser(ctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{
		Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: b.Dir, EventsEnabled: &events,
	}); err != nil {
		tb.Fatal(err)
	}
	return b
}

// do runs actions with a bound, so a hung browser fails the test.
func (b *Browser) do(actions ...chromedp.Action[chromedp.Void]) error {
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	return chromedp.Do(ctx, actions...)
}

// Open navigates to rawURL and returns the document's HTTP status, or 0
// when the navigation became a download: Chromium then ends it with
// net::ERR_ABORTED, which is what a click on a download link does.
func (b *Browser) Open(tb testing.TB, rawURL string) int64 {
	tb.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(rawURL))
	switch {
	case err != nil && strings.Contains(err.Error(), "net::ERR_ABORTED"):
		return 0
	case err != nil:
		tb.Fatalf("navigating to %s: %v", redact(rawURL), err)
	case resp == nil:
		tb.Fatalf("navigating to %s: no response", redact(rawURL))
	}
	return resp.Status
}

// Text returns the visible text of the first element matching the CSS
// selector sel.
func (b *Browser) Text(tb testing.TB, sel string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		tb.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

// Screenshot saves a PNG of the page to docs/screenshots/NAME when
// DLGATE_SCREENSHOTS is set (how the README's pictures are made), and
// into the test's temporary directory otherwise.
func (b *Browser) Screenshot(tb testing.TB, name string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		tb.Fatalf("screenshot %s: %v", name, err)
	}
	if len(png) < 1000 {
		tb.Fatalf("screenshot %s: only %d bytes", name, len(png))
	}
	dir := tb.TempDir()
	if os.Getenv("DLGATE_SCREENSHOTS") != "" {
		dir = filepath.Join(testenv.RepoRoot(), "docs", "screenshots")
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		tb.Fatal(err)
	}
}

// WaitDownload waits for the next finished download and returns the file
// name Chromium saved it under and its bytes.
func (b *Browser) WaitDownload(tb testing.TB) (string, []byte) {
	tb.Helper()
	select {
	case guid := <-b.done:
		b.mu.Lock()
		name := b.downloads[guid]
		b.mu.Unlock()
		data, err := os.ReadFile(filepath.Join(b.Dir, name))
		if err != nil {
			tb.Fatalf("download %s finished but: %v", name, err)
		}
		return name, data
	case <-time.After(60 * time.Second):
		tb.Fatal("no download finished within 60 s")
		return "", nil
	}
}

// WaitDownloadStart waits for the next download to begin and returns its
// GUID.
func (b *Browser) WaitDownloadStart(tb testing.TB) string {
	tb.Helper()
	select {
	case guid := <-b.started:
		return guid
	case <-time.After(60 * time.Second):
		tb.Fatal("no download began within 60 s")
		return ""
	}
}

// Received is how many bytes the download guid has received, as Chromium
// last reported.
func (b *Browser) Received(guid string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int64(b.received[guid])
}

// CancelDownload cancels a download in progress, as its Cancel button in
// the downloads bar does.
func (b *Browser) CancelDownload(tb testing.TB, guid string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	if _, err := chromedp.CallBrowser(ctx, browser.CancelDownload, browser.CancelDownloadParams{GUID: guid}); err != nil {
		tb.Fatalf("cancelling download %s: %v", guid, err)
	}
}

// Cookies are the browser's cookies for rawURL.
func (b *Browser) Cookies(tb testing.TB, rawURL string) []*network.Cookie {
	tb.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 60*time.Second)
	defer cancel()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{rawURL}})
	if err != nil {
		tb.Fatalf("reading the cookies of %s: %v", redact(rawURL), err)
	}
	return res.Cookies
}

// NoDownload checks that no download finished within d.
func (b *Browser) NoDownload(tb testing.TB, d time.Duration) {
	tb.Helper()
	select {
	case guid := <-b.done:
		tb.Fatalf("a download (%s) finished; none was expected", guid)
	case <-time.After(d):
	}
}

func TestBrowser(t *testing.T) {
	t.Parallel()
	g := MustStartEmbeddedDefault(t)
	admin := g.Admin()
	br := MustStartBrowser(t)
	obj := admin.MustUpload(t, "browser/Quarterly report.pdf", 300<<10)

	t.Run("AConfirmLinkDownloadsOnTheButtonAndIsGoneAfterwards", func(t *testing.T) {
		l := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1, Confirm: true, ExpiresIn: 3 * 24 * 3600})
		if st := br.Open(t, l.URL); st != http.StatusOK {
			t.Fatalf("landing page status %d, want 200", st)
		}
		if h1 := br.Text(t, "h1"); !strings.Contains(h1, "Quarterly report.pdf") {
			t.Fatalf("landing page heading %q does not name the file", h1)
		}
		if dl := br.Text(t, "dl"); !strings.Contains(dl, "300.0 KiB") || !strings.Contains(dl, "in 3 days") {
			t.Errorf("landing page details %q lack the size or the expiry", dl)
		}
		br.Screenshot(t, "landing.png")
		admin.checkCounts(t, l.ID, 1, 0, 0)

		if err := br.do(chromedp.Click(chromedp.CSS("button"))); err != nil {
			t.Fatalf("clicking the button: %v", err)
		}
		name, data := br.WaitDownload(t)
		if name != "Quarterly report.pdf" || sha256.Sum256(data) != obj.Sum {
			t.Fatalf("downloaded %q (%d bytes), want a byte-exact %q", name, len(data), "Quarterly report.pdf")
		}
		admin.checkCounts(t, l.ID, 0, 1, 0)

		if st := br.Open(t, l.URL); st != http.StatusNotFound { // reload
			t.Fatalf("reloaded page status %d, want 404", st)
		}
		if h1 := br.Text(t, "h1"); h1 != "This link is no longer available" {
			t.Fatalf("reloaded page heading %q", h1)
		}
		br.Screenshot(t, "unavailable.png")
	})

	t.Run("APlainLinkDownloadsAndThenShowsAnHTMLPage", func(t *testing.T) {
		l := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1})
		if st := br.Open(t, l.URL); st != 0 {
			t.Fatalf("opening a plain link showed a page (%d), want a download", st)
		}
		name, data := br.WaitDownload(t)
		if sha256.Sum256(data) != obj.Sum {
			t.Fatalf("downloaded %q: %d bytes differ from the object", name, len(data))
		}
		if st := br.Open(t, l.URL); st != http.StatusNotFound {
			t.Fatalf("second navigation status %d, want 404", st)
		}
		if body := br.Text(t, "body"); strings.Contains(body, `"type"`) || !strings.Contains(body, "This link is no longer available") {
			t.Fatalf("second navigation shows %q, want the HTML page", body)
		}
		admin.checkCounts(t, l.ID, 0, 1, 0)
	})

	t.Run("ASecondClickOnASessionLinkReusesItsSession", func(t *testing.T) {
		// One download: a second click within the session's life goes to
		// the same session (SPEC §5), where a second claim would be
		// refused.
		l := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1, Delivery: "session"})
		for click := 1; click <= 2; click++ {
			if st := br.Open(t, l.URL); st != 0 {
				t.Fatalf("click %d showed a page (%d), want a download", click, st)
			}
			name, data := br.WaitDownload(t)
			if sha256.Sum256(data) != obj.Sum {
				t.Fatalf("click %d downloaded %q: %d bytes differ from the object", click, name, len(data))
			}
		}
		admin.checkCounts(t, l.ID, 0, 1, 0)
		if n := admin.MustLink(t, l.ID).ActiveSessions; n == nil || *n != 1 {
			t.Errorf("link shows active_sessions %v after two clicks, want 1", n)
		}
	})

	t.Run("APrefetchClaimsNothing", func(t *testing.T) {
		l := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1})
		page := fmt.Sprintf(`<!DOCTYPE html><html><head><link rel="prefetch" href="%s"></head><body><p>mail</p></body></html>`, l.URL)
		site := serveHTML(t, page)
		before := previewsServed(t, g)
		if st := br.Open(t, site); st != http.StatusOK {
			t.Fatalf("the test page answered %d", st)
		}
		// Wait until Chromium has sent its prefetch: otherwise the test
		// would pass without one.
		deadline := time.Now().Add(30 * time.Second)
		for previewsServed(t, g) == before {
			if time.Now().After(deadline) {
				t.Fatal("Chromium sent no prefetch of the link within 30 s")
			}
			time.Sleep(100 * time.Millisecond)
		}
		br.NoDownload(t, 500*time.Millisecond)
		admin.checkCounts(t, l.ID, 1, 0, 0)
	})
}

// serveHTML serves page on a loopback port for the test's lifetime.
func serveHTML(tb testing.TB, page string) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Close
	tb.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/"
}

// previewsServed reads gateway_previews_total{route="link"} from g's
// metrics.
func previewsServed(tb testing.TB, g *Gateway) string {
	tb.Helper()
	r, err := fetch(http.MethodGet, "http://"+g.AdminAddr+"/metrics", nil)
	if err != nil {
		tb.Fatal(err)
	}
	for line := range strings.Lines(string(r.Body)) {
		if strings.HasPrefix(line, `gateway_previews_total{route="link"}`) {
			return strings.TrimSpace(line)
		}
	}
	return ""
}
