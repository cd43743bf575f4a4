package e2e

import (
	"bufio"
	"crypto/sha256"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// MustStampede sends n requests at the same instant. It opens one TCP
// connection per request, spread round-robin over addrs, and writes each
// request except the blank line that ends its header; when every
// connection is open and written, all goroutines send their final CRLF at
// once, so no request can be parsed (let alone claim) before the others
// have arrived. head(addr) is the request text up to and including the
// CRLF of its last header field. The answers come back in request order;
// a connection that gave no answer has Status 0 and the error in BodyErr.
func MustStampede(tb testing.TB, addrs []string, n int, method, path string, head func(addr string) string) []*Reply {
	tb.Helper()
	conns := make([]net.Conn, n)
	defer func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	}()
	for i := range conns {
		addr := addrs[i%len(addrs)]
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			tb.Fatalf("stampede: dial %s: %v", addr, err)
		}
		conns[i] = c
		c.SetDeadline(time.Now().Add(requestTimeout)) //nolint:errcheck // a TCPConn supports deadlines
		if _, err := io.WriteString(c, head(addr)); err != nil {
			tb.Fatalf("stampede: writing to %s: %v", addr, err)
		}
	}
	replies := make([]*Reply, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Go(func() {
			r := &Reply{Method: method, URL: "http://" + c.RemoteAddr().String() + path}
			replies[i] = r
			<-start
			if _, err := io.WriteString(c, "\r\n"); err != nil {
				r.BodyErr = err
				return
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				r.BodyErr = err
				return
			}
			defer resp.Body.Close()
			r.Status, r.Header = resp.StatusCode, resp.Header
			r.Body, r.BodyErr = io.ReadAll(resp.Body)
		})
	}
	close(start)
	wg.Wait()
	return replies
}

// getHead is a GET of path, closing the connection after the answer.
func getHead(path string) func(addr string) string {
	return func(addr string) string {
		return "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nUser-Agent: dlgate-e2e-stampede\r\nConnection: close\r\n"
	}
}

// checkClaimRace runs trials of a 50-request stampede on fresh links of
// the given allowance, spread over the processes gws, and checks every
// time that exactly `downloads` requests got the whole object,
// byte-identical, that all others got the generic 404, and that the
// ledger agrees (remaining 0, `downloads` grants).
func checkClaimRace(t *testing.T, gws []*Gateway, obj *Object, downloads, trials int) {
	const requests = raceRequests
	admin := gws[0].Admin()
	addrs := make([]string, len(gws))
	for i, g := range gws {
		addrs[i] = g.PublicAddr
	}
	total := 0
	for trial := 1; trial <= trials; trial++ {
		link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: downloads})
		path := "/d/" + link.Token
		replies := MustStampede(t, addrs, requests, http.MethodGet, path, getHead(path))
		full, refused := 0, 0
		byProcess := make([]int, len(gws))
		for i, r := range replies {
			switch {
			case r.Status == http.StatusOK:
				if r.BodyErr != nil || int64(len(r.Body)) != link.Object.Size || sha256.Sum256(r.Body) != obj.Sum {
					t.Errorf("trial %d: %v: a 200 whose body (%d bytes, read error %v) is not the %d-byte object", trial, r, len(r.Body), r.BodyErr, link.Object.Size)
					continue
				}
				if r.Header.Get("ETag") != link.Object.ETag || r.Header.Get("Content-Length") != fmt.Sprint(link.Object.Size) {
					t.Errorf("trial %d: %v: ETag %q, Content-Length %q; want %q, %d", trial, r,
						r.Header.Get("ETag"), r.Header.Get("Content-Length"), link.Object.ETag, link.Object.Size)
				}
				full++
				byProcess[i%len(gws)]++
			case r.Status == http.StatusNotFound:
				checkProblem(t, r, http.StatusNotFound, "link-unavailable")
				refused++
			case r.Status == 0:
				t.Errorf("trial %d: request %d to %s got no answer: %v", trial, i, addrs[i%len(addrs)], r.BodyErr)
			default:
				t.Errorf("trial %d: %v, want 200 or 404; body %.300q", trial, r, r.Body)
			}
		}
		t.Logf("trial %2d: %d × 200 with the whole object (by process %v), %d × 404", trial, full, byProcess, refused)
		if full != downloads {
			t.Errorf("trial %d: %d of %d simultaneous GETs got the object; the link allows exactly %d", trial, full, requests, downloads)
		}
		if refused != requests-downloads {
			t.Errorf("trial %d: %d of %d simultaneous GETs refused (404); want every one the link could not grant, %d", trial, refused, requests, requests-downloads)
		}
		admin.checkCounts(t, link.ID, 0, downloads, 0)
		total += full
	}
	t.Logf("%d trials of %d simultaneous GETs on links of %d: %d full downloads in total, want %d",
		trials, requests, downloads, total, trials*downloads)
}

