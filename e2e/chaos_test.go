package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlgate/dlgate/config"
	"github.com/dlgate/dlgate/internal/testenv"
)

// The chaos tests put three gateway processes through the faults of a bad
// day (issue 9): a store that stops answering while its connections stay
// open, during the open and in the middle of a transfer; kill -9 of a
// process mid-stream; a database frozen and then restarted under load.
// Each ends with the ledger's invariant, read through the admin API:
// grants = allowance − remaining for every link. Their limits are short
// (chaosEnv) so that each fault shows within seconds; the figures they log
// are the README's "How it fails".

// TestChaosStoreFrozenDuringOpen: with versitygw stopped by SIGSTOP, its
// connections open, every download answers 504 storage-timeout after the
// open timeout, claims are refunded; SIGCONT, and downloads work again.
func TestChaosStoreFrozenDuringOpen(t *testing.T) {
	t.Parallel()
	s3 := testenv.StartS3(t)
	c := MustStartCluster(t, ClusterOptions{Processes: 3, S3: s3, Env: chaosEnv(nil)})
	admin := c.Admin()
	obj := admin.MustUpload(t, "frozen/open.bin", 256<<10)
	const downloads = 10
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: downloads})
	slink := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1, Session: &SessionSettings{MaxConcurrency: 1}})
	s := MustMintSession(t, c.PublicURL, slink)

	// A key the store refuses is the caller's fault: 400, not 502.
	long := "frozen/" + strings.Repeat("k", 300)
	r, err := fetch(http.MethodPut, admin.Base+"/v1/objects/"+url.PathEscape(long), []byte("x"), "Authorization", "Bearer "+admin.Token)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != http.StatusBadRequest || !bytes.Contains(r.Body, []byte("/invalid-key")) {
		t.Errorf("PUT of a key with a 300-byte segment = %d %.200q, want 400 invalid-key", r.Status, r.Body)
	}

	s3.Freeze(t)
	frozen := time.Now()
	const n = 6 // two per process
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		took []time.Duration
	)
	for i := range n {
		g := c.Gateways[i%len(c.Gateways)]
		wg.Go(func() {
			start := time.Now()
			r, err := fetch(http.MethodGet, g.On(link.URL), nil)
			d := time.Since(start)
			if err != nil {
				t.Errorf("GET on %s with the store frozen: %v", g.Name, err)
				return
			}
			checkProblem(t, r, http.StatusGatewayTimeout, "storage-timeout")
			mu.Lock()
			took = append(took, d)
			mu.Unlock()
		})
	}
	start := time.Now()
	sr := MustFetch(t, http.MethodGet, c.Gateways[0].On(s.SessionURL), "Range", "bytes=0-999")
	sessionTook := time.Since(start)
	checkProblem(t, sr, http.StatusGatewayTimeout, "storage-timeout")
	wg.Wait()
	slices.Sort(took)
	if len(took) == n && (took[0] < chaosOpenTimeout || took[n-1] > chaosOpenTimeout+5*time.Second) {
		t.Errorf("504s after %v … %v, want the open timeout %v (+ up to 5 s)", took[0], took[n-1], chaosOpenTimeout)
	}
	t.Logf("store frozen, open timeout %v: %d stream GETs on 3 processes answered 504 after %v … %v; a session range after %v",
		chaosOpenTimeout, len(took), roundMs(took[0]), roundMs(took[len(took)-1]), roundMs(sessionTook))
	// No byte left the gateway: every claim is refunded.
	admin.checkCounts(t, link.ID, downloads, 0, n)
	checkConsistent(t, admin, link.ID)

	s3.Thaw()
	t.Logf("store thawed after %v", roundMs(time.Since(frozen)))
	for _, g := range c.Gateways {
		checkBody(t, MustFetch(t, http.MethodGet, g.On(link.URL)), obj)
	}
	if r := MustFetch(t, http.MethodGet, c.Gateways[1].On(s.SessionURL), "Range", "bytes=0-999"); r.Status != http.StatusPartialContent || !bytes.Equal(r.Body, obj.Data[:1000]) {
		t.Errorf("%v after the thaw, want 206 with the first 1000 bytes", r)
	}
	admin.checkCounts(t, link.ID, downloads-3, 3, n)
	checkConsistent(t, admin, slink.ID)
	checkNoTokenInLogs(t, c.Gateways...)
}

