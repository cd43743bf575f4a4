package e2e

import (
	"bufio"
	"cmp"
	"crypto/sha256"
	"fmt"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"

	"github.com/dlgate/dlgate/config"
	"github.com/dlgate/dlgate/internal/testenv"
)

// Delivery evidence end to end (SPEC §1, issue 23): what each grant's
// client acknowledged, read by real clients from real servers.

// grantDelivery is a grant's delivery as GET /v1/links/{id}/grants shows
// it.
type grantDelivery struct {
	Status        string  `json:"status"`
	BytesAcked    int64   `json:"bytes_acked"`
	Coverage      float64 `json:"coverage"`
	Attempts      int     `json:"attempts"`
	DeliveredAt   *string `json:"delivered_at"`
	InterruptedAt *string `json:"interrupted_at"`
	Measured      bool    `json:"measured"`
}

// deliveredGrant is a grant with its delivery.
type deliveredGrant struct {
	ID        string        `json:"id"`
	Kind      string        `json:"kind"`
	Status    string        `json:"status"`
	SessionID *string       `json:"session_id"`
	Client    string        `json:"client"`
	Delivery  grantDelivery `json:"delivery"`
}

// mustDeliveries lists a link's grants with their deliveries, newest
// first; query is "" or "?delivery=…".
func mustDeliveries(tb testing.TB, a *Admin, linkID, query string) []deliveredGrant {
	tb.Helper()
	var page struct {
		Grants []deliveredGrant `json:"grants"`
	}
	a.call(tb, http.MethodGet, "/v1/links/"+linkID+"/grants"+query, nil, http.StatusOK, &page)
	return page.Grants
}

// waitGrant polls the link's one grant until cond holds, at most limit,
// and returns it: a stream's record lands when its response ends, which
// may be after the client exited, and a session's when its process
// reports (about a second after its last request).
func waitGrant(tb testing.TB, a *Admin, linkID string, limit time.Duration, what string, cond func(grantDelivery) bool) deliveredGrant {
	tb.Helper()
	var g deliveredGrant
	waitFor(tb, limit, what, func() bool {
		gs := mustDeliveries(tb, a, linkID, "")
		if len(gs) != 1 {
			return false
		}
		g = gs[0]
		return cond(g.Delivery)
	})
	return g
}

// hooksOf are the verified deliveries of one event type about a grant.
func hooksOf(rv *receiver, linkID, grantID, typ string) []hookRequest {
	var out []hookRequest
	for _, h := range rv.Delivered(linkID) {
		if h.Event.Type == typ && h.Event.str("grant_id") == grantID {
			out = append(out, h)
		}
	}
	return out
}

// num is a number of an event's data, NaN when it has none.
func (e hookEvent) float(key string) float64 {
	n, ok := e.Data[key].(float64)
	if !ok {
		return math.NaN()
	}
	return n
}

// accessLines are the access lines of route in g's text log that carry a
// delivery.
func accessLines(tb testing.TB, g *Gateway, route string) []string {
	tb.Helper()
	f, err := os.Open(g.StderrPath)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.Contains(line, "msg=http ") && fieldOf(line, "route") == route && strings.Contains(line, " delivery=") {
			out = append(out, line)
		}
	}
	return out
}