// raceCases are the allowances the race runs on.
var raceCases = []struct {
	name      string
	downloads int
}{
	{"FiftySimultaneousGetsOnAOneDownloadLinkGetOneObject", 1},
	{"FiftySimultaneousGetsOnAFiveDownloadLinkGetFiveObjects", 5},
}

// raceRequests is how many GETs each trial of the race releases at once.
const raceRequests = 50

// raceTrials is how many fresh links each race case stampedes.
const raceTrials = 10

// claimBatches are the GATEWAY_CLAIM_BATCH settings the race runs with:
// grouping off, small batches, the default.
var claimBatches = []string{"1", "8", "64"}

// TestClaimRaceByClaimBatch runs the barrier race (50 GETs released at
// once against 1- and 5-download links) with each of claimBatches given
// to every process, on three processes sharing MariaDB and on three
// sharing one SQLite file: exactly N downloads every trial, each under a
// grant of its own, every other GET refused, however the claims are
// grouped (SPEC §1 "Group claims"; checkClaimRace, checkClaimBatches).
//
// Whether a stampede's claims happen to share transactions is the
// scheduler's call, so this test asserts no batch size beyond the cap.
// That grouping is on when configured is shown without timing in two
// halves: every process says, in its starting line, the
// GATEWAY_CLAIM_BATCH it was given (checkClaimBatches), and the ledger's
// conformance sentence KClaimsOfOneLinkInOneBatchAreOneTransaction
// (ledger/ledgertest/groups.go, on SQLite and MariaDB, grouping on and
// off) holds one claim's transaction in flight, lets k claims queue
// behind it, and demands that they are decided in one transaction of k
// (Wait.ClaimBatch, OnClaimBatch) when ClaimBatch > 1, and each alone when
// it is 1.
func TestClaimRaceByClaimBatch(t *testing.T) {
	t.Parallel()
	for _, batch := range claimBatches {
		t.Run("GATEWAY_CLAIM_BATCH="+batch, func(t *testing.T) {
			env := map[string]string{"GATEWAY_CLAIM_BATCH": batch}
			t.Run("ThreeProcessesOnMariaDB", func(t *testing.T) {
				c := MustStartCluster(t, ClusterOptions{Processes: 3, Env: env})
				obj := c.Admin().MustUpload(t, "race/object.bin", 256<<10)
				for _, tc := range raceCases {
					t.Run(tc.name, func(t *testing.T) { checkClaimRace(t, c.Gateways, obj, tc.downloads, raceTrials) })
				}
				checkClaimBatches(t, c.Gateways, batch)
			})
			t.Run("ThreeProcessesOnSQLite", func(t *testing.T) {
				gws := MustStartSQLiteProcesses(t, 3, env)
				obj := gws[0].Admin().MustUpload(t, "race/object.bin", 256<<10)
				for _, tc := range raceCases {
					t.Run(tc.name, func(t *testing.T) { checkClaimRace(t, gws, obj, tc.downloads, raceTrials) })
				}
				checkClaimBatches(t, gws, batch)
			})
		})
	}
}

