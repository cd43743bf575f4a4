package e2e

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testResumingALinkFailsLoudly: a download of a link URL cut half-way
// cannot be "resumed" on the link URL: curl -C - and wget -c get the 409,
// exit non-zero and leave the partial file exactly as it was (with a 416
// both reported success and kept a truncated file). Nothing is claimed.
func testResumingALinkFailsLoudly(t *testing.T, c *Cluster, obj *Object) {
	curl, wget := MustBinary(t, "curl"), MustBinary(t, "wget")
	admin := c.Admin()
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 2})
	slow := MustStartBalancer(t, 2<<20, c.Balancer.Backends()...)
	dir := t.TempDir()
	file := filepath.Join(dir, "partial.bin")
	size := int64(len(obj.Data))
	bg := MustStart(t, dir, curl, "-q", "-sS", "-o", file, slow.On(link.URL))
	deadline := time.Now().Add(time.Minute)
	for fileSize(file) < size/2 {
		if bg.Exited() {
			out, err := bg.Wait()
			t.Fatalf("curl ended (%v) before it had half the file: %s", err, out)
		}
		if time.Now().After(deadline) {
			t.Fatalf("curl had only %d of %d bytes after a minute at 2 MiB/s", fileSize(file), size)
		}
		time.Sleep(20 * time.Millisecond)
	}
	bg.Kill()
	partial, err := os.ReadFile(file)
	if err != nil || int64(len(partial)) >= size || !bytes.Equal(partial, obj.Data[:len(partial)]) {
		t.Fatalf("the interrupted download left %d bytes (%v), want a true prefix of %d", len(partial), err, size)
	}
	admin.checkCounts(t, link.ID, 1, 1, 0)

	for _, tc := range []struct {
		name string
		bin  string
		args []string
	}{
		{"curl -C -", curl, []string{"-q", "-sS", "-C", "-", "-o", file, link.URL}},
		{"wget -c", wget, []string{"--no-config", "-q", "-c", "-O", file, link.URL}},
	} {
		out, err := run(t, dir, tc.bin, tc.args...)
		if exitCode(err) == 0 {
			t.Errorf("%s on the link URL exited 0: it would take the truncated file for complete; output %q", tc.name, out)
		}
		now, rerr := os.ReadFile(file)
		if rerr != nil || !bytes.Equal(now, partial) {
			t.Errorf("%s changed the partial file: %d bytes before, %d after (%v)", tc.name, len(partial), len(now), rerr)
		}
		t.Logf("%s on a link URL: exit code %d, partial file of %d bytes untouched", tc.name, exitCode(err), len(partial))
	}
	admin.checkCounts(t, link.ID, 1, 1, 0)
}

// testAria2cOnAStreamLink: aria2c -x8 -s8 pointed at a stream link gets
// 409 on its ranged connections and still completes on the one unranged
// connection: a byte-exact file for exactly one claim.
func testAria2cOnAStreamLink(t *testing.T, c *Cluster, obj *Object) {
	aria2c := MustBinary(t, "aria2c")
	admin := c.Admin()
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 3})
	dir := t.TempDir()
	MustRun(t, dir, aria2c, "--no-conf", "-q", "-x8", "-s8", "--min-split-size=1M", "--allow-overwrite=true",
		"--auto-file-renaming=false", "-d", dir, "-o", "a.bin", link.URL)
	checkFile(t, filepath.Join(dir, "a.bin"), obj)
	admin.checkCounts(t, link.ID, 2, 1, 0)
}