// TestChaosStoreFrozenMidStream: versitygw stops mid-transfer. A stream
// and a session range, each in flight on a slow network, are cut after
// the idle timeout (a truncated transfer, never a complete-looking wrong
// file); the session's only slot is free again at once (a new request gets
// the store's 504, not 429) and its unsent budget went back; SIGCONT, and
// the range resumes where it broke off.
func TestChaosStoreFrozenMidStream(t *testing.T) {
	t.Parallel()
	s3 := testenv.StartS3(t)
	c := MustStartCluster(t, ClusterOptions{Processes: 3, S3: s3, Env: chaosEnv(nil)})
	admin := c.Admin()
	db := MustLedgerDB(t, c)
	// Larger than what socket buffers between versitygw, the gateway and
	// the client can hold, so that the freeze lands mid-transfer.
	obj := admin.MustUpload(t, "frozen/mid.bin", 40<<20)
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 3})
	slink := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1, Session: &SessionSettings{MaxConcurrency: 1}})
	s := MustMintSession(t, c.PublicURL, slink)

	slow := MustStartBalancer(t, 2<<20, c.Gateways[0].PublicAddr, c.Gateways[1].PublicAddr)
	stream := StartDownload("stream GET", slow.On(link.URL))
	ranged := StartDownload("session GET bytes=0-", slow.On(s.SessionURL), "Range", "bytes=0-")
	stream.WaitBytes(t, 1<<20, 30*time.Second)
	ranged.WaitBytes(t, 1<<20, 30*time.Second)

	s3.Freeze(t)
	frozen := time.Now()
	for _, d := range []*Download{stream, ranged} {
		d.Wait(t, 60*time.Second)
		checkTruncatedPrefix(t, d, obj.Data)
		cut := d.Ended.Sub(frozen)
		t.Logf("store frozen mid-transfer, idle timeout %v: %s cut %v after the freeze, %d of %d bytes received",
			chaosIdleTimeout, d.Name, roundMs(cut), len(d.Body), len(obj.Data))
		if cut < chaosIdleTimeout || cut > chaosIdleTimeout+25*time.Second {
			t.Errorf("%s cut %v after the freeze, want the idle timeout %v plus the time to drain socket buffers (< 25 s)", d.Name, cut, chaosIdleTimeout)
		}
	}
	// The process that served the cut range keeps its slot and unsent
	// budget warm for the session's next request for a second
	// (config.DefaultWarmIdle), then gives both back.
	time.Sleep(config.DefaultWarmIdle + 500*time.Millisecond)
	// The slot came back with the cut: a new request on the one-slot
	// session reaches the store (504), it is not refused with 429.
	probe := MustFetch(t, http.MethodGet, c.Gateways[2].On(s.SessionURL), "Range", "bytes=0-99")
	checkProblem(t, probe, http.StatusGatewayTimeout, "storage-timeout")
	// Bytes drawn and not sent went back: the budget holds what the
	// gateways sent, whole or cut, and no more.
	drawn := bytesDrawn(t, db, s.SessionID)
	if sent := sentBytes(t, s.SessionID, c.Gateways...); drawn != sent || drawn < int64(len(ranged.Body)) {
		t.Errorf("session bytes_drawn %d; the gateways logged %d bytes sent and the client received %d: the unsent reservation was not returned",
			drawn, sent, len(ranged.Body))
	}

	s3.Thaw()
	got := int64(len(ranged.Body))
	r := MustFetch(t, http.MethodGet, c.Gateways[2].On(s.SessionURL), "Range", fmt.Sprintf("bytes=%d-", got))
	if r.Status != http.StatusPartialContent || r.BodyErr != nil || !bytes.Equal(r.Body, obj.Data[got:]) {
		t.Errorf("resume after the thaw: %v, %d bytes (%v); want 206 with the remaining %d", r, len(r.Body), r.BodyErr, int64(len(obj.Data))-got)
	}
	// The stream's claim stands (bytes left), nothing was refunded.
	admin.checkCounts(t, link.ID, 2, 1, 0)
	checkConsistent(t, admin, slink.ID)
	if drawn, budget := bytesDrawn(t, db, s.SessionID), s.ByteBudget; drawn > budget {
		t.Errorf("bytes_drawn %d over the budget %d", drawn, budget)
	}
}

