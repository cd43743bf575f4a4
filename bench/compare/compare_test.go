// Package compare runs the table of issue 8 in one go: the gateway and
// what it is measured against (nginx with sendfile, a direct GET from the
// same versitygw, the claim's statements in a plain Go loop), on private
// servers, alternated round by round so that both sides see the same
// machine. Ranges and unknown tokens have a third side, the net/http
// floor: bench/cmd/floor, the least a Go net/http server does for the
// same requests, so that the gateway's share of the gap to nginx shows
// apart from net/http's. Run it with `make bench-compare`
// (scripts/bench-compare.sh); QUICK=1 for a short run. It prints a
// Markdown table (medians with the range of the rounds) and writes it,
// with a CPU profile of the gateway on the S3 path, to $BENCH_OUT.
//
// BenchmarkCompare skips unless BENCH_COMPARE=1, so `make bench` and
// `go test` stay quick.
package compare

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"fmt"
	mathrand "math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	_ "github.com/go-sql-driver/mysql"

	"github.com/dlgate/dlgate/bench/loadgen"
	"github.com/dlgate/dlgate/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// plan is how much each case does; QUICK=1 shrinks it.
type plan struct {
	rounds         int           // alternated rounds per case
	largeClients   int           // concurrent 1 GiB downloads
	largeDownloads int           // 1 GiB downloads per side and round
	claims         int           // distinct links claimed per side and round
	hotClaims      int           // claims of the hot link per round
	singleClaims   int           // distinct links claimed by one client per side and round
	rangeTime      time.Duration // per side and round
	shortTime      time.Duration // unknown tokens, per side and round
	memoryTime     time.Duration // 200 concurrent S3 downloads
	profile        time.Duration // CPU profiles (S3 path, claims, unknown tokens); 0: none
	out            string        // where results go
	only           []string      // rows to run (BENCH_ONLY); empty: all
}

// runs reports whether any of the rows is to run: BENCH_ONLY is a
// comma-separated list of fs, s3, claims (claims-distinct, claims-3p,
// claims-hot, claims-hot-3p, claims-hot-3p-apart, claims-single), refusals (refusals-distinct,
// refusals-spent), ranges64k, ranges1m, unknown, memory, and the TLS rows
// (tls_test.go) tls-h1, tls-h2, tls-h2-single, tls-ranges64k, s3-https, memory-https.
func (p plan) runs(rows ...string) bool {
	if len(p.only) == 0 {
		return true
	}
	for _, r := range rows {
		if slices.Contains(p.only, r) {
			return true
		}
	}
	return false
}

func newPlan(tb testing.TB) plan {
	p := plan{rounds: 5, largeClients: 4, largeDownloads: 8, claims: 2000, hotClaims: 20000, singleClaims: 300,
		rangeTime: 2 * time.Second, shortTime: 2 * time.Second, memoryTime: 4 * time.Second, profile: 5 * time.Second}
	if os.Getenv("QUICK") == "1" {
		p = plan{rounds: 2, largeClients: 4, largeDownloads: 4, claims: 600, hotClaims: 8000, singleClaims: 150,
			rangeTime: time.Second, shortTime: time.Second, memoryTime: 3 * time.Second}
	}
	if n, err := strconv.Atoi(os.Getenv("BENCH_LARGE_CLIENTS")); err == nil && n > 0 {
		p.largeClients = n
	}
	if n, err := strconv.Atoi(os.Getenv("BENCH_ROUNDS")); err == nil && n > 0 {
		p.rounds = n
	}
	switch os.Getenv("BENCH_PROFILE") {
	case "0":
		p.profile = 0
	case "1":
		p.profile = 5 * time.Second
	}
	for _, r := range strings.Split(os.Getenv("BENCH_ONLY"), ",") {
		if r = strings.TrimSpace(r); r != "" {
			p.only = append(p.only, r)
		}
	}
	p.out = os.Getenv("BENCH_OUT")
	if p.out == "" {
		p.out = tb.TempDir()
	}
	if err := os.MkdirAll(p.out, 0o755); err != nil {
		tb.Fatal(err)
	}
	return p
}

var ran atomic.Bool

