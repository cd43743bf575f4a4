package compare

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlgate/dlgate/bench/loadgen"
)

// The claim rows (issue 22). BENCH_ONLY=claims runs every one of the
// first list, refusals every one of the second; each also has a name of
// its own.
var (
	claimRows   = []string{"claims-distinct", "claims-3p", "claims-hot", "claims-hot-3p", "claims-hot-3p-apart", "claims-single"}
	refusalRows = []string{"refusals-distinct", "refusals-spent"}
)

// runsRow reports whether the row name of group is to run.
func (p plan) runsRow(group, name string) bool { return p.runs(group, name) }

// claimRowsOf adds the claim and refusal rows that are to run to rep, on
// fs and, for the rows with three processes, two more gateways on fs's
// database and objects.
func (e *bench) claimRowsOf(b *testing.B, fs *gatewayProc, rep *report) {
	var three []*gatewayProc
	cluster := func() []*gatewayProc {
		if three == nil {
			three = append([]*gatewayProc{fs}, e.moreFSGateways(b, fs, 2)...)
		}
		return three
	}
	if e.plan.runsRow("claims", "claims-distinct") {
		rep.add(e.claims(b, []*gatewayProc{fs}))
	}
	if e.plan.runsRow("claims", "claims-3p") {
		rep.add(e.claims(b, cluster()))
	}
	if e.plan.runsRow("claims", "claims-hot") {
		rep.add(e.hotLink(b, []*gatewayProc{fs}, false))
	}
	if e.plan.runsRow("claims", "claims-hot-3p") {
		rep.add(e.hotLink(b, cluster(), false))
	}
	if e.plan.runsRow("claims", "claims-hot-3p-apart") {
		rep.add(e.hotLink(b, cluster(), true))
	}
	if e.plan.runsRow("claims", "claims-single") {
		rep.add(e.singleClaims(b, fs))
	}
	if e.plan.runsRow("refusals", "refusals-distinct") {
		rep.add(e.refusals(b, fs))
	}
	if e.plan.runsRow("refusals", "refusals-spent") {
		rep.add(e.spentLink(b, fs))
	}
	for _, g := range three[min(1, len(three)):] {
		g.stop()
	}
}

// moreFSGateways starts n more fs gateways sharing fs's database and its
// objects directory (the fs store is safe for several processes), as a
// deployment of several processes behind one balancer would be.
func (e *bench) moreFSGateways(b *testing.B, fs *gatewayProc, n int) []*gatewayProc {
	var out []*gatewayProc
	for range n {
		out = append(out, startGateway(b, e.gateway, map[string]string{
			"GATEWAY_DB_DRIVER": "mysql", "GATEWAY_DB_DSN": fs.env["GATEWAY_DB_DSN"],
			"GATEWAY_STORE": "fs", "GATEWAY_FS_ROOT": filepath.Join(fs.env["GATEWAY_DATA_DIR"], "objects"),
		}))
	}
	return out
}

// pids are the processes of gws.
func pids(gws []*gatewayProc) []int {
	var out []int
	for _, g := range gws {
		out = append(out, g.Pid())
	}
	return out
}

// onEach spreads the requests for links round-robin over gws: request i
// GETs links[i] (or links[0] when there is one link) from gws[i mod n].
func onEach(gws []*gatewayProc, links []link) func(int, int64) *http.Request {
	return func(_ int, i int64) *http.Request {
		l := links[0]
		if len(links) > 1 {
			l = links[i]
		}
		req, _ := http.NewRequest(http.MethodGet, gws[i%int64(len(gws))].Public+"/d/"+l.Token, nil)
		return req
	}
}

func processes(gws []*gatewayProc) string {
	if len(gws) == 1 {
		return "1 process"
	}
	return fmt.Sprintf("%d processes", len(gws))
}