// TestChaosGatewayKilledMidStream: kill -9 of the process serving three
// streams and two range requests. Every client sees a truncated transfer;
// the other processes serve on; the ledger holds grants = allowance −
// remaining, with no refund (every stream had bytes out); the killed
// ranges lost at most their one chunk of budget; the session's slots come
// back within the lease.
func TestChaosGatewayKilledMidStream(t *testing.T) {
	t.Parallel()
	c := MustStartCluster(t, ClusterOptions{Processes: 3, Env: chaosEnv(nil)})
	victim, p2, p3 := c.Gateways[0], c.Gateways[1], c.Gateways[2]
	admin := p2.Admin() // the victim's admin listener dies with it
	db := MustLedgerDB(t, c)
	const size = 16 << 20
	obj := admin.MustUpload(t, "kill/big.bin", size)
	var links []*Link
	for range 3 {
		links = append(links, admin.MustCreateLink(t, obj, LinkRequest{Downloads: 3}))
	}
	slink := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1, Session: &SessionSettings{MaxConcurrency: 2}})
	s := MustMintSession(t, c.PublicURL, slink)

	slow := MustStartBalancer(t, 1<<20, victim.PublicAddr)
	var inflight []*Download
	for i, l := range links {
		inflight = append(inflight, StartDownload(fmt.Sprintf("stream %d", i+1), slow.On(l.URL)))
	}
	inflight = append(inflight,
		StartDownload("range bytes=0-", slow.On(s.SessionURL), "Range", "bytes=0-"),
		StartDownload("range bytes=8388608-", slow.On(s.SessionURL), "Range", "bytes=8388608-"))
	for _, d := range inflight {
		d.WaitBytes(t, 256<<10, 30*time.Second)
	}
	// While the victim streams, its slots are taken.
	if r := MustFetch(t, http.MethodGet, p2.On(s.SessionURL), "Range", "bytes=0-99"); r.Status != http.StatusTooManyRequests {
		t.Errorf("%v while both slots stream on the victim, want 429", r)
	}

	victim.Kill(t)
	killed := time.Now()
	var received int64
	for _, d := range inflight {
		d.Wait(t, 30*time.Second)
		want := obj.Data
		if strings.Contains(d.Name, "8388608") {
			want = obj.Data[8<<20:]
		}
		checkTruncatedPrefix(t, d, want)
		if strings.HasPrefix(d.Name, "range") {
			received += int64(len(d.Body))
		}
	}
	t.Logf("kill -9 with %d transfers in flight: every one cut within %v", len(inflight), roundMs(time.Since(killed)))

	// The others serve on.
	checkBody(t, MustFetch(t, http.MethodGet, p2.On(links[0].URL)), obj)

	// The killed process's slots lapse within the lease.
	var probed int64
	for {
		r := MustFetch(t, http.MethodGet, p2.On(s.SessionURL), "Range", "bytes=0-99")
		if r.Status == http.StatusPartialContent {
			probed += 100
			break
		}
		checkProblem(t, r, http.StatusTooManyRequests, "too-many-concurrent-requests")
		if t.Failed() || time.Since(killed) > chaosLease+15*time.Second {
			t.Fatalf("the killed process's slots were still taken %v after kill -9 (lease %v)", time.Since(killed), chaosLease)
		}
		time.Sleep(100 * time.Millisecond)
	}
	back := time.Since(killed)
	// Both slots: one held by a slow range on p2, the other still free.
	const held = 512 << 10
	hold := StartDownload("holding range", MustStartBalancer(t, 128<<10, p2.PublicAddr).On(s.SessionURL), "Range", fmt.Sprintf("bytes=0-%d", held-1))
	hold.WaitBytes(t, 64<<10, 30*time.Second)
	for {
		r := MustFetch(t, http.MethodGet, p3.On(s.SessionURL), "Range", "bytes=100-199")
		if r.Status == http.StatusPartialContent {
			probed += 100
			break
		}
		if time.Since(killed) > chaosLease+15*time.Second {
			t.Fatalf("the second slot was still taken %v after kill -9: %v", time.Since(killed), r)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("slots of the killed process free again %v after kill -9 (lease %v), both within %v", roundMs(back), chaosLease, roundMs(time.Since(killed)))
	hold.Wait(t, 30*time.Second)
	if hold.Status != http.StatusPartialContent || !bytes.Equal(hold.Body, obj.Data[:held]) {
		t.Errorf("holding range: %d with %d bytes (%v), want 206 with %d", hold.Status, len(hold.Body), hold.BodyErr, held)
	}

	for _, l := range links {
		// Every stream had bytes out: its claim stands, never refunded.
		if got := checkConsistent(t, admin, l.ID); got.Grants["refunded"] != 0 {
			t.Errorf("link %s: %d refunds after a kill mid-stream, want none", l.ID, got.Grants["refunded"])
		}
	}
	checkConsistent(t, admin, slink.ID)
	// Budget: what the survivors logged as sent is theirs; the rest of
	// bytes_drawn went out of (or died with) the killed process, at most
	// one 8 MiB chunk per killed range beyond what it sent.
	var survivors int64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if survivors = sentBytes(t, s.SessionID, p2, p3); survivors >= probed+held || time.Now().After(deadline) {
			break
		}
	}
	// And the budget a survivor drew but did not send goes back once its
	// warm window ends (a whole response ends when its bytes left the
	// host, so the holding range ends barely before its client has it).
	time.Sleep(config.DefaultWarmIdle + 500*time.Millisecond)
	share := bytesDrawn(t, db, s.SessionID) - survivors
	t.Logf("kill -9 and budget: the killed process drew %d bytes for its 2 ranges, whose clients received %d; at most %d lost with it",
		share, received, share-received)
	if share < received || share > 2*(8<<20) {
		t.Errorf("the killed process's share of bytes_drawn is %d, its clients received %d: want at least that and at most one 8 MiB chunk per killed range", share, received)
	}
	checkNoTokenInLogs(t, p2, p3)
}

