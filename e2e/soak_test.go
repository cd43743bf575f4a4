//go:build soak

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlgate/dlgate/internal/testenv"
)

// TestSoak is `make soak` (scripts/soak.sh), never part of `make test`:
// SOAK_DURATION (default 10m) of mixed load on three gateway processes,
// MariaDB and versitygw, with a fault every SOAK_FAULT_EVERY (default 1m),
// in turn: kill -9 of a gateway and its restart, versitygw frozen
// (SIGSTOP) for 5 s, MariaDB frozen for 5 s. It ends with the ledger's
// invariant over every link and a memory and descriptor report per
// process.
func TestSoak(t *testing.T) {
	duration := envDuration(t, "SOAK_DURATION", 10*time.Minute)
	every := envDuration(t, "SOAK_FAULT_EVERY", time.Minute)
	s3 := testenv.StartS3(t)
	mdb := testenv.StartMariaDB(t)
	c := MustStartCluster(t, ClusterOptions{Processes: 3, S3: s3, Env: chaosEnv(map[string]string{
		"GATEWAY_DB_DSN":    mdb.NewDatabase(t),
		"GATEWAY_LOG_LEVEL": "info",
	})})
	admin := c.Admin()
	objs := []*Object{
		admin.MustUpload(t, "soak/small.bin", 64<<10),
		admin.MustUpload(t, "soak/medium.bin", 2<<20),
		admin.MustUpload(t, "soak/large.bin", 16<<20),
	}
	l := &soakLoad{t: t, c: c, admin: admin, objs: objs, slow: MustStartBalancer(t, 1<<20)}
	l.slow.SetBackends(c.Balancer.Backends()...)
	for range 4 {
		l.newLink("stream")
		l.newLink("session")
	}
	report := func(when string) {
		t.Logf("%s: %s", when, procReport(c, s3, mdb))
	}
	report("start")

	ctx, stop := context.WithTimeout(context.Background(), duration)
	defer stop()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { l.streams(ctx) })
	}
	for range 2 {
		wg.Go(func() { l.sessions(ctx) })
	}
	wg.Go(func() { l.slowDownloads(ctx) })
	wg.Go(func() { l.links(ctx) })

	start := time.Now()
	faults := []func(int){
		func(n int) {
			g := c.Gateways[n%len(c.Gateways)]
			g.Kill(t)
			restartGateway(t, g)
			l.note("kill -9 %s and restart", g.Name)
		},
		func(int) {
			s3.Freeze(t)
			time.Sleep(5 * time.Second)
			s3.Thaw()
			l.note("versitygw frozen 5 s")
		},
		func(int) {
			mdb.Freeze(t)
			time.Sleep(5 * time.Second)
			mdb.Thaw()
			l.note("MariaDB frozen 5 s")
		},
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for n := 0; ; n++ {
		select {
		case <-ctx.Done():
		case <-tick.C:
			if time.Until(start.Add(duration)) > 10*time.Second {
				faults[n%len(faults)](n / len(faults))
				report(fmt.Sprintf("%v, after the fault", roundMs(time.Since(start))))
				t.Logf("answers so far: %s; slow downloads %s; %d transfers cut", l.tally.String(), l.slowT.String(), l.cut.Load())
			}
			continue
		}
		break
	}
	wg.Wait()
	t.Logf("load ended after %v: %s; slow downloads %s; %d transfers cut", roundMs(time.Since(start)), l.tally.String(), l.slowT.String(), l.cut.Load())

	// Let running responses and lapsed leases settle, then check every link.
	time.Sleep(chaosLease + time.Second)
	l.mu.Lock()
	ids := append([]string(nil), l.ids...)
	l.mu.Unlock()
	var granted, refunded, claims int
	for _, id := range ids {
		got := checkConsistent(t, admin, id)
		granted += got.Grants["granted"]
		refunded += got.Grants["refunded"]
		l.mu.Lock()
		whole := l.whole[id]
		l.mu.Unlock()
		if whole > got.Grants["granted"] {
			t.Errorf("link %s: %d whole downloads but %d grants: oversold", id, whole, got.Grants["granted"])
		}
		claims += got.Grants["granted"] + got.Grants["refunded"]
	}
	t.Logf("consistency: %d links, %d claims (%d granted, %d refunded): grants = allowance − remaining on every link", len(ids), claims, granted, refunded)
	for _, st := range l.tally.Statuses() {
		if st == http.StatusInternalServerError {
			t.Errorf("%d answers were 500", l.tally.Count(st))
		}
	}
	report("end")
	t.Logf("faults: %s", strings.Join(l.faults, "; "))
}