// claims compares claims on distinct one-download links through the
// gateways gws (requests spread round-robin) with the five statements of
// the claim path that issue 8 measured, run by a plain Go loop on the same
// database.
func (e *bench) claims(b *testing.B, gws []*gatewayProc) row {
	fs := gws[0]
	say("claims on distinct 1-download links, %s, vs the same statements in a plain Go loop", processes(gws))
	loop := openLoopDB(b, fs)
	var gwLinks, refLinks []link
	gw, ref := alternate(e.plan.rounds,
		func() {
			gwLinks = fs.newLinks(b, e.plan.claims, "small.bin", `"downloads":1`)
			refLinks = fs.newLinks(b, e.plan.claims, "small.bin", `"downloads":1`)
		},
		func() sample {
			q0, cpu := e.q.read(b), cpuOf(append(pids(gws), e.db.Pid(), os.Getpid())...)
			res := loadgen.Run(e.ctx, e.client, loadgen.Config{
				Clients: 64, Requests: int64(len(gwLinks)), Duration: time.Minute, Request: onEach(gws, gwLinks),
			})
			q, _ := e.q.settled(b, q0)
			if res.Status(http.StatusOK) != int64(len(gwLinks)) || res.Failed > 0 {
				b.Errorf("claims: %v", res)
			}
			s := cpu.per(sample{"rate": res.Rate(), "p99": ms(res.Percentile(0.99)), "stmts": float64(q) / float64(res.Requests)},
				res.Requests, append(names("gw", len(gws)), "db", "client")...)
			return sumCPU(s, "gw", len(gws))
		},
		func() sample {
			q0, cpu := e.q.read(b), cpuOf(e.db.Pid(), os.Getpid())
			rate, p99, err := loop.run(e.ctx, refLinks, 64)
			q := e.q.read(b) - q0 - 1
			if err != nil {
				b.Errorf("claim loop: %v", err)
			}
			return cpu.per(sample{"rate": rate, "p99": ms(p99), "stmts": float64(q) / float64(len(refLinks))}, int64(len(refLinks)), "db", "client")
		})
	before := "issue 22: 1,664/s, p99 80 ms vs 2,506/s, p99 54 ms: 0.66"
	if len(gws) > 1 {
		before = "issue 22: 1,845/s, p99 71 ms: 0.74"
	}
	return row{
		work:      "claims, distinct 1-download links, MariaDB, 64 clients, " + processes(gws),
		gateway:   gw.stat("rate").format("%.0f") + "/s, p99 " + gw.stat("p99").format("%.0f") + " ms, " + gw.stat("stmts").format("%.2f") + " statements each",
		reference: "the 5 statements in a plain Go loop: " + ref.stat("rate").format("%.0f") + "/s, p99 " + ref.stat("p99").format("%.0f") + " ms, " + ref.stat("stmts").format("%.2f") + " statements",
		ratio:     ratios(gw, "rate", ref, "rate").stat("r").format("%.2f") + " (target ≥ 1.5, p99 ≤ 50 ms)",
		before:    before,
		notes: []string{"Claims row (" + processes(gws) + "), statements: the gateway's are its share of the claim transactions and, once each response's last byte left, the one UPDATE that records what its client acknowledged (delivery evidence, issue 23); the loop runs the claim's 5 alone.",
			"Claims row (" + processes(gws) + "), CPU per claim (user + system): through the gateway: gateway " + gw.stat("cpu.gw").format("%.0f") +
				" µs + MariaDB " + gw.stat("cpu.db").format("%.0f") + " µs + load generator " + gw.stat("cpu.client").format("%.0f") +
				" µs; the plain loop: MariaDB " + ref.stat("cpu.db").format("%.0f") + " µs + the loop " + ref.stat("cpu.client").format("%.0f") +
				" µs. The sides share the 2 cores, so the rate follows the sum."},
	}
}

// names are n names of processes: name, or name1 … nameN.
func names(name string, n int) []string {
	if n == 1 {
		return []string{name}
	}
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("%s%d", name, i+1))
	}
	return out
}