// TestAWholeStreamDownloadIsCompleteAndAnnouncedOnce: curl fetches a
// stream link whole. Its grant says complete, every byte acknowledged and
// measured, one attempt; exactly one grant.delivered reaches the
// receiver, signed as Standard Webhooks says; the access line says
// delivery=complete with the bytes.
func TestAWholeStreamDownloadIsCompleteAndAnnouncedOnce(t *testing.T) {
	t.Parallel()
	curl := MustBinary(t, "curl")
	rv := mustStartReceiver(t)
	c := MustStartCluster(t, ClusterOptions{Processes: 1, Env: map[string]string{
		"GATEWAY_WEBHOOK_URL": rv.srv.URL + "/hooks", "GATEWAY_WEBHOOK_SECRET": rv.secret,
	}})
	g, admin := c.Gateways[0], c.Admin()
	obj := admin.MustUpload(t, "delivery/whole.bin", 8<<20)
	size := int64(len(obj.Data))
	l := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1})
	dir := t.TempDir()
	MustRun(t, dir, curl, "-q", "-fsS", "-o", "whole.bin", g.On(l.URL))
	checkFile(t, filepath.Join(dir, "whole.bin"), obj)

	gr := waitGrant(t, admin, l.ID, 10*time.Second, "the grant never became complete", func(d grantDelivery) bool { return d.Status != "none" })
	if d := gr.Delivery; d.Status != "complete" || d.BytesAcked != size || d.Coverage != 1 || !d.Measured || d.Attempts != 1 ||
		d.DeliveredAt == nil || d.InterruptedAt != nil {
		t.Errorf("delivery %+v, want complete: %d bytes acknowledged, measured, one attempt", d, size)
	}
	waitFor(t, 30*time.Second, "no grant.delivered reached the receiver", func() bool {
		return len(hooksOf(rv, l.ID, gr.ID, "grant.delivered")) > 0
	})
	time.Sleep(2 * time.Second) // time for a duplicate, should one come
	evs := hooksOf(rv, l.ID, gr.ID, "grant.delivered")
	if len(evs) != 1 {
		t.Fatalf("%d grant.delivered events for one whole download, want exactly 1", len(evs))
	}
	ev := evs[0]
	if !ev.Verified {
		t.Errorf("grant.delivered's webhook-signature %q does not verify", ev.Signature)
	}
	if ev.Event.float("bytes_acked") != float64(size) || ev.Event.float("size") != float64(size) || ev.Event.float("coverage") != 1 ||
		ev.Event.Data["measured"] != true || ev.Event.num("attempts") != 1 || ev.Event.str("kind") != "stream" {
		t.Errorf("grant.delivered data %v, want size and bytes_acked %d, coverage 1, measured, 1 attempt, kind stream", ev.Event.Data, size)
	}
	if n := len(hooksOf(rv, l.ID, gr.ID, "grant.interrupted")); n != 0 {
		t.Errorf("%d grant.interrupted events for a whole download, want none", n)
	}
	checkHookRequests(t, rv.Requests(), l.Token)
	lines := accessLines(t, g, "link")
	if len(lines) != 1 || !strings.Contains(lines[0], " delivery=complete bytes_acked="+strconv.FormatInt(size, 10)) ||
		strings.Contains(lines[0], "measured=false") {
		t.Errorf("access lines with a delivery: %q, want one saying delivery=complete bytes_acked=%d", lines, size)
	}
	t.Logf("curl whole: delivery %+v; one grant.delivered %s", gr.Delivery, ev.Body)
}

// sockets is what ss says of the TCP sockets between a client and the
// gateway's public port: the client's unread bytes and receive buffer,
// the gateway's unacknowledged ones.
type sockets struct {
	clientRecvQ, clientRcvBuf, gatewaySendQ int64
}

// readSockets asks ss (iproute2) about the one connection to port.
func readSockets(tb testing.TB, port string) sockets {
	tb.Helper()
	var s sockets
	ss := testenv.MustBinary(tb, "ss", "iproute2")
	client, err := ssOut(ss, "dst", port)
	if err != nil {
		tb.Fatalf("ss: %v", err)
	}
	if f := strings.Fields(client); len(f) >= 2 {
		s.clientRecvQ, _ = strconv.ParseInt(f[0], 10, 64)
		s.clientRcvBuf = skmem(client, "rb")
	}
	server, err := ssOut(ss, "src", port)
	if err != nil {
		tb.Fatalf("ss: %v", err)
	}
	if f := strings.Fields(server); len(f) >= 2 {
		s.gatewaySendQ, _ = strconv.ParseInt(f[1], 10, 64)
	}
	return s
}

// ssOut is what ss says of the established TCP sockets whose end (dst or
// src) is 127.0.0.1:port, with their memory (-m).
func ssOut(ss, end, port string) (string, error) {
	out, err := exec.Command(ss, "-tmnH", "state", "established", end, "127.0.0.1:"+port).Output()
	return string(out), err
}

// skmem reads one field of ss -m's skmem:(r…,rb…,…) out of text.
func skmem(text, field string) int64 {
	i := strings.Index(text, "skmem:(")
	if i < 0 {
		return 0
	}
	inner, _, _ := strings.Cut(text[i+len("skmem:("):], ")")
	for _, kv := range strings.Split(inner, ",") {
		if v, ok := strings.CutPrefix(kv, field); ok {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				return n
			}
		}
	}
	return 0
}