// soakLoad is the mixed load: stream downloads, sessions with ranges,
// slow downloads that faults catch mid-transfer, and link creation.
type soakLoad struct {
	t     *testing.T
	c     *Cluster
	admin *Admin
	objs  []*Object
	slow  *Balancer
	tally Tally // every answer but the slow downloads'
	slowT Tally // the slow downloads'
	cut   atomic.Int64

	mu       sync.Mutex
	ids      []string
	streamL  []*Link
	sessionL []*Link
	byLink   map[string]*Object
	whole    map[string]int // link id → whole bodies received
	faults   []string
}

func (l *soakLoad) note(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.faults = append(l.faults, fmt.Sprintf(format, args...))
}

// newLink creates a link on a random object through the admin API of
// any process; during a fault that may fail, which is not an error.
func (l *soakLoad) newLink(delivery string) bool {
	obj := l.objs[rand.IntN(len(l.objs))]
	req := LinkRequest{Object: ObjectRef{Key: obj.Key, VersionID: obj.VersionID}, Downloads: 50, ExpiresIn: 3600}
	if delivery == "session" {
		req.Session = &SessionSettings{MaxConcurrency: 2}
	}
	g := l.c.Gateways[rand.IntN(len(l.c.Gateways))]
	r, err := fetch(http.MethodPost, g.Admin().Base+"/v1/links", mustJSONBody(req), "Authorization", "Bearer "+l.admin.Token, "Content-Type", "application/json")
	if err != nil || r.Status != http.StatusCreated {
		return false
	}
	var link Link
	if !jsonInto(r.Body, &link) {
		return false
	}
	noteToken(link.URL)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byLink == nil {
		l.byLink, l.whole = map[string]*Object{}, map[string]int{}
	}
	l.ids = append(l.ids, link.ID)
	l.byLink[link.ID] = obj
	if delivery == "session" {
		l.sessionL = append(l.sessionL, &link)
	} else {
		l.streamL = append(l.streamL, &link)
	}
	return true
}

// count notes a whole download of link, or a cut one; a whole body that is
// not the object is an error.
func (l *soakLoad) count(link *Link, obj *Object, status int, body []byte, bodyErr error) {
	switch {
	case status != http.StatusOK:
	case bodyErr != nil:
		l.cut.Add(1)
	case !bytes.Equal(body, obj.Data):
		l.t.Errorf("link %s: a whole %d-byte body that is not the object", link.ID, len(body))
	default:
		l.mu.Lock()
		l.whole[link.ID]++
		l.mu.Unlock()
	}
}

func (l *soakLoad) pick(session bool) (*Link, *Object) {
	l.mu.Lock()
	defer l.mu.Unlock()
	pool := l.streamL
	if session {
		pool = l.sessionL
	}
	// The newest links are the ones with allowance left.
	link := pool[len(pool)-1-rand.IntN(min(len(pool), 6))]
	return link, l.byLink[link.ID]
}

func (l *soakLoad) streams(ctx context.Context) {
	for ctx.Err() == nil {
		link, obj := l.pick(false)
		start := time.Now()
		r, err := fetch(http.MethodGet, l.c.PublicURL+"/d/"+link.Token, nil)
		if err != nil {
			l.tally.Add(0, time.Since(start))
			continue
		}
		l.tally.Add(r.Status, time.Since(start))
		l.count(link, obj, r.Status, r.Body, r.BodyErr)
		sleepCtx(ctx, 100*time.Millisecond)
	}
}

