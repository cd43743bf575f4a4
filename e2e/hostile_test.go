package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlgate/dlgate/internal/testenv"
)

// Hostile clients (issue 9): request bodies and headers dripped a byte a
// second. Each must cost the gateway a descriptor for a bounded time and
// never a claim, while everyone else's downloads go on as usual.

// TestDrippingClientsLeaveDescriptorsBoundedAndDownloadsFast runs 2,000
// dripping connections against the embedded default with its default
// limits, and measures the gateway's descriptors and a normal download's
// latency all along.
func TestDrippingClientsLeaveDescriptorsBoundedAndDownloadsFast(t *testing.T) {
	raiseFileLimit(t, 2000+500)
	g := MustStartEmbeddedDefault(t)
	admin := g.Admin()
	obj := admin.MustUpload(t, "hostile/normal.bin", 256<<10)
	normal := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1000})
	target := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 5})
	mint := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 5})
	baseline := openFDs(t, g.Pid())

	fds := startFDSampler(g.Pid(), 100*time.Millisecond)
	downloads := startDownloads(t, g.On(normal.URL), obj, 200*time.Millisecond)

	const perKind = 2000 / 3
	host := g.PublicAddr
	heads := map[string]string{
		// The request of issue 9: GET on a link with a 200,000-byte body.
		"get-body": "GET /d/" + target.Token + " HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 200000\r\n\r\n",
		// A mint whose body never finishes: held until GATEWAY_BODY_TIMEOUT.
		"post-body": "POST /d/" + mint.Token + "/sessions HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 1000\r\n\r\n",
		// Slowloris: headers that never end (ReadHeaderTimeout).
		"headers": "GET /d/" + target.Token + " HTTP/1.1\r\nHost: " + host + "\r\n",
	}
	counts := map[string]int{"get-body": perKind, "post-body": perKind, "headers": 2000 - 2*perKind}
	started := time.Now()
	drips := startDrippers(t, host, heads, counts)
	t.Logf("%d dripping connections open after %v", len(drips.conns), roundMs(time.Since(started)))
	// Every dripper must be answered or closed within the body and
	// header timeouts (10 s each by default), with room to spare.
	drips.wait(t, 20*time.Second)
	settled := time.Since(started)
	time.Sleep(time.Second) // downloads and samples after the storm
	lat := downloads.stop(t)
	peak, series := fds.stop()
	after := waitFDs(t, g.Pid(), baseline+10, 5*time.Second)

	t.Logf("gateway descriptors: %d before, peak %d during the drip, %d after (every 100 ms: %s)",
		baseline, peak, after, series)
	t.Logf("normal downloads during the drip: %d, latency p50 %v, p99 %v, max %v",
		len(lat), pct(lat, 50), pct(lat, 99), pct(lat, 100))
	drips.report(t)
	t.Logf("all %d drippers settled %v after the first connected", len(drips.conns), roundMs(settled))

	drips.check(t, "get-body", 2*time.Second, http.StatusBadRequest)
	drips.check(t, "post-body", 13*time.Second, http.StatusRequestTimeout)
	// Past ReadHeaderTimeout net/http closes the connection, with a 400
	// when the bytes so far are no header line, or without an answer.
	drips.check(t, "headers", 13*time.Second, http.StatusBadRequest, 0)
	if limit := 4096 + baseline; peak > limit {
		t.Errorf("peak of %d descriptors, above GATEWAY_MAX_CONNECTIONS (4096) + the %d before", peak, baseline)
	}
	if after > baseline+10 {
		t.Errorf("%d descriptors after the drippers were answered, %d before: some were kept", after, baseline)
	}
	if len(lat) < 20 {
		t.Errorf("only %d normal downloads completed during the drip", len(lat))
	}
	if m := pct(lat, 100); m >= time.Second {
		t.Errorf("a normal download took %v during the drip, want under 1 s", m)
	}
	// Nothing was claimed by a request that could not be answered.
	admin.checkCounts(t, target.ID, 5, 0, 0)
	admin.checkCounts(t, mint.ID, 5, 0, 0)
}