// TestASessionLeftAtSixtyPercentAndExpiredIsInterruptedOnce: curl fetches
// the first 60 % of a session's object in one range, and the session is
// left to expire. Its process reports the range within its warm second;
// the sweeper ends the expired session and writes one grant.interrupted
// with the coverage, 0.6.
func TestASessionLeftAtSixtyPercentAndExpiredIsInterruptedOnce(t *testing.T) {
	t.Parallel()
	curl := MustBinary(t, "curl")
	rv := mustStartReceiver(t)
	c := MustStartCluster(t, ClusterOptions{Processes: 1, Env: map[string]string{
		"GATEWAY_WEBHOOK_URL": rv.srv.URL + "/hooks", "GATEWAY_WEBHOOK_SECRET": rv.secret,
		"GATEWAY_SWEEP_INTERVAL": "500ms",
	}})
	g, admin := c.Gateways[0], c.Admin()
	obj := admin.MustUpload(t, "delivery/sixty.bin", 10<<20)
	size := int64(len(obj.Data))
	l := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1, Delivery: "session", Session: &SessionSettings{TTL: 5}})
	s := MustMintSession(t, g.PublicBase(), l)
	part := size * 6 / 10
	dir := t.TempDir()
	MustRun(t, dir, curl, "-q", "-fsS", "-r", fmt.Sprintf("0-%d", part-1), "-o", "sixty.part", g.On(s.SessionURL))
	if fi, err := os.Stat(filepath.Join(dir, "sixty.part")); err != nil || fi.Size() != part {
		t.Fatalf("curl saved %v (%v), want the %d bytes of the range", fi, err, part)
	}
	gr := waitGrant(t, admin, l.ID, 20*time.Second, "the session's grant was never interrupted", func(d grantDelivery) bool { return d.InterruptedAt != nil })
	if d := gr.Delivery; d.Status != "partial" || d.BytesAcked != part || math.Abs(d.Coverage-0.6) > 1e-6 || !d.Measured || d.DeliveredAt != nil {
		t.Errorf("delivery %+v, want partial, %d bytes (coverage 0.6), measured", d, part)
	}
	waitFor(t, 30*time.Second, "no grant.interrupted reached the receiver", func() bool {
		return len(hooksOf(rv, l.ID, gr.ID, "grant.interrupted")) > 0
	})
	time.Sleep(2 * time.Second) // more sweeps: none may announce it again
	evs := hooksOf(rv, l.ID, gr.ID, "grant.interrupted")
	if len(evs) != 1 {
		t.Fatalf("%d grant.interrupted events for one expired session, want exactly 1", len(evs))
	}
	ev := evs[0].Event
	if !evs[0].Verified || ev.str("reason") != "expired" || math.Abs(ev.float("coverage")-0.6) > 1e-6 ||
		ev.float("bytes_acked") != float64(part) || ev.str("session_id") != s.SessionID {
		t.Errorf("grant.interrupted %v (verified %v), want reason expired, coverage 0.6, bytes_acked %d, the session's id", ev.Data, evs[0].Verified, part)
	}
	if n := len(hooksOf(rv, l.ID, gr.ID, "grant.delivered")); n != 0 {
		t.Errorf("%d grant.delivered for a session left at 60 %%, want none", n)
	}
	t.Logf("a session expired at 60 %%: %s", evs[0].Body)
}