// MustStartSQLiteProcesses starts n gateways on one SQLite file and one
// local store directory, with one secret and admin token, started at once
// (their migrations race, as in a restart), each also given env.
func MustStartSQLiteProcesses(tb testing.TB, n int, env map[string]string) []*Gateway {
	tb.Helper()
	dir := tb.TempDir()
	common := map[string]string{
		"GATEWAY_DB_DRIVER":      "sqlite",
		"GATEWAY_DB_DSN":         filepath.Join(dir, "gateway.db"),
		"GATEWAY_STORE":          "fs",
		"GATEWAY_FS_ROOT":        filepath.Join(dir, "objects"),
		"GATEWAY_ADMIN_TOKEN":    randomHex(24),
		"GATEWAY_SECRET":         randomHex(32),
		"GATEWAY_SHUTDOWN_GRACE": "2s",
		"GATEWAY_LOG_LEVEL":      "debug",
	}
	maps.Copy(common, env)
	specs := make([]GatewaySpec, n)
	for i := range specs {
		specs[i] = GatewaySpec{Name: fmt.Sprintf("sqlite%d", i+1), Env: common}
	}
	return MustStartGateways(tb, specs...)
}

func TestEmbeddedDefault(t *testing.T) {
	t.Parallel()
	g := MustStartEmbeddedDefault(t)
	obj := g.Admin().MustUpload(t, "race/object.bin", 256<<10)
	for _, tc := range raceCases {
		t.Run(tc.name, func(t *testing.T) {
			checkClaimRace(t, []*Gateway{g}, obj, tc.downloads, raceTrials)
		})
	}
	t.Run("CurlDownloadsAByteExactFileFromTheLocalStore", func(t *testing.T) {
		big := g.Admin().MustUpload(t, "tools/big.bin", 5<<20)
		link := g.Admin().MustCreateLink(t, big, LinkRequest{Downloads: 1})
		if !strings.HasPrefix(link.URL, g.PublicBase()+"/d/") {
			t.Errorf("link URL %s does not start with the default public URL %s", redact(link.URL), g.PublicBase())
		}
		file := t.TempDir() + "/big.bin"
		MustRun(t, "", MustBinary(t, "curl"), "-q", "-fsS", "-o", file, link.URL)
		checkFile(t, file, big)
		g.Admin().checkCounts(t, link.ID, 0, 1, 0)
	})
	t.Run("NoRawTokenReachesTheLogs", func(t *testing.T) {
		checkNoTokenInLogs(t, g)
	})
}

// checkClaimBatches checks what the processes told of their claim
// transactions after the races, GATEWAY_CLAIM_BATCH being limit: each
// process started with limit as its claim batch; each decided claims
// (every trial's first GET on each process claims: a fresh link is in no
// refusal cache), no transaction decided more than limit (the
// histogram's bucket at limit holds every one), and every stampede GET
// answered 200 names, in its access line, the size of the batch that
// granted it, between 1 and limit. With limit 1 every claim went alone.
// Their counts agree with the ledger's: exactly the links' downloads
// granted (gateway_claims_total, over the processes), every other GET
// refused as exhausted, and each 200 streamed under a grant of its own,
// as many for each link as it allowed. A response's access line is
// written after its last byte, so the lines are awaited (at most 10 s)
// before they are judged.
func checkClaimBatches(t *testing.T, gws []*Gateway, limit string) {
	t.Helper()
	most, err := strconv.Atoi(limit)
	if err != nil {
		t.Fatal(err)
	}
	checkStartedWith(t, gws, "config.claim_batch", limit)
	want, refused := 0, 0
	perLink := map[int]int{} // downloads a link allows → links of that many
	for _, tc := range raceCases {
		want += raceTrials * tc.downloads
		refused += raceTrials * (raceRequests - tc.downloads)
		perLink[tc.downloads] += raceTrials
	}
	var lines []string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		lines = grantedStampedeLines(t, gws)
		if len(lines) >= want || time.Now().After(deadline) {
			break
		}
	}
	if len(lines) != want {
		t.Errorf("%d access lines of granted stampede GETs, want %d", len(lines), want)
	}
	for _, line := range lines {
		if n, err := strconv.Atoi(fieldOf(line, "claim_batch")); err != nil || n < 1 || n > most {
			t.Errorf("a granted GET's access line gives claim_batch %q, want 1 to %d: %s", fieldOf(line, "claim_batch"), most, line)
		}
	}
	checkStreamedGrants(t, gws, perLink)
	granted, exhausted := 0.0, 0.0
	for _, g := range gws {
		m := metricValues(t, g, "gateway_claim_batch_size_count", `gateway_claim_batch_size_bucket{le="`+limit+`"}`,
			"gateway_claim_batch_size_sum", `gateway_claim_batches_total{result="committed"}`,
			`gateway_claims_total{kind="stream",result="granted"}`, `gateway_claims_total{kind="stream",result="exhausted"}`)
		count, under, sum := m[0], m[1], m[2]
		granted += m[4]
		exhausted += m[5]
		if count < float64(len(raceCases)*raceTrials) || sum < count {
			t.Errorf("%s: %v claim transactions deciding %v claims; want at least one per trial of each case (%d)", g.Name, count, sum, len(raceCases)*raceTrials)
		}
		if under != count {
			t.Errorf("%s: %v of %v claim transactions decided at most %s claims; GATEWAY_CLAIM_BATCH=%s caps every one", g.Name, under, count, limit, limit)
		}
		if m[3] < 1 {
			t.Errorf("%s: gateway_claim_batches_total{result=\"committed\"} = %v", g.Name, m[3])
		}
	}
	if granted != float64(want) || exhausted != float64(refused) {
		t.Errorf("the processes counted %v stream claims granted and %v refused as exhausted; want exactly %d and %d",
			granted, exhausted, want, refused)
	}
}