// TestConnectionLimitQueuesTheRest saturates a gateway whose
// GATEWAY_MAX_CONNECTIONS is 200 with 600 dripping mints: it never holds
// more than 200 of them, the rest wait in the kernel's backlog, and every
// one is answered in turn, nothing claimed.
func TestConnectionLimitQueuesTheRest(t *testing.T) {
	raiseFileLimit(t, 600+200)
	g := MustStartGateways(t, GatewaySpec{Name: "limited", Env: map[string]string{
		"GATEWAY_ADMIN_TOKEN":     randomHex(24),
		"GATEWAY_MAX_CONNECTIONS": "200",
		"GATEWAY_BODY_TIMEOUT":    "2s",
		"GATEWAY_SHUTDOWN_GRACE":  "2s",
	}})[0]
	admin := g.Admin()
	obj := admin.MustUpload(t, "hostile/limited.bin", 64<<10)
	mint := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 5})
	baseline := openFDs(t, g.Pid())
	fds := startFDSampler(g.Pid(), 100*time.Millisecond)
	host := g.PublicAddr
	started := time.Now()
	drips := startDrippers(t, host, map[string]string{
		"post-body": "POST /d/" + mint.Token + "/sessions HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 1000\r\n\r\n",
	}, map[string]int{"post-body": 600})
	drips.wait(t, 30*time.Second)
	t.Logf("600 dripping mints with a limit of 200 and a 2 s body timeout settled after %v", roundMs(time.Since(started)))
	peak, series := fds.stop()
	t.Logf("gateway descriptors: %d before, peak %d (every 100 ms: %s)", baseline, peak, series)
	drips.report(t)
	drips.check(t, "post-body", 20*time.Second, http.StatusRequestTimeout)
	if peak > baseline+200+5 {
		t.Errorf("peak of %d descriptors with GATEWAY_MAX_CONNECTIONS=200 and %d before", peak, baseline)
	}
	checkBody(t, MustFetch(t, http.MethodGet, g.On(admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1}).URL)), obj)
	admin.checkCounts(t, mint.ID, 5, 0, 0)
}

// TestFrozenDatabaseAnswers503WithinTheTimeout freezes the database
// (SIGSTOP: connections open, nothing answers) under one gateway with the
// default GATEWAY_DB_TIMEOUT of 5 s.
func TestFrozenDatabaseAnswers503WithinTheTimeout(t *testing.T) {
	t.Parallel()
	mdb := testenv.StartMariaDB(t)
	c := MustStartCluster(t, ClusterOptions{Processes: 1, Env: map[string]string{"GATEWAY_DB_DSN": mdb.NewDatabase(t)}})
	g, admin := c.Gateways[0], c.Admin()
	obj := admin.MustUpload(t, "hostile/frozen.bin", 4<<10)
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 3})
	checkBody(t, MustFetch(t, http.MethodGet, g.On(link.URL)), obj)

	mdb.Freeze(t)
	var wg sync.WaitGroup
	wg.Go(func() {
		start := time.Now()
		r := MustFetch(t, http.MethodGet, g.On(link.URL))
		took := time.Since(start)
		t.Logf("GET of a link with the database frozen: %d after %v", r.Status, roundMs(took))
		checkProblem(t, r, http.StatusServiceUnavailable, "database-unavailable")
		if took > 8*time.Second {
			t.Errorf("the 503 took %v, want about GATEWAY_DB_TIMEOUT (5 s)", took)
		}
	})
	wg.Go(func() {
		start := time.Now()
		r := MustFetch(t, http.MethodGet, "http://"+g.AdminAddr+"/readyz")
		took := time.Since(start)
		t.Logf("/readyz with the database frozen: %d %s after %v", r.Status, strings.TrimSpace(string(r.Body)), roundMs(took))
		if r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), `"database":"unavailable"`) ||
			!strings.Contains(string(r.Body), `"store":"ok"`) {
			t.Errorf("/readyz = %d %s, want 503 naming the database, and the store ok", r.Status, r.Body)
		}
		if took > 5*time.Second {
			t.Errorf("/readyz took %v, want its 3 s check deadline", took)
		}
	})
	wg.Wait()
	mdb.Thaw()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := MustFetch(t, http.MethodGet, g.On(link.URL))
		if r.Status == http.StatusOK {
			checkBody(t, r, obj)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %v 30 s after the database resumed", r)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The 503 spent nothing: one download before, one after.
	admin.checkCounts(t, link.ID, 1, 2, 0)
}