// TestTheThirdQuickWholeGetOfASpentSessionClaimsANewOne is issue 23's
// point 5 with its race window forced. A 2-download session link whose
// budget is 2 × the size; curl with a cookie jar and -L fetches the file
// whole twice, through one session (affinity), which then has drawn its
// whole budget. What the race needed is then forced, not waited for: the
// session's slot is held in the database, as its process holds it in its
// idle window after a response. The third fetch must not be sent to that
// spent session (which would answer 403 byte-budget-exhausted): a GET
// without Range goes to a session only when its budget covers the whole
// object, so it claims the link's second download and gets 200. The file
// is 17 MiB, two 8 MiB draws and a 1 MiB tail: a whole response draws no
// further than its end, so the second fetch, however quick, finds the
// object's size undrawn and goes to the same session (a tail drawn ahead
// to 8 MiB and held warm for a second made it claim anew).
func TestTheThirdQuickWholeGetOfASpentSessionClaimsANewOne(t *testing.T) {
	t.Parallel()
	curl := MustBinary(t, "curl")
	c := MustStartCluster(t, ClusterOptions{Processes: 1})
	g, admin := c.Gateways[0], c.Admin()
	db := MustLedgerDB(t, c)
	obj := admin.MustUpload(t, "delivery/affinity.bin", 17<<20)
	size := int64(len(obj.Data))
	l := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 2, Delivery: "session", Session: &SessionSettings{ByteBudget: 2 * size}})
	dir := t.TempDir()
	jar := filepath.Join(dir, "cookies.txt")
	fetchWhole := func(n int) string {
		t.Helper()
		file := fmt.Sprintf("take%d.bin", n)
		out, err := run(t, dir, curl, "-q", "-sS", "-L", "-b", jar, "-c", jar, "-o", file, "-w", "%{http_code}", g.On(l.URL))
		if err != nil {
			t.Fatalf("curl fetch %d: %v: %s", n, err, out)
		}
		if strings.TrimSpace(out) == "200" {
			checkFile(t, filepath.Join(dir, file), obj)
		}
		return strings.TrimSpace(out)
	}
	var statuses []string
	for n := 1; n <= 2; n++ {
		statuses = append(statuses, fetchWhole(n))
	}
	ids := linkSessions(t, db, l.ID)
	if len(ids) != 1 {
		t.Fatalf("after two fetches the link has sessions %v, want one (affinity)", ids)
	}
	spent := ids[0]
	waitFor(t, 10*time.Second, "the first session's budget was never wholly drawn", func() bool { return bytesDrawn(t, db, spent) == 2*size })
	// The race window, forced: the spent session's slot is held, as its
	// process holds it for SlotIdle after a response.
	res, err := db.Exec(`UPDATE session_slots SET holder = 'e2e-idle-window', lease_until = UTC_TIMESTAMP(6) + INTERVAL 1 MINUTE
WHERE session_id = ? ORDER BY slot LIMIT 1`, spent)
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("holding a slot of the spent session: %v (%d rows)", err, n)
	}
	statuses = append(statuses, fetchWhole(3))
	if strings.Join(statuses, " ") != "200 200 200" {
		t.Errorf("three quick whole fetches by one client answered %v, want 200 200 200", statuses)
	}
	ids = linkSessions(t, db, l.ID)
	if len(ids) != 2 || ids[0] != spent && ids[1] != spent {
		t.Errorf("the link has sessions %v, want the spent one and a new one", ids)
	}
	admin.checkCounts(t, l.ID, 0, 2, 0)
	t.Logf("200 200 200 with the spent session's slot held (bytes_drawn %d of %d): the third fetch claimed session %v", bytesDrawn(t, db, spent), 2*size, ids)
}

// sessionTool is a download manager that splits a session's file over
// several connections and resumes it from its own state file.
type sessionTool struct {
	name, bin string
	args      func(url, file string, resume bool) []string
	stop      syscall.Signal
}