// BenchmarkCompare is the whole comparison, once (-benchtime 1x).
func BenchmarkCompare(b *testing.B) {
	if os.Getenv("BENCH_COMPARE") != "1" {
		b.Skip("the side-by-side comparison runs with `make bench-compare` (BENCH_COMPARE=1)")
	}
	if !ran.CompareAndSwap(false, true) {
		return // once per process, whatever b.N
	}
	b.StopTimer()
	p := newPlan(b)
	start, load := time.Now(), loadAverage()
	e := setup(b, p)
	rep := &report{}

	// The S3 gateway first, alone; then the fs gateway, alone, so that
	// MariaDB's statement counter sees one gateway only.
	var s3Row, memRow row
	if p.runs("s3", "memory") {
		s3 := e.startS3Gateway(b)
		if p.runs("s3") {
			s3Row = e.s3Large(b, s3)
			e.profileS3(b, s3)
		}
		if p.runs("memory") {
			memRow = e.memory(b, s3)
		}
		s3.stop()
	}

	if p.runs(append([]string{"fs", "claims", "refusals", "ranges64k", "ranges1m", "unknown"}, append(claimRows, refusalRows...)...)...) {
		fs := e.startFSGateway(b)
		if p.runs("fs") {
			rep.add(e.fsLarge(b, fs))
		}
		if p.runs("s3") {
			rep.add(s3Row)
		}
		e.claimRowsOf(b, fs, rep)
		if p.runs("ranges64k") {
			rep.add(e.ranges(b, fs, 64<<10))
		}
		if p.runs("ranges1m") {
			rep.add(e.ranges(b, fs, 1<<20))
		}
		if p.runs("unknown") {
			rep.add(e.unknownToken(b, fs))
		}
		e.profileFS(b, fs)
	} else if p.runs("s3") {
		rep.add(s3Row)
	}
	if p.runs("memory") {
		rep.add(memRow)
	}
	e.tlsRows(b, rep)
	if p.runs("ranges64k", "ranges1m", "unknown") {
		rep.note("\nnet/http alone: bench/cmd/floor, a Go net/http server with a ServeMux and nothing else (no database, no logging): " +
			"the gateway's 404 with its headers and a body of the same length, ranges of the same file through http.ServeContent (sendfile); " +
			"the same clients, alternated with the other two sides.")
	}
	rep.note("\n%d alternated rounds per row, medians with the range of the rounds; %s; %v in all.",
		p.rounds, machine(load), time.Since(start).Round(time.Second))

	md := rep.markdown("Measured by `make bench-compare`" + map[bool]string{true: " (QUICK=1)", false: ""}[os.Getenv("QUICK") == "1"])
	fmt.Println("\n" + md)
	path := filepath.Join(p.out, "bench-compare.md")
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		b.Fatal(err)
	}
	fmt.Printf("table written to %s\n", path)
}

// machine names the cores, and the load averages before and after the
// run: other work on the machine skews both sides, if less their ratio.
func machine(load string) string {
	out, _ := exec.Command("sh", "-c", `echo "$(nproc) cores,$(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2)"`).Output()
	return fmt.Sprintf("%s; load average %s before the run, %s after", strings.TrimSpace(string(out)), load, loadAverage())
}

func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// bench is the servers and data every case uses.
type bench struct {
	plan      plan
	db        *testenv.MariaDB
	s3        *testenv.S3
	bucket    string
	nginx     *nginx
	gateway   string // binary
	floor     *floor // net/http alone, serving www
	www       string // nginx's and the floor's root: big.bin, ranges.bin, small.bin
	q         questions
	client    *http.Client
	ctx       context.Context
	directURL string // presigned GET of big.bin on versitygw
}

const (
	bigSize    = 1 << 30
	rangesSize = 64 << 20
	smallSize  = 1 << 10
)