// raiseFileLimit makes sure this process may open n more descriptors.
func raiseFileLimit(tb testing.TB, n uint64) {
	tb.Helper()
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("open-file limit of the test process: soft %d, hard %d", rl.Cur, rl.Max)
	if rl.Cur >= n+256 {
		return
	}
	if rl.Max < n+256 {
		tb.Skipf("the open-file limit (hard %d) is too low for %d connections", rl.Max, n)
	}
	rl.Cur = rl.Max
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		tb.Fatal(err)
	}
}

// openFDs counts the descriptors process pid holds.
func openFDs(tb testing.TB, pid int) int {
	tb.Helper()
	ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd"))
	if err != nil {
		tb.Skipf("cannot count descriptors: %v", err)
	}
	return len(ents)
}

// waitFDs waits up to d for pid to hold at most want descriptors and
// returns the last count.
func waitFDs(tb testing.TB, pid, want int, d time.Duration) int {
	tb.Helper()
	deadline := time.Now().Add(d)
	for {
		n := openFDs(tb, pid)
		if n <= want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fdSampler counts a process's descriptors at an interval.
type fdSampler struct {
	stopc   chan struct{}
	done    chan struct{}
	samples []int
}

func startFDSampler(pid int, every time.Duration) *fdSampler {
	s := &fdSampler{stopc: make(chan struct{}), done: make(chan struct{})}
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	go func() {
		defer close(s.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if ents, err := os.ReadDir(dir); err == nil {
				s.samples = append(s.samples, len(ents))
			}
			select {
			case <-s.stopc:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// stop returns the peak and the series, every tenth sample.
func (s *fdSampler) stop() (int, string) {
	close(s.stopc)
	<-s.done
	var b strings.Builder
	for i, n := range s.samples {
		if i%10 == 0 {
			fmt.Fprintf(&b, "%d ", n)
		}
	}
	return slices.Max(append(s.samples, 0)), strings.TrimSpace(b.String())
}

// downloader fetches a link over a fresh connection at an interval (each
// through accept, as a new client would) and records the latencies.
type downloader struct {
	stopc chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	lat   []time.Duration
	errs  []string
}

func startDownloads(tb testing.TB, url string, obj *Object, every time.Duration) *downloader {
	d := &downloader{stopc: make(chan struct{}), done: make(chan struct{})}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, DisableCompression: true}, Timeout: 30 * time.Second}
	go func() {
		defer close(d.done)
		for {
			start := time.Now()
			resp, err := client.Get(url)
			var body []byte
			if err == nil {
				body, err = io.ReadAll(resp.Body)
				resp.Body.Close()
			}
			took := time.Since(start)
			d.mu.Lock()
			switch {
			case err != nil:
				d.errs = append(d.errs, err.Error())
			case resp.StatusCode != http.StatusOK || len(body) != len(obj.Data):
				d.errs = append(d.errs, fmt.Sprintf("%d with %d bytes", resp.StatusCode, len(body)))
			default:
				d.lat = append(d.lat, took)
			}
			d.mu.Unlock()
			select {
			case <-d.stopc:
				return
			case <-time.After(every):
			}
		}
	}()
	return d
}

func (d *downloader) stop(tb testing.TB) []time.Duration {
	tb.Helper()
	close(d.stopc)
	<-d.done
	if len(d.errs) > 0 {
		tb.Errorf("%d normal downloads failed during the drip, first: %s", len(d.errs), d.errs[0])
	}
	return d.lat
}

func pct(lat []time.Duration, p int) time.Duration {
	if len(lat) == 0 {
		return 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	return roundMs(s[min(len(s)-1, len(s)*p/100)])
}

// drip is one dripping connection and how it ended.
type drip struct {
	kind   string
	conn   net.Conn
	start  time.Time
	status int // 0: closed without an answer
	took   time.Duration
	err    error
}

// drippers are connections that sent a request head and then send one
// byte a second, as long as the gateway lets them.
type drippers struct {
	conns []*drip
	wg    sync.WaitGroup
	stopc chan struct{}
}

// startDrippers opens counts[kind] connections for each kind, sending
// heads[kind] on each, then a byte a second on all of them.
func startDrippers(tb testing.TB, addr string, heads map[string]string, counts map[string]int) *drippers {
	tb.Helper()
	ds := &drippers{stopc: make(chan struct{})}
	var kinds []string
	for kind, n := range counts {
		for range n {
			kinds = append(kinds, kind)
		}
	}
	// Interleave the kinds, as an attack from many clients would.
	for i := range kinds {
		j := (i * 7919) % len(kinds)
		kinds[i], kinds[j] = kinds[j], kinds[i]
	}
	ds.conns = make([]*drip, len(kinds))
	var dialWG sync.WaitGroup
	var mu sync.Mutex
	var dialErr error
	next := make(chan int)
	for range 64 {
		dialWG.Go(func() {
			for i := range next {
				d := &drip{kind: kinds[i], start: time.Now()}
				ds.conns[i] = d
				c, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err == nil {
					_, err = io.WriteString(c, heads[d.kind])
				}
				if err != nil {
					mu.Lock()
					dialErr = err
					mu.Unlock()
					d.err = err
					continue
				}
				d.conn = c
				ds.wg.Go(func() { d.await() })
			}
		})
	}
	for i := range kinds {
		next <- i
	}
	close(next)
	dialWG.Wait()
	if dialErr != nil {
		tb.Errorf("opening dripping connections: %v", dialErr)
	}
	// One writer sends the next byte on every open connection each second.
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ds.stopc:
				return
			case <-t.C:
			}
			for _, d := range ds.conns {
				if d.conn != nil {
					d.conn.SetWriteDeadline(time.Now().Add(10 * time.Millisecond)) //nolint:errcheck // TCP
					d.conn.Write([]byte{'x'})                                      //nolint:errcheck // closed ones fail
				}
			}
		}
	}()
	tb.Cleanup(func() {
		ds.stopAll()
		for _, d := range ds.conns {
			if d.conn != nil {
				d.conn.Close()
			}
		}
	})
	return ds
}

// await reads the answer, or the close, of one dripping connection.
func (d *drip) await() {
	d.conn.SetReadDeadline(time.Now().Add(40 * time.Second)) //nolint:errcheck // bounded test
	method, _, _ := strings.Cut(d.kind, "-")
	resp, err := http.ReadResponse(bufio.NewReader(d.conn), &http.Request{Method: strings.ToUpper(method)})
	d.took = time.Since(d.start)
	if err != nil {
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			d.err = err
		}
		return
	}
	resp.Body.Close()
	d.status = resp.StatusCode
}

func (ds *drippers) stopAll() {
	select {
	case <-ds.stopc:
	default:
		close(ds.stopc)
	}
}

// wait waits until every connection was answered or closed, at most d.
func (ds *drippers) wait(tb testing.TB, d time.Duration) {
	tb.Helper()
	done := make(chan struct{})
	go func() { ds.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
		tb.Errorf("dripping connections still open after %v", d)
	}
	ds.stopAll()
}

// report logs, per kind, the answers and how long they took.
func (ds *drippers) report(tb testing.TB) {
	tb.Helper()
	type agg struct {
		statuses map[int]int
		took     []time.Duration
	}
	by := map[string]*agg{}
	for _, d := range ds.conns {
		a := by[d.kind]
		if a == nil {
			a = &agg{statuses: map[int]int{}}
			by[d.kind] = a
		}
		a.statuses[d.status]++
		a.took = append(a.took, d.took)
	}
	for kind, a := range by {
		tb.Logf("%s drippers: answers %v (0: closed without one), after p50 %v, max %v",
			kind, a.statuses, pct(a.took, 50), pct(a.took, 100))
	}
}

// check demands that every dripper of kind got one of statuses (0: the
// connection was closed without an answer) within bound.
func (ds *drippers) check(tb testing.TB, kind string, bound time.Duration, statuses ...int) {
	tb.Helper()
	bad := 0
	for _, d := range ds.conns {
		if d.kind != kind {
			continue
		}
		if d.err != nil || !slices.Contains(statuses, d.status) || d.took > bound {
			if bad == 0 {
				tb.Errorf("%s dripper: status %d after %v (err %v), want one of %v within %v", kind, d.status, d.took, d.err, statuses, bound)
			}
			bad++
		}
	}
	if bad > 1 {
		tb.Errorf("%d %s drippers in all ended otherwise", bad, kind)
	}
}