// TestSplitDownloadsCutAndResumedAcrossTwoProcessesReachFullCoverage:
// aria2c -x4 and lftp pget -n 4 fetch a session's file through the test
// balancer, which spreads their connections over two gateway processes;
// each is cut half-way (the signal its users send) and resumed by its own
// mechanism. Each process gathers what its responses' clients
// acknowledged and reports it; the session's grant is partial after the
// cut, and complete with coverage 1 after the resume. The balancer reads
// from the gateways as a proxy does, so what counts as acknowledged is
// what it took (docs/design.md, "What 'acknowledged' proves").
func TestSplitDownloadsCutAndResumedAcrossTwoProcessesReachFullCoverage(t *testing.T) {
	t.Parallel()
	tools := []sessionTool{
		{name: "aria2c -x4", bin: MustBinary(t, "aria2c"), stop: syscall.SIGINT, args: func(url, file string, resume bool) []string {
			a := []string{"--no-conf", "-x4", "-s4", "-k1M", "--summary-interval=0", "--console-log-level=warn",
				"--file-allocation=none", "-d", filepath.Dir(file), "-o", filepath.Base(file)}
			if resume {
				a = append(a, "-c")
			}
			return append(a, url)
		}},
		// lftp saves its chunk positions every pget:save-status (10 s by
		// default), not when stopped: 1 s keeps the resume's loss small.
		{name: "lftp pget -n 4", bin: MustBinary(t, "lftp"), stop: syscall.SIGTERM, args: func(url, file string, resume bool) []string {
			c := ""
			if resume {
				c = "-c "
			}
			return []string{"--norc", "-c", fmt.Sprintf("set pget:save-status 1s; set net:max-retries 5; set net:reconnect-interval-base 1; pget %s-n 4 '%s' -o '%s'", c, url, file)}
		}},
	}
	c := MustStartCluster(t, ClusterOptions{Processes: 2, Env: map[string]string{"GATEWAY_LOG_FORMAT": "json"}})
	admin := c.Admin()
	obj := admin.MustUpload(t, "delivery/split.bin", 32<<20)
	size := int64(len(obj.Data))
	var report []string
	for _, tool := range tools {
		t.Run(strings.Fields(tool.name)[0], func(t *testing.T) {
			// A budget of 4 × the size: this test is about coverage; what the
			// default budget allows each tool is e2e/budget_report_test.go's.
			l := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1, Delivery: "session", Session: &SessionSettings{ByteBudget: 4 * size}})
			s := MustMintSession(t, c.PublicURL, l)
			dir := t.TempDir()
			file := filepath.Join(dir, "split.bin")
			c.Balancer.SetRate(2 << 20)
			bg := MustStart(t, dir, tool.bin, tool.args(c.Balancer.On(s.NamedSessionURL), file, false)...)
			saved := func() int64 { return savedOf(file, obj.Data) }
			cutHalfWay(t, bg, tool.name, saved, size/2, tool.stop, 15*time.Second, func() { c.Balancer.SetRate(0) })
			c.Balancer.SetRate(0)
			cut := saved()
			// Each process reports what it gathered once the session has
			// been idle there for its warm second.
			time.Sleep(config.DefaultWarmIdle + 1500*time.Millisecond)
			after := mustDeliveries(t, admin, l.ID, "")[0].Delivery
			if after.Status != "partial" || after.Coverage >= 1 || after.BytesAcked < cut {
				t.Errorf("after the cut with %d bytes saved: delivery %+v, want partial with at least what the tool saved acknowledged", cut, after)
			}
			out, err := run(t, dir, tool.bin, tool.args(c.Balancer.On(s.NamedSessionURL), file, true)...)
			if err != nil {
				t.Fatalf("%s resumed: %v\n%s", tool.name, err, lastLines(out, 15))
			}
			checkFile(t, file, obj)
			gr := waitGrant(t, admin, l.ID, 15*time.Second, "the resumed session's grant never became complete", func(d grantDelivery) bool { return d.Status == "complete" })
			if d := gr.Delivery; d.Coverage != 1 || d.BytesAcked != size || !d.Measured || d.DeliveredAt == nil || d.Attempts != 1 {
				t.Errorf("after the resume: delivery %+v, want complete, coverage 1, measured", d)
			}
			// Both processes served the session, and each reported on it.
			per := make([]int, len(c.Gateways))
			for i, g := range c.Gateways {
				eachSessionLog(t, s.SessionID, []*Gateway{g}, func(rec sessionLog) {
					if rec.Msg == "session bytes sent" || rec.Msg == "session response ended early" {
						per[i]++
					}
				})
			}
			if per[0] == 0 || per[1] == 0 {
				t.Errorf("responses of the session per process: %v, want some on each of the two", per)
			}
			report = append(report, fmt.Sprintf("%-15s cut with %4.1f%% saved: %s, coverage %.3f (%d bytes acknowledged); resumed: %s, coverage %.0f; responses per process %v",
				tool.name, 100*float64(cut)/float64(size), after.Status, after.Coverage, after.BytesAcked, gr.Delivery.Status, gr.Delivery.Coverage, per))
		})
	}
	t.Logf("split downloads of a %d MiB session over two processes, cut at 2 MiB/s a connection and resumed:\n%s", size>>20, strings.Join(report, "\n"))
}