// sumCPU adds cpu.name, the sum of cpu.name1 … cpu.nameN, to s.
func sumCPU(s sample, name string, n int) sample {
	if n > 1 {
		for _, x := range names(name, n) {
			s["cpu."+name] += s["cpu."+x]
		}
	}
	return s
}

// linkState is the admin API's view of a link's counts.
type linkState struct {
	Downloads int            `json:"downloads"`
	Remaining int            `json:"remaining"`
	Grants    map[string]int `json:"grants"`
}

func (g *gatewayProc) linkState(tb testing.TB, id string) linkState {
	tb.Helper()
	var s linkState
	g.admin(tb, http.MethodGet, "/v1/links/"+id, nil, 0, &s)
	return s
}

// hotLink claims one link of 1,000,000 downloads from 64 clients on gws
// and checks afterwards that it is exact: every 200 a grant, remaining
// plus the grants the allowance. apart gives each process a hot link of
// its own instead (the requests of process i claim link i): the same
// processes, clients and claims without the one row they share, which
// is the most that splitting a link's allowance over rows of its own
// (slotted allowance rows, docs/design.md) could give three processes.
func (e *bench) hotLink(b *testing.B, gws []*gatewayProc, apart bool) row {
	fs := gws[0]
	links := []link{fs.mustLink(b, "small.bin", `"downloads":1000000`)}
	if apart {
		say("claims of %d links with 1,000,000 downloads each, one per process, %s", len(gws), processes(gws))
		for range gws[1:] {
			links = append(links, fs.mustLink(b, "small.bin", `"downloads":1000000`))
		}
	} else {
		say("claims of one link with 1,000,000 downloads, %s", processes(gws))
	}
	var served int64
	s := rotate(e.plan.rounds, nil, func() sample {
		q0, cpu := e.q.read(b), cpuOf(append(pids(gws), e.db.Pid(), os.Getpid())...)
		res := loadgen.Run(e.ctx, e.client, loadgen.Config{
			Clients: 64, Requests: int64(e.plan.hotClaims), Duration: time.Minute, Request: onOwn(gws, links),
		})
		q, behind := e.q.settled(b, q0)
		if res.Status(http.StatusOK) != res.Requests || res.Failed > 0 {
			b.Errorf("hot link: %v", res)
		}
		served += res.Status(http.StatusOK)
		smp := cpu.per(sample{"rate": res.Rate(), "p99": ms(res.Percentile(0.99)), "stmts": float64(q) / float64(res.Requests), "behind": ms(behind)},
			res.Requests, append(names("gw", len(gws)), "db", "client")...)
		return sumCPU(smp, "gw", len(gws))
	})
	gw := s[0]
	var st linkState
	for _, l := range links {
		one := fs.linkState(b, l.ID)
		st.Downloads += one.Downloads
		st.Remaining += one.Remaining
		if st.Grants == nil {
			st.Grants = map[string]int{}
		}
		st.Grants["granted"] += one.Grants["granted"]
		if one.Remaining+one.Grants["granted"] != one.Downloads {
			b.Errorf("hot link %s: remaining %d, grants %v, downloads %d: not exact", l.ID, one.Remaining, one.Grants, one.Downloads)
		}
	}
	exact := st.Remaining+st.Grants["granted"] == st.Downloads && int64(st.Grants["granted"]) == served
	if !exact {
		b.Errorf("hot link: %d served, remaining %d, grants %v, downloads %d: not exact", served, st.Remaining, st.Grants, st.Downloads)
	}
	before, work := "issue 22: 915/s", "claims of one link with 1,000,000 downloads (hot link), MariaDB, 64 clients, "+processes(gws)
	switch {
	case apart:
		before = "– (row new)"
		work = fmt.Sprintf("claims of %d hot links, one per process (no row shared), MariaDB, 64 clients, %s", len(gws), processes(gws))
	case len(gws) > 1:
		before = "issue 22: 1,029/s"
	}
	return row{
		work: work,
		gateway: gw.stat("rate").format("%.0f") + "/s, p99 " + gw.stat("p99").format("%.0f") + " ms, " + gw.stat("stmts").format("%.2f") +
			" statements each; CPU per claim: gateway " + gw.stat("cpu.gw").format("%.0f") + " µs, MariaDB " + gw.stat("cpu.db").format("%.0f") +
			" µs, load generator " + gw.stat("cpu.client").format("%.0f") + " µs; the last delivery records written " + gw.stat("behind").format("%.0f") + " ms after the last response",
		reference: fmt.Sprintf("target ≥ 8,000/s, exact: %d served, remaining %d + granted %d = %d downloads", served, st.Remaining, st.Grants["granted"], st.Downloads),
		ratio:     map[bool]string{true: "exact", false: "**not exact**"}[exact],
		before:    before,
	}
}