func setup(b *testing.B, p plan) *bench {
	say("starting MariaDB, versitygw and nginx; building the gateway and the net/http floor; writing 1 GiB of data")
	e := &bench{plan: p, ctx: context.Background(), client: loadgen.NewClient(64)}
	e.db = testenv.StartMariaDB(b)
	e.s3 = testenv.StartS3(b)
	e.bucket = e.s3.NewBucket(b, true)
	www, err := os.MkdirTemp("", "dlgate-bench-www-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(www) })
	// nginx's workers may run as another user: the files must be theirs
	// to read.
	if err := os.Chmod(www, 0o755); err != nil {
		b.Fatal(err)
	}
	e.www = www
	writeData(b, filepath.Join(www, "big.bin"), bigSize, 1)
	writeData(b, filepath.Join(www, "ranges.bin"), rangesSize, 2)
	writeData(b, filepath.Join(www, "small.bin"), smallSize, 3)
	e.nginx = startNginx(b, www)
	e.gateway = build(b, "./cmd/gateway")
	e.floor = startFloor(b, build(b, "./bench/cmd/floor"), www)
	db, err := sql.Open("mysql", e.db.DSN(""))
	if err != nil {
		b.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	b.Cleanup(func() { db.Close() })
	e.q = questions{db: db}
	return e
}

func say(format string, args ...any) {
	fmt.Printf("# "+format+"\n", args...)
}

func (e *bench) mysqlEnv(b *testing.B) map[string]string {
	return map[string]string{"GATEWAY_DB_DRIVER": "mysql", "GATEWAY_DB_DSN": e.db.NewDatabase(b)}
}

func (e *bench) startS3Gateway(b *testing.B) *gatewayProc {
	env := e.mysqlEnv(b)
	for k, v := range map[string]string{
		"GATEWAY_STORE": "s3", "GATEWAY_S3_BUCKET": e.bucket, "GATEWAY_S3_ENDPOINT": e.s3.Endpoint,
		"GATEWAY_S3_REGION": e.s3.Region, "GATEWAY_S3_PATH_STYLE": "true",
		"AWS_ACCESS_KEY_ID": e.s3.AccessKey, "AWS_SECRET_ACCESS_KEY": e.s3.SecretKey,
	} {
		env[k] = v
	}
	g := startGateway(b, e.gateway, env)
	say("uploading 1 GiB through the gateway into versitygw")
	g.upload(b, "big.bin", filepath.Join(e.www, "big.bin"))
	ps, err := awss3.NewPresignClient(e.s3.Client()).PresignGetObject(e.ctx,
		&awss3.GetObjectInput{Bucket: aws.String(e.bucket), Key: aws.String("big.bin")},
		awss3.WithPresignExpires(6*time.Hour))
	if err != nil {
		b.Fatal(err)
	}
	e.directURL = ps.URL
	return g
}

func (e *bench) startFSGateway(b *testing.B) *gatewayProc {
	env := e.mysqlEnv(b)
	env["GATEWAY_STORE"] = "fs"
	// The spent-link row speaks for a crowd through X-Forwarded-For.
	env["GATEWAY_TRUSTED_PROXIES"] = "127.0.0.1/32"
	g := startGateway(b, e.gateway, env)
	say("uploading 1 GiB, 64 MiB and 1 KiB through the gateway into its fs store")
	for _, name := range []string{"big.bin", "ranges.bin", "small.bin"} {
		g.upload(b, name, filepath.Join(e.www, name))
	}
	return g
}

func get(url string) func(int, int64) *http.Request {
	return func(int, int64) *http.Request {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		return req
	}
}

// alternate runs n rounds of gateway and reference, in turns first, with
// prepare (when not nil) before each round.
func alternate(n int, prepare func(), gw, ref func() sample) (series, series) {
	s := rotate(n, prepare, gw, ref)
	return s[0], s[1]
}

// rotate runs n rounds of the sides, round i starting with side i mod
// their number, with prepare (when not nil) before each round; it
// returns each side's series in the order given.
func rotate(n int, prepare func(), sides ...func() sample) []series {
	out := make([]series, len(sides))
	for i := range n {
		if prepare != nil {
			prepare()
		}
		for j := range sides {
			k := (i + j) % len(sides)
			out[k] = append(out[k], sides[k]())
		}
	}
	return out
}

// withFloor adds the net/http floor to r: its metric after nginx's in the
// reference column, as a fraction of nginx's, and the gateway's fraction
// of it after the ratio. f formats the metric, unit follows it.
func withFloor(r *row, gw, ref, fl series, metric, f, unit string) {
	r.reference += "; net/http alone (bench/cmd/floor) " + fl.stat(metric).format(f) + unit + " = " +
		ratios(fl, metric, ref, metric).stat("r").format("%.2f") + "× nginx"
	r.ratio += "; gateway / net/http alone " + ratios(gw, metric, fl, metric).stat("r").format("%.2f")
}

// download runs the plan's 1 GiB downloads of url and measures the
// throughput and the CPU time per GiB of each group of processes.
func (e *bench) download(b *testing.B, url string, groups map[string][]int) sample {
	if groups != nil {
		// The client is this process: the same on both sides.
		groups["client"] = []int{os.Getpid()}
	}
	before := map[string]float64{}
	for g, pids := range groups {
		before[g] = cpuSeconds(pids...)
	}
	res := loadgen.Run(e.ctx, e.client, loadgen.Config{
		Clients: e.plan.largeClients, Requests: int64(e.plan.largeDownloads), Duration: 3 * time.Minute, Request: get(url),
	})
	if res.Failed > 0 || res.Status(http.StatusOK) != int64(e.plan.largeDownloads) || res.Bytes != int64(e.plan.largeDownloads)*bigSize {
		b.Errorf("GET %s: %v", url, res)
	}
	s := sample{"GBps": res.Throughput() / 1e9}
	gib := float64(res.Bytes) / (1 << 30)
	for g, pids := range groups {
		s["cpu."+g] = (cpuSeconds(pids...) - before[g]) / gib
	}
	return s
}

// warm downloads each URL once, so that files are in the page cache and
// connections are open before anything is measured.
func (e *bench) warm(b *testing.B, urls ...string) {
	for _, url := range urls {
		res := loadgen.Run(e.ctx, e.client, loadgen.Config{Clients: 1, Requests: 1, Duration: time.Minute, Request: get(url)})
		if res.Status(http.StatusOK) != 1 {
			b.Fatalf("GET %s: %v", url, res)
		}
	}
}

func (e *bench) fsLarge(b *testing.B, fs *gatewayProc) row {
	say("1 GiB from the fs store vs nginx sendfile")
	l := fs.mustLink(b, "big.bin", `"downloads":1000000`)
	nginxURL := e.nginx.URL + "/big.bin"
	e.warm(b, l.URL, nginxURL) // page cache, connections
	gw, ref := alternate(e.plan.rounds, nil,
		func() sample { return e.download(b, l.URL, map[string][]int{"gw": {fs.Pid()}}) },
		func() sample { return e.download(b, nginxURL, map[string][]int{"nginx": e.nginx.pids()}) })
	return row{
		work:      fmt.Sprintf("1 GiB, fs store (%d concurrent downloads)", e.plan.largeClients),
		gateway:   gw.stat("GBps").format("%.2f") + " GB/s, " + gw.stat("cpu.gw").format("%.2f") + " CPU-s/GiB",
		reference: "nginx sendfile " + ref.stat("GBps").format("%.2f") + " GB/s, " + ref.stat("cpu.nginx").format("%.2f") + " CPU-s/GiB",
		ratio:     ratios(gw, "GBps", ref, "GBps").stat("r").format("%.2f"),
		before:    "2.72 vs 2.08 GB/s: 1.31",
	}
}

// s3Large compares a download through the gateway with a direct GET (a
// presigned URL, the same client) from the same versitygw. CPU: the
// gateway's and versitygw's per GiB against versitygw's alone, since
// serving through the gateway costs both processes.
func (e *bench) s3Large(b *testing.B, s3 *gatewayProc) row {
	say("1 GiB from the S3 store vs a direct GET from versitygw")
	l := s3.mustLink(b, "big.bin", `"downloads":1000000`)
	vgw := e.s3.Pid()
	e.warm(b, l.URL, e.directURL)
	gw, ref := alternate(e.plan.rounds, nil,
		func() sample {
			s := e.download(b, l.URL, map[string][]int{"gw": {s3.Pid()}, "vgw": {vgw}})
			s["cpu.both"] = s["cpu.gw"] + s["cpu.vgw"]
			return s
		},
		func() sample { return e.download(b, e.directURL, map[string][]int{"vgw": {vgw}}) })
	return row{
		work: fmt.Sprintf("1 GiB, S3 store (%d concurrent downloads)", e.plan.largeClients),
		gateway: gw.stat("GBps").format("%.2f") + " GB/s; CPU-s/GiB: gateway " + gw.stat("cpu.gw").format("%.2f") +
			" + versitygw " + gw.stat("cpu.vgw").format("%.2f") + " = " + gw.stat("cpu.both").format("%.2f"),
		reference: "direct GET from the same versitygw " + ref.stat("GBps").format("%.2f") + " GB/s, versitygw " +
			ref.stat("cpu.vgw").format("%.2f") + " CPU-s/GiB",
		ratio: ratios(gw, "GBps", ref, "GBps").stat("r").format("%.2f") + "; CPU (gateway + versitygw) / versitygw direct: " +
			ratios(gw, "cpu.both", ref, "cpu.vgw").stat("r").format("%.1f×") + "; gateway alone / versitygw direct: " +
			ratios(gw, "cpu.gw", ref, "cpu.vgw").stat("r").format("%.1f×"),
		before: "1.01 GB/s, 0.94 CPU-s/GiB vs 2.58 GB/s, 0.22: 0.39, 4.3× the CPU",
		notes: []string{fmt.Sprintf("S3 row: the client (this bench, one process for both sides) used %s CPU-s/GiB through the gateway and %s direct; "+
			"client, gateway and versitygw share the cores, so throughput follows the sum of their CPU per GiB.",
			gw.stat("cpu.client").format("%.2f"), ref.stat("cpu.client").format("%.2f"))},
	}
}

// memory holds 200 S3 downloads open at once and reports the gateway's
// largest resident memory meanwhile.
func (e *bench) memory(b *testing.B, s3 *gatewayProc) row {
	say("200 concurrent S3 downloads: the gateway's memory")
	l := s3.mustLink(b, "big.bin", `"downloads":1000000`)
	idle := rss(s3.Pid())
	stop := make(chan struct{})
	peak := make(chan int64, 1)
	go func() { peak <- peakRSS(s3.Pid(), stop) }()
	client := loadgen.NewClient(200)
	defer client.CloseIdleConnections()
	res := loadgen.Run(e.ctx, client, loadgen.Config{Clients: 200, Duration: e.plan.memoryTime, Request: get(l.URL)})
	close(stop)
	p := <-peak
	if res.Failed > 0 {
		b.Errorf("200 concurrent downloads: %v", res)
	}
	return row{
		work:      "200 concurrent S3 downloads, gateway memory",
		gateway:   fmt.Sprintf("peak RSS %.1f MiB (%.1f idle), %.2f GB/s in all", float64(p)/(1<<20), float64(idle)/(1<<20), res.Throughput()/1e9),
		reference: "target ≤ 64 MiB",
		ratio:     map[bool]string{true: "met", false: "**missed**"}[p <= 64<<20],
		before:    "–",
	}
}

// profileS3 takes a CPU profile of the gateway while it serves 1 GiB
// downloads from S3.
func (e *bench) profileS3(b *testing.B, s3 *gatewayProc) {
	l := s3.mustLink(b, "big.bin", `"downloads":1000000`)
	e.profile(b, s3, "s3", "the S3 path", func(d time.Duration) {
		loadgen.Run(e.ctx, e.client, loadgen.Config{Clients: e.plan.largeClients, Duration: d, Request: get(l.URL)})
	})
}

// profileFS takes CPU profiles of the fs gateway on the rows that ran:
// claims on distinct links and of a hot link, session ranges, unknown
// tokens.
func (e *bench) profileFS(b *testing.B, fs *gatewayProc) {
	if e.plan.profile == 0 {
		return
	}
	e.profileClaims(b, fs)
	for _, r := range []struct {
		row  string
		size int64
	}{{"ranges64k", 64 << 10}, {"ranges1m", 1 << 20}} {
		if !e.plan.runs(r.row) {
			continue
		}
		l := fs.mustLink(b, "ranges.bin", `"downloads":1,"delivery":"session","session":{"byte_budget":1125899906842624,"max_concurrency":64}`)
		session := fs.mintSession(b, l)
		e.profile(b, fs, r.row, r.row+" session ranges", func(d time.Duration) {
			loadgen.Run(e.ctx, e.client, loadgen.Config{Clients: 16, Duration: d, Request: rangeOf(session, r.size)})
		})
	}
	if e.plan.runs("unknown") {
		e.profile(b, fs, "unknown", "unknown tokens", func(d time.Duration) {
			loadgen.Run(e.ctx, e.client, loadgen.Config{Clients: 64, Duration: d, Request: randomToken(fs.Public)})
		})
	}
}

// profile takes a CPU profile of g for the plan's profile time while load
// runs, writes it to $BENCH_OUT/NAME-gateway.pprof and prints its top
// functions.
func (e *bench) profile(b *testing.B, g *gatewayProc, name, what string, load func(time.Duration)) {
	if e.plan.profile == 0 {
		return
	}
	say("CPU profile of the gateway on %s (%v)", what, e.plan.profile)
	path := filepath.Join(e.plan.out, name+"-gateway.pprof")
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", g.Admin, int(e.plan.profile.Seconds())), nil)
		req.Header.Set("Authorization", "Bearer "+adminToken)
		resp, err := adminClient.Do(req) // https for a gateway serving TLS
		if err != nil {
			done <- err
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(path)
		if err != nil {
			done <- err
			return
		}
		defer f.Close()
		_, err = f.ReadFrom(resp.Body)
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	load(e.plan.profile + time.Second)
	if err := <-done; err != nil {
		b.Errorf("profile: %v", err)
		return
	}
	top, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=25", e.gateway, path).CombinedOutput()
	if err != nil {
		b.Errorf("go tool pprof: %v\n%s", err, top)
	}
	os.WriteFile(filepath.Join(e.plan.out, name+"-gateway-top.txt"), top, 0o644) //nolint:errcheck // printed below anyway
	fmt.Printf("\n%s\n(profile: %s)\n", top, path)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ranges compares size-byte ranges at random offsets of one session
// (16 clients) with the same ranges of the same bytes from nginx.
func (e *bench) ranges(b *testing.B, fs *gatewayProc, size int64) row {
	name := map[int64]string{64 << 10: "64 KiB", 1 << 20: "1 MiB"}[size]
	say("%s session ranges vs nginx ranges", name)
	// The concurrency cap above the clients: refusals (429) would measure
	// the cap, not the path.
	l := fs.mustLink(b, "ranges.bin", `"downloads":1,"delivery":"session","session":{"byte_budget":1125899906842624,"max_concurrency":64}`)
	session := fs.mintSession(b, l)
	nginxURL, floorURL := e.nginx.URL+"/ranges.bin", e.floor.URL+"/f/ranges.bin"
	run := func(url string) (loadgen.Result, int64) {
		q0 := e.q.read(b)
		res := loadgen.Run(e.ctx, e.client, loadgen.Config{Clients: 16, Duration: e.plan.rangeTime, Request: rangeOf(url, size)})
		if res.Failed > 0 || res.Status(http.StatusPartialContent) != res.Requests {
			b.Errorf("ranges of %s: %v", url, res)
		}
		return res, e.q.read(b) - q0 - 1
	}
	run(session)
	run(nginxURL)
	run(floorURL)
	measure := func(url string) func() sample {
		return func() sample {
			res, q := run(url)
			return sample{"rate": res.Rate(), "MBps": res.Throughput() / 1e6, "stmts": float64(q) / float64(res.Requests)}
		}
	}
	s := rotate(e.plan.rounds, nil, measure(session), measure(nginxURL), measure(floorURL))
	gw, ref, fl := s[0], s[1], s[2]
	r := row{work: name + " session ranges, 16 clients, MariaDB"}
	if size < 1<<20 {
		r.gateway = gw.stat("rate").format("%.0f") + "/s, " + gw.stat("stmts").format("%.2f") + " statements each"
		r.reference = "nginx ranges " + ref.stat("rate").format("%.0f") + "/s"
		r.ratio = ratios(gw, "rate", ref, "rate").stat("r").format("%.2f")
		r.before = "750/s, 4 statements vs 10,448/s: 0.07"
		withFloor(&r, gw, ref, fl, "rate", "%.0f", "/s")
	} else {
		r.gateway = gw.stat("MBps").format("%.0f") + " MB/s, " + gw.stat("stmts").format("%.2f") + " statements each"
		r.reference = "nginx " + ref.stat("MBps").format("%.0f") + " MB/s"
		r.ratio = ratios(gw, "MBps", ref, "MBps").stat("r").format("%.2f")
		r.before = "747 vs 2,897 MB/s: 0.26"
		withFloor(&r, gw, ref, fl, "MBps", "%.0f", " MB/s")
	}
	return r
}

// unknownToken compares well-formed link tokens that no link has (43
// characters of base64url, a MAC that does not check) with nginx's 404.
func (e *bench) unknownToken(b *testing.B, fs *gatewayProc) row {
	say("unknown well-formed tokens vs nginx 404")
	run := func(base string) (loadgen.Result, int64) {
		q0 := e.q.read(b)
		res := loadgen.Run(e.ctx, e.client, loadgen.Config{Clients: 64, Duration: e.plan.shortTime, Request: randomToken(base)})
		if res.Failed > 0 || res.Status(http.StatusNotFound) != res.Requests {
			b.Errorf("unknown tokens on %s: %v", base, res)
		}
		return res, e.q.read(b) - q0 - 1
	}
	sameAnswer(b, fs.Public, e.floor.URL)
	run(fs.Public)
	run(e.nginx.URL)
	run(e.floor.URL)
	measure := func(base string) func() sample {
		return func() sample {
			res, q := run(base)
			return sample{"rate": res.Rate(), "stmts": float64(q) / float64(res.Requests)}
		}
	}
	s := rotate(e.plan.rounds, nil, measure(fs.Public), measure(e.nginx.URL), measure(e.floor.URL))
	gw, ref, fl := s[0], s[1], s[2]
	r := row{
		work:      "unknown well-formed token, MariaDB, 64 clients",
		gateway:   gw.stat("rate").format("%.0f") + "/s, " + gw.stat("stmts").format("%.3f") + " statements each",
		reference: "nginx 404 " + ref.stat("rate").format("%.0f") + "/s",
		ratio:     ratios(gw, "rate", ref, "rate").stat("r").format("%.2f"),
		before:    "4,970/s, 1 query vs 19,877/s: 0.25",
	}
	withFloor(&r, gw, ref, fl, "rate", "%.0f", "/s")
	return r
}

// sameAnswer checks that the floor answers an unknown token as the
// gateway does: status, content type, public headers, body length.
func sameAnswer(b *testing.B, gateway, floor string) {
	answer := func(base string) string {
		resp, err := http.DefaultClient.Do(randomToken(base)(0, 0))
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		h := resp.Header
		return fmt.Sprintf("%d %s, %d bytes, Cache-Control %q, X-Content-Type-Options %q, Referrer-Policy %q, X-Request-Id of %d",
			resp.StatusCode, h.Get("Content-Type"), resp.ContentLength, h.Get("Cache-Control"),
			h.Get("X-Content-Type-Options"), h.Get("Referrer-Policy"), len(h.Get("X-Request-Id")))
	}
	if g, f := answer(gateway), answer(floor); g != f {
		b.Errorf("unknown token: the floor answers %s, the gateway %s", f, g)
	}
}

// rangeOf is GETs of url for size-byte ranges at random offsets of the
// ranges file.
func rangeOf(url string, size int64) func(int, int64) *http.Request {
	return func(int, int64) *http.Request {
		off := mathrand.Int64N(rangesSize - size + 1)
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", off, off+size-1))
		return req
	}
}

// randomToken is GETs of link URLs under base with random well-formed
// tokens (43 characters of base64url, a MAC that does not check).
func randomToken(base string) func(int, int64) *http.Request {
	return func(int, int64) *http.Request {
		var raw [32]byte
		rand.Read(raw[:])
		req, _ := http.NewRequest(http.MethodGet, base+"/d/"+base64.RawURLEncoding.EncodeToString(raw[:]), nil)
		return req
	}
}

// cpuMeter is the CPU time of processes since it was made.
type cpuMeter struct {
	pids   []int
	before []float64
}

// cpuOf starts measuring the CPU time of pids.
func cpuOf(pids ...int) cpuMeter {
	m := cpuMeter{pids: pids}
	for _, p := range pids {
		m.before = append(m.before, cpuSeconds(p))
	}
	return m
}

// per adds to s, as "cpu.NAME" in microseconds per request, what each
// process used since the meter started, divided by n; names go with the
// pids in order.
func (m cpuMeter) per(s sample, n int64, names ...string) sample {
	for i, p := range m.pids {
		if n > 0 {
			s["cpu."+names[i]] = (cpuSeconds(p) - m.before[i]) / float64(n) * 1e6
		}
	}
	return s
}