// TestOverHTTP2ADownloadCountsWhatItsStreamWrote: with TLS on, curl
// fetches stream links whole and killed half-way, over HTTP/2 and over
// HTTP/1.1. HTTP/1.1 reads its own connection's counters: measured, and
// a cut one counts no more than curl saved and its receive buffer held.
// HTTP/2's streams share one connection, whose counters cannot tell one
// stream's bytes from another's: its grants count what the stream wrote
// to the connection, measured false, never less than the client got.
func TestOverHTTP2ADownloadCountsWhatItsStreamWrote(t *testing.T) {
	t.Parallel()
	curl := MustBinary(t, "curl")
	certFile, keyFile := e2eCA.MustWritePair(t, t.TempDir(), 2301, false)
	g := MustStartTLSGateway(t, "delivery-h2", map[string]string{"GATEWAY_TLS_CERT": certFile, "GATEWAY_TLS_KEY": keyFile})
	admin := g.HTTPSAdmin()
	obj := admin.MustUpload(t, "delivery/h2.bin", 32<<20)
	size := int64(len(obj.Data))
	port := g.PublicAddr[strings.LastIndexByte(g.PublicAddr, ':')+1:]
	var report []string
	for _, proto := range []struct{ flag, version string }{{"--http2", "2"}, {"--http1.1", "1.1"}} {
		t.Run("HTTP/"+proto.version, func(t *testing.T) {
			dir := t.TempDir()
			whole := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1})
			out := MustRun(t, dir, curl, "-q", "-sS", "--fail", "--cacert", e2eCA.PEMFile, proto.flag, "-o", "whole.bin", "-w", "%{http_version}", whole.URL)
			if strings.TrimSpace(out) != proto.version {
				t.Fatalf("curl %s spoke HTTP/%s", proto.flag, strings.TrimSpace(out))
			}
			checkFile(t, filepath.Join(dir, "whole.bin"), obj)
			measured := proto.version != "2"
			gw := waitGrant(t, admin, whole.ID, 10*time.Second, "the whole download was never recorded", func(d grantDelivery) bool { return d.Status != "none" })
			if d := gw.Delivery; d.Status != "complete" || d.BytesAcked != size || d.Measured != measured {
				t.Errorf("whole download: delivery %+v, want complete, %d bytes, measured %v", d, size, measured)
			}

			cut := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1})
			file := filepath.Join(dir, "cut.bin")
			bg := MustStart(t, dir, curl, "-q", "-sS", "--cacert", e2eCA.PEMFile, proto.flag, "--limit-rate", "4M", "-o", file, cut.URL)
			var sk sockets
			cutHalfWay(t, bg, "curl "+proto.flag, func() int64 {
				n := fileSize(file)
				if n >= size/2 {
					sk = readSockets(t, port) // the buffers at the moment of the kill
				}
				return n
			}, size/2, syscall.SIGKILL, 10*time.Second, func() {})
			saved := fileSize(file)
			gc := waitGrant(t, admin, cut.ID, 10*time.Second, "the cut download was never recorded", func(d grantDelivery) bool { return d.Status != "none" })
			d := gc.Delivery
			if d.Status != "partial" || d.Measured != measured || d.InterruptedAt == nil {
				t.Errorf("cut download: delivery %+v, want partial, measured %v, interrupted", d, measured)
			}
			if bound := saved + sk.clientRcvBuf + 64<<10; measured && d.BytesAcked > bound {
				t.Errorf("cut over HTTP/1.1: bytes_acked %d, more than curl saved (%d) and its receive buffer held (%d) and its own 64 KiB", d.BytesAcked, saved, sk.clientRcvBuf)
			}
			if !measured && d.BytesAcked < saved {
				t.Errorf("cut over HTTP/2: bytes_acked %d, less than the %d bytes curl saved: what was written is at least what arrived", d.BytesAcked, saved)
			}
			report = append(report, fmt.Sprintf("HTTP/%-3s whole: %s %d bytes, measured %v; killed with %d bytes saved (client receive queue %d, receive buffer %d, gateway send queue %d): bytes_acked %d (%+d), measured %v",
				proto.version, gw.Delivery.Status, gw.Delivery.BytesAcked, gw.Delivery.Measured, saved, sk.clientRecvQ, sk.clientRcvBuf, sk.gatewaySendQ, d.BytesAcked, d.BytesAcked-saved, d.Measured))
		})
	}
	lines := accessLines(t, g, "link")
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "measured=false") }) {
		t.Errorf("no access line says measured=false, though HTTP/2 downloads were served: %q", lines)
	}
	t.Logf("curl over TLS, a %d MiB stream link, whole and killed half-way at 4 MB/s:\n%s", size>>20, strings.Join(report, "\n"))
}