// onOwn sends request i to gateway i mod len(gws), claiming that
// gateway's own link when each has one (len(links) == len(gws)), else
// links[0] on every gateway.
func onOwn(gws []*gatewayProc, links []link) func(int, int64) *http.Request {
	return func(_ int, i int64) *http.Request {
		g := i % int64(len(gws))
		l := links[0]
		if len(links) == len(gws) {
			l = links[g]
		}
		req, _ := http.NewRequest(http.MethodGet, gws[g].Public+"/d/"+l.Token, nil)
		return req
	}
}

// singleClaims claims distinct one-download links from one client, the
// latency of a claim at low load, against the plain loop's with one
// client.
func (e *bench) singleClaims(b *testing.B, fs *gatewayProc) row {
	say("claims on distinct 1-download links from a single client vs the plain Go loop")
	loop := openLoopDB(b, fs)
	var gwLinks, refLinks []link
	gw, ref := alternate(e.plan.rounds,
		func() {
			gwLinks = fs.newLinks(b, e.plan.singleClaims, "small.bin", `"downloads":1`)
			refLinks = fs.newLinks(b, e.plan.singleClaims, "small.bin", `"downloads":1`)
		},
		func() sample {
			q0 := e.q.read(b)
			res := loadgen.Run(e.ctx, e.client, loadgen.Config{
				Clients: 1, Requests: int64(len(gwLinks)), Duration: time.Minute, Request: onEach([]*gatewayProc{fs}, gwLinks),
			})
			q, _ := e.q.settled(b, q0)
			if res.Status(http.StatusOK) != int64(len(gwLinks)) || res.Failed > 0 {
				b.Errorf("single-client claims: %v", res)
			}
			return sample{"p50": ms(res.Percentile(0.5)), "p99": ms(res.Percentile(0.99)), "stmts": float64(q) / float64(res.Requests)}
		},
		func() sample {
			p50, err := loop.latency(e.ctx, refLinks)
			if err != nil {
				b.Errorf("claim loop: %v", err)
			}
			return sample{"p50": ms(p50)}
		})
	return row{
		work:      "claims, distinct 1-download links, MariaDB, a single client",
		gateway:   "p50 " + gw.stat("p50").format("%.2f") + " ms, p99 " + gw.stat("p99").format("%.2f") + " ms, " + gw.stat("stmts").format("%.2f") + " statements each",
		reference: "the 5 statements in a plain Go loop, one client: p50 " + ref.stat("p50").format("%.2f") + " ms",
		ratio:     ratios(gw, "p50", ref, "p50").stat("r").format("%.2f") + " (the p50's ratio)",
		before:    "–",
	}
}