func (l *soakLoad) sessions(ctx context.Context) {
	for ctx.Err() == nil {
		link, obj := l.pick(true)
		start := time.Now()
		r, err := fetch(http.MethodPost, l.c.PublicURL+"/d/"+link.Token+"/sessions", nil)
		if err != nil {
			l.tally.Add(0, time.Since(start))
			continue
		}
		l.tally.Add(r.Status, time.Since(start))
		var s Session
		if r.Status != http.StatusCreated || !jsonInto(r.Body, &s) {
			sleepCtx(ctx, 200*time.Millisecond)
			continue
		}
		noteToken(s.SessionURL)
		for range 4 {
			from := rand.IntN(len(obj.Data))
			to := min(len(obj.Data)-1, from+rand.IntN(1<<20))
			start := time.Now()
			rr, err := fetch(http.MethodGet, s.SessionURL, nil, "Range", fmt.Sprintf("bytes=%d-%d", from, to))
			if err != nil {
				l.tally.Add(0, time.Since(start))
				continue
			}
			l.tally.Add(rr.Status, time.Since(start))
			switch {
			case rr.Status != http.StatusPartialContent:
			case rr.BodyErr != nil:
				l.cut.Add(1)
			case !bytes.Equal(rr.Body, obj.Data[from:to+1]):
				l.t.Errorf("session %s range %d-%d: %d bytes that are not the object's", s.SessionID, from, to, len(rr.Body))
			}
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

// slowDownloads keeps one download of the large object running on a slow
// network, so that every fault finds a transfer in flight.
func (l *soakLoad) slowDownloads(ctx context.Context) {
	for ctx.Err() == nil {
		link, obj := l.pick(false)
		d := StartDownload("slow", l.slow.On(link.URL))
		select {
		case <-d.Done():
		case <-ctx.Done():
			return
		}
		l.slowT.Add(d.Status, d.Ended.Sub(d.start))
		l.count(link, obj, d.Status, d.Body, d.BodyErr)
	}
}

// links creates links as the load uses them up.
func (l *soakLoad) links(ctx context.Context) {
	for ctx.Err() == nil {
		sleepCtx(ctx, 2*time.Second)
		l.newLink("stream")
		l.newLink("session")
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func mustJSONBody(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// restartGateway starts g again after a kill: the same binary, arguments,
// environment (and so the same listen addresses) and directory, its logs
// appended to the same files.
func restartGateway(tb testing.TB, g *Gateway) {
	tb.Helper()
	old := g.Cmd
	var err error
	for range 10 {
		if err = relaunch(g, old); err == nil {
			return
		}
		if !errors.Is(err, errPortTaken) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	tb.Fatalf("restarting %s: %v\n%s", g.Name, err, tail(g.StderrPath, 20))
}

func relaunch(g *Gateway, old *exec.Cmd) error {
	open := func(path string) (*os.File, error) {
		return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	}
	stdout, err := open(g.StdoutPath)
	if err != nil {
		return err
	}
	defer stdout.Close()
	stderr, err := open(g.StderrPath)
	if err != nil {
		return err
	}
	defer stderr.Close()
	cmd := exec.Command(old.Path, old.Args[1:]...)
	cmd.Dir, cmd.Env = old.Dir, old.Env
	cmd.Stdout, cmd.Stderr = stdout, stderr
	p, err := testenv.StartProc(cmd)
	if err != nil {
		return err
	}
	g.Proc = p
	return g.waitReady()
}

// procReport names each process's resident memory and open descriptors,
// from /proc.
func procReport(c *Cluster, s3 *testenv.S3, mdb *testenv.MariaDB) string {
	var parts []string
	for _, g := range c.Gateways {
		parts = append(parts, g.Name+" "+procStats(g.Pid()))
	}
	parts = append(parts, "versitygw "+procStats(s3.Pid()), "mariadbd "+procStats(mdb.Pid()))
	return strings.Join(parts, ", ")
}

func procStats(pid int) string {
	rss := "?"
	if f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status")); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				rss = strings.TrimSpace(v)
			}
		}
		f.Close()
	}
	fds := "?"
	if ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "fd")); err == nil {
		fds = strconv.Itoa(len(ents))
	}
	return fmt.Sprintf("(pid %d) RSS %s, %s fds", pid, rss, fds)
}

func envDuration(tb testing.TB, name string, def time.Duration) time.Duration {
	tb.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		tb.Fatalf("%s=%q: want a positive duration like 10m", name, v)
	}
	return d
}