// TestACurlKilledHalfWayIsPartialAndItsRetryCompletesTheSameGrant: curl
// with --limit-rate fetches a one-download stream link with retries: 1
// straight from the gateway and is killed (SIGKILL) half-way. The grant
// is partial, and its bytes_acked is at least what curl wrote and at most
// that plus what the client's socket could hold acknowledged and unread
// (its receive buffer, read with ss just before the kill) and curl's own
// buffers (64 KiB: a kernel acknowledges what it receives, and a killed
// process loses what it read and had not written). The same curl again
// (same address and User-Agent: the same client, SPEC §5) is served the
// whole object under the same grant: byte-exact, the grant complete with
// 2 attempts, remaining unchanged. Another User-Agent is another client:
// it claims, and the spent link answers 404; so does the same client's
// third GET, whose grant is complete. Before the retry, curl -C - (a
// Range on the link URL) gets 409 and changes nothing.
func TestACurlKilledHalfWayIsPartialAndItsRetryCompletesTheSameGrant(t *testing.T) {
	t.Parallel()
	curl := MustBinary(t, "curl")
	c := MustStartCluster(t, ClusterOptions{Processes: 1})
	g, admin := c.Gateways[0], c.Admin()
	obj := admin.MustUpload(t, "delivery/retry.bin", 32<<20)
	size := int64(len(obj.Data))
	l := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1, Retries: 1})
	port := g.PublicAddr[strings.LastIndexByte(g.PublicAddr, ':')+1:]
	dir := t.TempDir()
	file := filepath.Join(dir, "retry.bin")

	bg := MustStart(t, dir, curl, "-q", "-sS", "--limit-rate", "4M", "-o", file, g.On(l.URL))
	var sk sockets
	cutHalfWay(t, bg, "curl --limit-rate", func() int64 {
		n := fileSize(file)
		if n >= size/2 {
			sk = readSockets(t, port) // the buffers at the moment of the kill
		}
		return n
	}, size/2, syscall.SIGKILL, 10*time.Second, func() {})
	wrote := fileSize(file)
	gr := waitGrant(t, admin, l.ID, 10*time.Second, "the cut download was never recorded", func(d grantDelivery) bool { return d.Status != "none" })
	d := gr.Delivery
	if d.Status != "partial" || !d.Measured || d.Attempts != 1 || d.InterruptedAt == nil {
		t.Errorf("after the kill: delivery %+v, want partial, measured, attempt 1, interrupted", d)
	}
	bound := wrote + sk.clientRcvBuf + 64<<10
	if d.BytesAcked < wrote || d.BytesAcked > bound {
		t.Errorf("bytes_acked %d, want between what curl wrote (%d) and that plus its receive buffer (%d) and 64 KiB (%d)", d.BytesAcked, wrote, sk.clientRcvBuf, bound)
	}
	t.Logf("curl killed half-way: wrote %d bytes; bytes_acked %d (+%d); at the kill its socket held %d unread bytes in a %d-byte receive buffer, the gateway's send queue %d",
		wrote, d.BytesAcked, d.BytesAcked-wrote, sk.clientRecvQ, sk.clientRcvBuf, sk.gatewaySendQ)
	admin.checkCounts(t, l.ID, 0, 1, 0)

	// curl -C - resumes with a Range on the link URL: 409 (a retry is a
	// whole download, never a range), curl fails and leaves its partial
	// file alone, and nothing is claimed nor any attempt begun, so the
	// plain GET below is still the client's retry.
	out, err := run(t, dir, curl, "-q", "-sS", "-C", "-", "-o", file, "-w", "%{http_code}", g.On(l.URL))
	if code := exitCode(err); code == 0 || !strings.HasSuffix(strings.TrimSpace(out), "409") {
		t.Errorf("curl -C - after the cut: exit %d, output %q; want a failure on a 409", code, out)
	}
	if n := fileSize(file); n != wrote {
		t.Errorf("curl -C - changed the partial file: %d bytes, it had %d", n, wrote)
	}
	admin.checkCounts(t, l.ID, 0, 1, 0)
	if gs := mustDeliveries(t, admin, l.ID, ""); len(gs) != 1 || gs[0].Delivery.Attempts != 1 {
		t.Errorf("grants after curl -C -: %+v, want the one grant at attempt 1", gs)
	}

	// The same client again: the whole object under the same grant.
	os.Remove(file)
	MustRun(t, dir, curl, "-q", "-fsS", "-o", file, g.On(l.URL))
	checkFile(t, file, obj)
	gr = waitGrant(t, admin, l.ID, 10*time.Second, "the retry was never recorded complete", func(d grantDelivery) bool { return d.Status == "complete" })
	if d := gr.Delivery; d.BytesAcked != size || d.Attempts != 2 || !d.Measured || d.DeliveredAt == nil || d.Coverage != 1 {
		t.Errorf("after the retry: delivery %+v, want complete with every byte, 2 attempts", d)
	}
	admin.checkCounts(t, l.ID, 0, 1, 0)

	// Another client, then the same one a third time: both claim, and the
	// link has nothing left.
	for _, ua := range []string{"another-agent/1.0", ""} {
		args := []string{"-q", "-sS", "-o", os.DevNull, "-w", "%{http_code}"}
		if ua != "" {
			args = append(args, "-A", ua)
		}
		out := MustRun(t, dir, curl, append(args, g.On(l.URL))...)
		if strings.TrimSpace(out) != "404" {
			t.Errorf("GET by %q after the retry: %s, want 404", cmp.Or(ua, "the same curl"), out)
		}
	}
	admin.checkCounts(t, l.ID, 0, 1, 0)
	if gs := mustDeliveries(t, admin, l.ID, ""); len(gs) != 1 || gs[0].Delivery.Attempts != 2 {
		t.Errorf("grants after the refusals: %+v, want the one grant, 2 attempts", gs)
	}
}