// refusals compares GETs of spent one-download links (the generic 404),
// each link once, through the gateway with the statements a refusal
// needs, in a plain Go loop on the same database.
func (e *bench) refusals(b *testing.B, fs *gatewayProc) row {
	say("refused GETs of spent links vs the refusal's statements in a plain Go loop")
	loop := openLoopDB(b, fs)
	n := e.plan.claims / 2
	var links []link
	gw, ref := alternate(e.plan.rounds,
		func() {
			// Links the gateway never saw, spent by the loop: each GET is
			// the first of its link in the gateway.
			links = fs.newLinks(b, n, "small.bin", `"downloads":1`)
			if _, _, err := loop.run(e.ctx, links, 32); err != nil {
				b.Fatalf("spending the links: %v", err)
			}
		},
		func() sample {
			q0, cpu := e.q.read(b), cpuOf(fs.Pid(), e.db.Pid(), os.Getpid())
			res := loadgen.Run(e.ctx, e.client, loadgen.Config{
				Clients: 64, Requests: int64(len(links)), Duration: time.Minute, Request: onEach([]*gatewayProc{fs}, links),
			})
			q := e.q.read(b) - q0 - 1
			if res.Status(http.StatusNotFound) != int64(len(links)) || res.Failed > 0 {
				b.Errorf("refusals: %v", res)
			}
			return cpu.per(sample{"rate": res.Rate(), "p99": ms(res.Percentile(0.99)), "stmts": float64(q) / float64(res.Requests)}, res.Requests, "gw", "db", "client")
		},
		func() sample {
			q0, cpu := e.q.read(b), cpuOf(e.db.Pid(), os.Getpid())
			rate, p99, err := loop.runEach(e.ctx, links, 64, loop.refuse)
			q := e.q.read(b) - q0 - 1
			if err != nil {
				b.Errorf("refusal loop: %v", err)
			}
			return cpu.per(sample{"rate": rate, "p99": ms(p99), "stmts": float64(q) / float64(len(links))}, int64(len(links)), "db", "client")
		})
	return row{
		work:      "refused GETs, distinct spent 1-download links (each the first GET of its link), MariaDB, 64 clients",
		gateway:   gw.stat("rate").format("%.0f") + "/s, p99 " + gw.stat("p99").format("%.0f") + " ms, " + gw.stat("stmts").format("%.2f") + " statements each",
		reference: "lookup, START, the decrement, ROLLBACK in a plain Go loop: " + ref.stat("rate").format("%.0f") + "/s, p99 " + ref.stat("p99").format("%.0f") + " ms, " + ref.stat("stmts").format("%.2f") + " statements",
		ratio:     ratios(gw, "rate", ref, "rate").stat("r").format("%.2f"),
		before:    "issue 22: 6 statements each (5 in one batch + ROLLBACK)",
	}
}

// spentLink GETs one spent link from 64 connections, after a first
// refusal, against unknown tokens on the same gateway (which cost no
// statement). Each request comes from an address of its own
// (X-Forwarded-For from a trusted proxy), a crowd following a link that
// was used up: the gateway's limit on one client's refusals of one token
// (429 too-many-refusals) never applies, so every request is refused by
// the ledger's claim.
func (e *bench) spentLink(b *testing.B, fs *gatewayProc) row {
	say("repeated GETs of one spent link by distinct clients vs unknown tokens")
	l := fs.mustLink(b, "small.bin", `"downloads":1`)
	e.warm(b, fs.Public+"/d/"+l.Token) // the one download
	first := loadgen.Run(e.ctx, e.client, loadgen.Config{Clients: 1, Requests: 1, Duration: time.Minute, Request: get(fs.Public + "/d/" + l.Token)})
	if first.Status(http.StatusNotFound) != 1 {
		b.Fatalf("first GET of the spent link: %v", first)
	}
	run := func(req func(int, int64) *http.Request, want int) func() sample {
		return func() sample {
			q0 := e.q.read(b)
			res := loadgen.Run(e.ctx, e.client, loadgen.Config{Clients: 64, Duration: e.plan.shortTime, Request: req})
			q := e.q.read(b) - q0 - 1
			if res.Status(want) != res.Requests || res.Failed > 0 {
				b.Errorf("spent link: %v", res)
			}
			return sample{"rate": res.Rate(), "stmts": float64(q) / float64(res.Requests)}
		}
	}
	gw, ref := alternate(e.plan.rounds, nil,
		run(fromCrowd(get(fs.Public+"/d/"+l.Token)), http.StatusNotFound),
		run(fromCrowd(randomToken(fs.Public)), http.StatusNotFound))
	return row{
		work:      "GETs of one spent link after the first refusal, MariaDB, 64 clients",
		gateway:   gw.stat("rate").format("%.0f") + "/s, " + gw.stat("stmts").format("%.3f") + " statements each (target ≤ 0.1)",
		reference: "unknown well-formed tokens, same gateway: " + ref.stat("rate").format("%.0f") + "/s, " + ref.stat("stmts").format("%.3f") + " statements",
		ratio:     ratios(gw, "rate", ref, "rate").stat("r").format("%.2f"),
		before:    "issue 22: 6 statements each",
	}
}