// checkStartedWith checks that every process of gws logged, in its
// starting line, the setting key (as config's LogValue names it) with
// value: the process runs with what the test gave it.
func checkStartedWith(tb testing.TB, gws []*Gateway, key, value string) {
	tb.Helper()
	for _, g := range gws {
		b, err := os.ReadFile(g.StderrPath)
		if err != nil {
			tb.Fatal(err)
		}
		got := ""
		for line := range strings.Lines(string(b)) {
			if strings.Contains(line, "msg=starting ") {
				got = fieldOf(line, key)
				break
			}
		}
		if got != value {
			tb.Errorf("%s started with %s=%q; want %q", g.Name, key, got, value)
		}
	}
}

// checkStreamedGrants checks the grants the processes streamed under
// (their "streamed" lines, and "stream ended early" ones, since a grant
// is a grant however its stream ended): no grant served two responses,
// and each link granted as many as it allowed, perLink being how many
// links allow each number of downloads.
func checkStreamedGrants(tb testing.TB, gws []*Gateway, perLink map[int]int) {
	tb.Helper()
	grants := map[string]int{}
	links := map[string]int{}
	for _, g := range gws {
		b, err := os.ReadFile(g.StderrPath)
		if err != nil {
			tb.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			if strings.Contains(line, "msg=streamed ") || strings.Contains(line, `msg="stream ended early"`) {
				grants[fieldOf(line, "grant_id")]++
				links[fieldOf(line, "link_id")]++
			}
		}
	}
	for id, n := range grants {
		if id == "" || n != 1 {
			tb.Errorf("grant %q served %d responses; want each grant one", id, n)
		}
	}
	got := map[int]int{}
	for _, n := range links {
		got[n]++
	}
	if !maps.Equal(got, perLink) {
		tb.Errorf("links by the grants streamed under them %v; want %v (downloads → links)", got, perLink)
	}
}

// grantedStampedeLines are the access lines of the stampede GETs that gws
// answered 200.
func grantedStampedeLines(tb testing.TB, gws []*Gateway) []string {
	tb.Helper()
	var out []string
	for _, g := range gws {
		b, err := os.ReadFile(g.StderrPath)
		if err != nil {
			tb.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			if strings.Contains(line, "msg=http ") && fieldOf(line, "user_agent") == "dlgate-e2e-stampede" && fieldOf(line, "status") == "200" {
				out = append(out, line)
			}
		}
	}
	return out
}

// metricValues reads the samples named (name and labels as /metrics
// writes them) from g's /metrics; a sample missing is 0.
func metricValues(tb testing.TB, g *Gateway, samples ...string) []float64 {
	tb.Helper()
	r := MustFetch(tb, http.MethodGet, "http://"+g.AdminAddr+"/metrics")
	out := make([]float64, len(samples))
	for line := range strings.Lines(string(r.Body)) {
		name, value, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		if i := slices.Index(samples, name); i >= 0 {
			out[i], _ = strconv.ParseFloat(value, 64)
		}
	}
	return out
}