// TestABrowsersCancelledDownloadCompletesOnTheSecondClick: Chromium opens
// a one-download stream link with retries: 1 through a slow network (the
// test balancer at 1 MiB/s), and its download is cancelled half-way, as
// the downloads bar's Cancel does. The grant is partial; the 200 had set
// the gateway's client cookie (HttpOnly, SameSite=Lax, on the link's
// path). The second click is the same client: it is served the whole file
// under the same grant, which becomes complete with 2 attempts, and no
// second download is spent.
func TestABrowsersCancelledDownloadCompletesOnTheSecondClick(t *testing.T) {
	t.Parallel()
	g := MustStartEmbeddedDefault(t)
	admin := g.Admin()
	br := MustStartBrowser(t)
	obj := admin.MustUpload(t, "delivery/Holiday film.mkv", 8<<20)
	size := int64(len(obj.Data))
	l := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1, Retries: 1})
	lb := MustStartBalancer(t, 1<<20, g.PublicAddr)
	url := lb.On(l.URL)

	if st := br.Open(t, url); st != 0 {
		t.Fatalf("opening the link showed a page (%d), want a download", st)
	}
	guid := br.WaitDownloadStart(t)
	waitFor(t, 30*time.Second, "the download never got half the file", func() bool { return br.Received(guid) >= size/2 })
	atCancel := br.Received(guid)
	br.CancelDownload(t, guid)
	gr := waitGrant(t, admin, l.ID, 15*time.Second, "the cancelled download was never recorded", func(d grantDelivery) bool { return d.InterruptedAt != nil })
	cancelled := gr.Delivery
	if d := cancelled; d.Status != "partial" || d.Attempts != 1 || !d.Measured {
		t.Errorf("after the cancel: delivery %+v, want partial, measured, attempt 1", d)
	}
	cookies := br.Cookies(t, url)
	var client *network.Cookie
	for _, ck := range cookies {
		if ck.Name == "dlgate_client" {
			client = ck
		}
	}
	if client == nil || !client.HTTPOnly || client.SameSite != network.CookieSameSiteLax || client.Path != "/d/"+l.Token || client.Secure {
		t.Errorf("cookies after the first click: %+v, want dlgate_client, HttpOnly, SameSite=Lax, Path=/d/{token}, not Secure over http", client)
	}
	lb.SetRate(0)
	if st := br.Open(t, url); st != 0 {
		t.Fatalf("the second click showed a page (%d), want a download", st)
	}
	name, data := br.WaitDownload(t)
	if sha256.Sum256(data) != obj.Sum {
		t.Fatalf("the second click saved %q: %d bytes that differ from the %d-byte object", name, len(data), size)
	}
	gr = waitGrant(t, admin, l.ID, 15*time.Second, "the second click was never recorded complete", func(d grantDelivery) bool { return d.Status == "complete" })
	if d := gr.Delivery; d.Attempts != 2 || d.BytesAcked != size {
		t.Errorf("after the second click: delivery %+v, want complete with 2 attempts", d)
	}
	admin.checkCounts(t, l.ID, 0, 1, 0)
	t.Logf("Chromium: cancelled with %d of %d bytes received (through a 1 MiB/s proxy: %d acknowledged by it); the second click completed the same grant: %+v",
		atCancel, size, cancelled.BytesAcked, gr.Delivery)
}