// testNamedURLsSaveUnderTheRealName: plain `wget URL` and `aria2c URL`
// of the named URL save the file under its name, ASCII or UTF-8.
func testNamedURLsSaveUnderTheRealName(t *testing.T, c *Cluster, obj *Object) {
	wget, aria2c := MustBinary(t, "wget"), MustBinary(t, "aria2c")
	admin := c.Admin()
	for _, name := range []string{"quarterly-report.pdf", "Résumé 2026 – 東京.pdf"} {
		link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 2, Filename: name})
		if !strings.HasPrefix(link.NamedURL, link.URL+"/") {
			t.Fatalf("named_url %q is not under url %q", link.NamedURL, link.URL)
		}
		for _, tc := range []struct {
			bin  string
			args []string
		}{
			{wget, []string{"--no-config", "-q", link.NamedURL}},
			{aria2c, []string{"--no-conf", "-q", link.NamedURL}},
		} {
			into := t.TempDir()
			MustRun(t, into, tc.bin, tc.args...)
			names := savedFiles(t, into)
			if len(names) != 1 || names[0] != name {
				t.Errorf("%s %s saved %q, want exactly %q", filepath.Base(tc.bin), redact(link.NamedURL), names, name)
				continue
			}
			checkFile(t, filepath.Join(into, name), obj)
		}
		admin.checkCounts(t, link.ID, 0, 2, 0)
	}
}

// previewAgents are real user agents of link previewers (see
// preview/agents.txt for their sources).
var previewAgents = []string{
	"Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)",
	"facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)",
	"Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)",
	"TelegramBot (like TwitterBot)",
	"WhatsApp/2.23.20.0",
	"Mozilla/5.0 (Windows NT 6.1; WOW64) SkypeUriPreview Preview/0.5 skype-url-preview@microsoft.com",
	"Mozilla/4.0 (compatible; ms-office; MSOffice 16)",
}

// testPreviewersClaimNothing: every previewer gets the HTML preview on
// every process and the one-download link is still there for the person;
// curl then downloads it.
func testPreviewersClaimNothing(t *testing.T, c *Cluster, obj *Object) {
	curl := MustBinary(t, "curl")
	admin := c.Admin()
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1, Filename: "minutes.pdf"})
	for i, ua := range previewAgents {
		g := c.Gateways[i%len(c.Gateways)]
		r := MustFetch(t, http.MethodGet, g.On(link.URL), "User-Agent", ua)
		if r.Status != http.StatusOK || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") ||
			!strings.Contains(string(r.Body), `og:title" content="minutes.pdf"`) {
			t.Errorf("%q: %v %q, want the HTML preview; body %.300q", ua, r, r.Header.Get("Content-Type"), r.Body)
		}
		checkPublicHeaders(t, r)
	}
	r := MustFetch(t, http.MethodGet, c.Gateways[0].On(link.URL), "Sec-Purpose", "prefetch;prerender")
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") {
		t.Errorf("prefetch: %v, want the preview", r)
	}
	admin.checkCounts(t, link.ID, 1, 0, 0)
	dir := t.TempDir()
	MustRun(t, dir, curl, "-q", "-fsS", "-o", "f.bin", link.URL)
	checkFile(t, filepath.Join(dir, "f.bin"), obj)
	admin.checkCounts(t, link.ID, 0, 1, 0)
}

// testConfirmLinkPostsRace: 20 simultaneous POSTs on a one-download
// confirm link, spread over every process, get exactly one file.
func testConfirmLinkPostsRace(t *testing.T, c *Cluster, obj *Object) {
	admin := c.Admin()
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1, Confirm: true})
	r := MustFetch(t, http.MethodGet, c.Gateways[1].On(link.URL))
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), "<form method=\"post\">") {
		t.Fatalf("GET of a confirm link: %v, want the landing page; body %.300q", r, r.Body)
	}
	addrs := make([]string, len(c.Gateways))
	for i, g := range c.Gateways {
		addrs[i] = g.PublicAddr
	}
	path := "/d/" + link.Token
	replies := MustStampede(t, addrs, 20, http.MethodPost, path, func(addr string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 0\r\nConnection: close\r\n"
	})
	full, refused := 0, 0
	for _, r := range replies {
		switch r.Status {
		case http.StatusOK:
			checkBody(t, r, obj)
			full++
		case http.StatusNotFound:
			refused++
		default:
			t.Errorf("%v, want 200 or 404", r)
		}
	}
	if full != 1 || refused != 19 {
		t.Errorf("20 simultaneous POSTs: %d × 200, %d × 404; want 1 and 19", full, refused)
	}
	admin.checkCounts(t, link.ID, 0, 1, 0)
}