// TestChaosDatabaseFrozenAndRestartedUnderLoad: requests run on three
// processes while MariaDB is frozen (SIGSTOP) for a few seconds, thawed,
// then restarted. No answer is a 500; requests answer 503 or wait and
// succeed; no request started during the freeze waits longer than
// GATEWAY_DB_TIMEOUT (+1 s), however many ledger calls it makes; the
// gateways recover without a restart; no link is oversold. Claims are
// grouped (GATEWAY_CLAIM_BATCH=64), and a hot link that four clients claim
// without pause keeps its invariant: every stream the gateways sent has a
// grant of its own in the ledger, none twice, and remaining plus the
// grants is its allowance.
func TestChaosDatabaseFrozenAndRestartedUnderLoad(t *testing.T) {
	t.Parallel()
	mdb := testenv.StartMariaDB(t)
	dsn := mdb.NewDatabase(t)
	c := MustStartCluster(t, ClusterOptions{Processes: 3, Env: chaosEnv(map[string]string{"GATEWAY_DB_DSN": dsn, "GATEWAY_CLAIM_BATCH": "64"})})
	admin := c.Admin()
	obj := admin.MustUpload(t, "db/small.bin", 64<<10)
	// Three links the load does not use up, one it does: claims on a
	// link with allowance left and refusals of a used-up one both run
	// into the fault.
	allowance := []int{500, 500, 500, 30}
	var links []*Link
	for _, n := range allowance {
		links = append(links, admin.MustCreateLink(t, obj, LinkRequest{Downloads: n}))
	}
	slink := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 200, Session: &SessionSettings{MaxConcurrency: 4}})
	hot := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1000000})

	var (
		streams, sessions Tally
		phases            = NewPhases("before", "frozen", "thawed", "restart", "after")
		mu                sync.Mutex
		complete          = map[string]int{} // link id → whole bodies received
	)
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 12 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				l := links[(w+i)%len(links)]
				start, phase := time.Now(), phases.Now()
				r, err := fetch(http.MethodGet, c.PublicURL+"/d/"+l.Token, nil)
				if err != nil {
					streams.Add(0, time.Since(start))
					phases.Add(phase, 0, time.Since(start))
					continue
				}
				streams.Add(r.Status, time.Since(start))
				phases.Add(phase, r.Status, time.Since(start))
				if r.Status == http.StatusOK && r.BodyErr == nil && bytes.Equal(r.Body, obj.Data) {
					mu.Lock()
					complete[l.ID]++
					mu.Unlock()
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	for range 4 {
		// The hot link, claimed without pause: claims of one link that
		// arrive together share a transaction.
		wg.Go(func() {
			for ctx.Err() == nil {
				start, phase := time.Now(), phases.Now()
				r, err := fetch(http.MethodGet, c.PublicURL+"/d/"+hot.Token, nil)
				if err != nil {
					streams.Add(0, time.Since(start))
					phases.Add(phase, 0, time.Since(start))
					continue
				}
				streams.Add(r.Status, time.Since(start))
				phases.Add(phase, r.Status, time.Since(start))
				if r.Status == http.StatusOK && r.BodyErr == nil && bytes.Equal(r.Body, obj.Data) {
					mu.Lock()
					complete[hot.ID]++
					mu.Unlock()
				}
			}
		})
	}
	for range 2 {
		wg.Go(func() {
			for ctx.Err() == nil {
				start, phase := time.Now(), phases.Now()
				r, err := fetch(http.MethodPost, c.PublicURL+"/d/"+slink.Token+"/sessions", nil)
				if err != nil {
					sessions.Add(0, time.Since(start))
					phases.Add(phase, 0, time.Since(start))
					continue
				}
				sessions.Add(r.Status, time.Since(start))
				phases.Add(phase, r.Status, time.Since(start))
				var x Session
				if r.Status == http.StatusCreated && jsonInto(r.Body, &x) {
					noteToken(x.SessionURL)
					start, phase := time.Now(), phases.Now()
					rr, err := fetch(http.MethodGet, x.SessionURL, nil, "Range", "bytes=0-4095")
					if err == nil {
						sessions.Add(rr.Status, time.Since(start))
						phases.Add(phase, rr.Status, time.Since(start))
					}
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}

	const freeze = 8 * time.Second
	time.Sleep(2 * time.Second)
	mdb.Freeze(t)
	phases.Enter("frozen")
	time.Sleep(freeze)
	mdb.Thaw()
	phases.Enter("thawed")
	time.Sleep(3 * time.Second)
	restarted := time.Now()
	phases.Enter("restart")
	mdb.Restart(t)
	phases.Enter("after")
	t.Logf("MariaDB frozen %v, thawed, then restarted (down for %v)", freeze, roundMs(time.Since(restarted)))

	// Recovery without restarting a gateway: each process serves a fresh
	// link again.
	fresh := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 3})
	for _, g := range c.Gateways {
		deadline := time.Now().Add(60 * time.Second)
		for {
			r, err := fetch(http.MethodGet, g.On(fresh.URL), nil)
			if err == nil && r.Status == http.StatusOK {
				break
			}
			if err == nil && r.Status != http.StatusServiceUnavailable {
				t.Fatalf("%s after the restart: %v, want 200 or 503", g.Name, r)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not recover within 60 s of the database restart (%v, %v)", g.Name, r, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	t.Logf("all 3 processes served again %v after the restart began", roundMs(time.Since(restarted)))
	time.Sleep(time.Second)
	stop()
	wg.Wait()
	t.Logf("under load: stream answers %s; session answers %s", streams.String(), sessions.String())
	t.Logf("answers by the phase their request started in: %s", phases.String())

	for _, tally := range []*Tally{&streams, &sessions} {
		for _, st := range tally.Statuses() {
			switch st {
			case http.StatusOK, http.StatusCreated, http.StatusPartialContent, http.StatusNotFound,
				http.StatusTooManyRequests, http.StatusServiceUnavailable:
			default:
				t.Errorf("%d answers with status %d (0: no answer) during the database fault; want 200/201/206, 404 (used up), 429 or 503",
					tally.Count(st), st)
			}
		}
	}
	if t.Failed() {
		logErrors(t, c.Gateways) // what each process said went wrong
	}
	if streams.Count(http.StatusOK) == 0 {
		t.Error("no stream download succeeded at all")
	}
	// One wait for the database per request (ledger.Wait): a claim, a
	// refusal's explanation, a mint and its session's reads together
	// wait at most GATEWAY_DB_TIMEOUT.
	frozen, bound := phases.Of("frozen"), chaosDBTimeout+time.Second
	if frozen.Total() < 50 {
		t.Errorf("only %d requests started during the freeze, want 50 or more to judge their waits", frozen.Total())
	}
	if frozen.Slowest() > bound {
		t.Errorf("a request started during the freeze took %v, want at most GATEWAY_DB_TIMEOUT + 1 s = %v", roundMs(frozen.Slowest()), bound)
	}
	for i, l := range links {
		got := checkConsistent(t, admin, l.ID)
		if n := complete[l.ID]; n > got.Grants["granted"] || got.Grants["granted"] > allowance[i] {
			t.Errorf("link %s: %d whole downloads, %d granted, allowance %d: oversold", l.ID, n, got.Grants["granted"], allowance[i])
		}
	}
	checkConsistent(t, admin, slink.ID)
	checkConsistent(t, admin, fresh.ID)

	// The hot link: remaining + grants = allowance, every stream sent
	// under a grant of its own that the ledger holds granted.
	h := checkConsistent(t, admin, hot.ID)
	sent := streamedGrants(t, hot.ID, c.Gateways)
	var twice []string
	for id, n := range sent {
		if n > 1 {
			twice = append(twice, id)
		}
	}
	if len(twice) > 0 {
		t.Errorf("hot link: %d grants each sent to more than one request, first %s", len(twice), twice[0])
	}
	statuses := grantStatuses(t, MustLedgerDB(t, c), slices.Collect(maps.Keys(sent)))
	for id := range sent {
		if statuses[id] != "granted" {
			t.Errorf("hot link: a stream was sent under grant %s, which the ledger has as %q", id, statuses[id])
			break
		}
	}
	if complete[hot.ID] > len(sent) || len(sent) > h.Grants["granted"] {
		t.Errorf("hot link: %d whole bodies received, %d streams sent, %d granted: want received ≤ sent ≤ granted", complete[hot.ID], len(sent), h.Grants["granted"])
	}
	t.Logf("hot link: %d whole bodies received, %d streams sent under %d distinct grants; remaining %d + granted %d = %d of %d (%d refunded)",
		complete[hot.ID], len(sent), len(sent), h.Remaining, h.Grants["granted"], h.Remaining+h.Grants["granted"], h.Downloads, h.Grants["refunded"])
}

func roundMs(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// logErrors logs the ERROR lines of the gateways' logs (at most 20 of
// each), so that a failed chaos check shows its cause.
func logErrors(tb testing.TB, gws []*Gateway) {
	tb.Helper()
	for i, g := range gws {
		b, err := os.ReadFile(g.StderrPath)
		if err != nil {
			tb.Log(err)
			continue
		}
		n := 0
		for line := range strings.Lines(string(b)) {
			if strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, "level=ERROR") {
				if n++; n <= 20 {
					tb.Logf("gateway%d: %s", i+1, strings.TrimSpace(line))
				}
			}
		}
	}
}