// fromCrowd gives each request of req an address of its own, as a
// trusted proxy names it (X-Forwarded-For; the fs gateway trusts
// 127.0.0.1).
func fromCrowd(req func(int, int64) *http.Request) func(int, int64) *http.Request {
	return func(c int, i int64) *http.Request {
		r := req(c, i)
		r.Header.Set("X-Forwarded-For", fmt.Sprintf("10.%d.%d.%d", byte(i>>16), byte(i>>8), byte(i)))
		return r
	}
}

// profileClaims takes CPU profiles of the gateway on claims of distinct
// links and on the hot link, and reports MariaDB's and the load
// generator's CPU seconds over the same window (where the time goes).
func (e *bench) profileClaims(b *testing.B, fs *gatewayProc) {
	if e.plan.runsRow("claims", "claims-distinct") {
		links := fs.newLinks(b, 6000, "small.bin", `"downloads":1`)
		e.profileWithShares(b, fs, "claims", "claims on distinct links", func(d time.Duration) loadgen.Result {
			return loadgen.Run(e.ctx, e.client, loadgen.Config{Clients: 64, Requests: int64(len(links)), Duration: d,
				Request: onEach([]*gatewayProc{fs}, links)})
		})
	}
	if e.plan.runsRow("claims", "claims-hot") {
		l := fs.mustLink(b, "small.bin", `"downloads":1000000`)
		e.profileWithShares(b, fs, "claims-hot", "claims of one hot link", func(d time.Duration) loadgen.Result {
			return loadgen.Run(e.ctx, e.client, loadgen.Config{Clients: 64, Duration: d, Request: onEach([]*gatewayProc{fs}, []link{l})})
		})
	}
}

// profileWithShares is profile with the CPU seconds of the gateway,
// MariaDB and this process (the load generator) during the load, written
// beside the profile.
func (e *bench) profileWithShares(b *testing.B, fs *gatewayProc, name, what string, load func(time.Duration) loadgen.Result) {
	e.profile(b, fs, name, what, func(d time.Duration) {
		gw, db, me := cpuSeconds(fs.Pid()), cpuSeconds(e.db.Pid()), cpuSeconds(os.Getpid())
		res := load(d)
		gw, db, me = cpuSeconds(fs.Pid())-gw, cpuSeconds(e.db.Pid())-db, cpuSeconds(os.Getpid())-me
		all := gw + db + me
		line := fmt.Sprintf("%s: %v; CPU seconds: gateway %.2f (%.0f %%), MariaDB %.2f (%.0f %%), load generator %.2f (%.0f %%)",
			what, res, gw, 100*gw/all, db, 100*db/all, me, 100*me/all)
		fmt.Println(line)
		os.WriteFile(filepath.Join(e.plan.out, name+"-cpu.txt"), []byte(line+"\n"), 0o644) //nolint:errcheck // printed above
	})
}
