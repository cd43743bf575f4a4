package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlgate/dlgate/config"
)

// testAria2cSplitsASession: aria2c with 16 connections on a session capped
// at 4 concurrent requests (spread over the processes by the balancer)
// ends with a byte-exact file, for one allowance. aria2c 1.36 does not
// retry a 429 (only 502/503, after --retry-wait): it drops the connection.
// A request over the cap waits briefly for a slot (config.DefaultSlotWait)
// before its 429, so aria2c mostly completes in one run; when the 429s
// took every connection it had, it exits 22 and its own resume (the same
// command again, continuing from its .aria2 file) fetches the rest
// through the same session. Each run fetches at least the segment of its
// first connection, which finds the cap free, so a few runs always do.
func testAria2cSplitsASession(t *testing.T, c *Cluster, obj *Object) {
	aria2c := MustBinary(t, "aria2c")
	admin := c.Admin()
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 2, Session: &SessionSettings{MaxConcurrency: 4, ByteBudget: 4 * int64(len(obj.Data))}})
	s := MustMintSession(t, c.PublicURL, link)
	if s.MaxConcurrency != 4 {
		t.Fatalf("session max_concurrency %d, want 4", s.MaxConcurrency)
	}
	dir := t.TempDir()
	args := []string{"--no-conf", "-x16", "-s16", "-k1M", "--max-tries=0", "--retry-wait=1",
		"--file-allocation=none", "--summary-interval=0", "--console-log-level=notice",
		"-d", dir, "-o", "aria2.bin", s.SessionURL}
	const most = 8 // 1 MiB segments of an 8 MiB file: one run each at worst
	runs, refused := 0, 0
	for {
		runs++
		out, err := run(t, dir, aria2c, args...)
		refused += countLines(out, "status=429")
		if err == nil {
			break
		}
		// Only the cap may stop it: every error it reports is a 429.
		if n := countLines(out, "errorCode="); n == 0 || n != 2*countLines(out, "status=429") || runs == most {
			t.Fatalf("aria2c run %d: %v\n%s", runs, err, out)
		}
	}
	checkFile(t, filepath.Join(dir, "aria2.bin"), obj)
	admin.checkCounts(t, link.ID, 1, 1, 0)
	t.Logf("aria2c -x16 -s16 on a session of max_concurrency 4: byte-exact after %d run(s); %d of its requests were answered 429", runs, refused)
}

func countLines(out, substr string) int {
	n := 0
	for line := range strings.Lines(out) {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

// testResumeAfterKill: a download cut half-way (client killed) resumes
// against the session URL with `curl -C -` or `wget -c` into a
// byte-exact file. The first run goes through a slow balancer (2 MiB/s)
// so that it is still running when half the file is there.
func testResumeAfterKill(t *testing.T, c *Cluster, obj *Object, tool string) {
	bin := MustBinary(t, tool)
	admin := c.Admin()
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1})
	s := MustMintSession(t, c.PublicURL, link)
	slow := MustStartBalancer(t, 2<<20, c.Balancer.Backends()...)
	dir := t.TempDir()
	file := filepath.Join(dir, "resumed.bin")
	var first, resume []string
	switch tool {
	case "curl":
		first = []string{"-q", "-sS", "-o", file, slow.On(s.SessionURL)}
		resume = []string{"-q", "-fsS", "-C", "-", "-o", file, s.SessionURL}
	case "wget":
		first = []string{"--no-config", "-q", "-O", file, slow.On(s.SessionURL)}
		resume = []string{"--no-config", "-q", "-c", "-O", file, s.SessionURL}
	default:
		t.Fatalf("no resume recipe for %s", tool)
	}
	size := int64(len(obj.Data))
	bg := MustStart(t, dir, bin, first...)
	deadline := time.Now().Add(time.Minute)
	for fileSize(file) < size/2 {
		if bg.Exited() {
			out, err := bg.Wait()
			t.Fatalf("%s ended (%v) before it had half the file (%d of %d bytes): %s", tool, err, fileSize(file), size, out)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s had only %d of %d bytes after a minute at 2 MiB/s", tool, fileSize(file), size)
		}
		time.Sleep(20 * time.Millisecond)
	}
	bg.Kill()
	part := fileSize(file)
	if part <= 0 || part >= size {
		t.Fatalf("the interrupted download left %d bytes, want a part of %d: nothing to resume", part, size)
	}
	MustRun(t, dir, bin, resume...)
	checkFile(t, file, obj)
	admin.checkCounts(t, link.ID, 0, 1, 0)
	t.Logf("%s: killed at %d of %d bytes, resumed within the session to a byte-exact file", tool, part, size)
}

// testSessionLinkRedirects: GET on a link with delivery "session" answers
// 303 to a fresh session; curl -L and wget follow it to the file. Each
// client (here each program, by its User-Agent) makes one claim.
func testSessionLinkRedirects(t *testing.T, c *Cluster, obj *Object) {
	curl, wget := MustBinary(t, "curl"), MustBinary(t, "wget")
	admin := c.Admin()
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 3, Delivery: "session"})

	r := MustFetch(t, http.MethodGet, c.Gateways[2].On(link.URL))
	if r.Status != http.StatusSeeOther {
		t.Fatalf("%v, want 303; body %.300q", r, r.Body)
	}
	checkPublicHeaders(t, r)
	loc := r.Header.Get("Location")
	if !strings.HasPrefix(loc, c.PublicURL+"/s/") {
		t.Errorf("%v: Location %q, want a session URL under %s/s/", r, redact(loc), c.PublicURL)
	}
	var s Session
	if err := json.Unmarshal(r.Body, &s); err != nil || s.NamedSessionURL != loc || !strings.HasPrefix(loc, s.SessionURL+"/") {
		t.Errorf("%v: body %.300q (%v), want the session JSON with named_session_url = Location", r, r.Body, err)
	}
	noteToken(s.SessionURL)
	checkBody(t, MustFetch(t, http.MethodGet, loc), obj)

	dir := t.TempDir()
	MustRun(t, dir, curl, "-q", "-fsSL", "-o", "curl.bin", link.URL)
	checkFile(t, filepath.Join(dir, "curl.bin"), obj)
	MustRun(t, dir, wget, "--no-config", "-q", "-O", "wget.bin", link.URL)
	checkFile(t, filepath.Join(dir, "wget.bin"), obj)

	admin.checkCounts(t, link.ID, 0, 3, 0)
	if l := admin.MustLink(t, link.ID); l.ActiveSessions == nil || *l.ActiveSessions != 3 {
		t.Errorf("link shows active_sessions %v, want 3 (one per GET)", l.ActiveSessions)
	}
	// Every client spent its one: a fourth client gets the generic 404,
	// the first is sent back to its session (SPEC §5).
	checkProblem(t, MustFetch(t, http.MethodGet, link.URL, "User-Agent", "a-fourth-client"), http.StatusNotFound, "link-unavailable")
	if r := MustFetch(t, http.MethodGet, link.URL); r.Status != http.StatusSeeOther || r.Header.Get("Location") != loc {
		t.Errorf("%v for the first client again, Location %q; want 303 to its session", r, redact(r.Header.Get("Location")))
	}
}

// fetchRetrying fetches like a download manager: a 429 is retried after
// its Retry-After, which must be there. It returns the final answer and
// how many 429s came before it.
func fetchRetrying(method, rawURL string, hdr ...string) (*Reply, int, error) {
	for busy := 0; ; busy++ {
		r, err := fetch(method, rawURL, nil, hdr...)
		if err != nil || r.Status != http.StatusTooManyRequests || busy == 60 {
			return r, busy, err
		}
		secs, err := strconv.Atoi(r.Header.Get("Retry-After"))
		if err != nil || secs < 0 {
			return r, busy, fmt.Errorf("429 with Retry-After %q", r.Header.Get("Retry-After"))
		}
		time.Sleep(time.Duration(secs) * time.Second)
	}
}

// testBudgetHoldsAcrossProcesses: a session with a budget of 1.5 × size,
// read twice over in 1 MiB ranges spread over the processes in parallel,
// delivers at most its budget in total; the first pass, which fits, is
// complete and byte-exact.
func testBudgetHoldsAcrossProcesses(t *testing.T, c *Cluster, obj *Object) {
	admin := c.Admin()
	size := int64(len(obj.Data))
	budget := size * 3 / 2
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1, Session: &SessionSettings{ByteBudget: budget, MaxConcurrency: 8}})
	s := MustMintSession(t, c.PublicURL, link)
	if s.ByteBudget != budget || s.MaxConcurrency != 8 {
		t.Fatalf("session byte_budget %d, max_concurrency %d; want %d, 8", s.ByteBudget, s.MaxConcurrency, budget)
	}
	const part = 1 << 20
	type span struct{ start, end int64 }
	var spans []span
	for off := int64(0); off < size; off += part {
		spans = append(spans, span{off, min(off+part, size) - 1})
	}
	pass := func() []*Reply {
		replies := make([]*Reply, len(spans))
		errs := make([]error, len(spans))
		var wg sync.WaitGroup
		for i, sp := range spans {
			g := c.Gateways[i%len(c.Gateways)]
			wg.Go(func() {
				replies[i], _, errs[i] = fetchRetrying(http.MethodGet, g.On(s.SessionURL), "Range", fmt.Sprintf("bytes=%d-%d", sp.start, sp.end))
			})
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("range %d-%d: %v", spans[i].start, spans[i].end, err)
			}
		}
		return replies
	}
	var total int64
	received := func(r *Reply) int64 {
		if r.Status/100 == 2 {
			total += int64(len(r.Body))
			return int64(len(r.Body))
		}
		return 0
	}

	assembled := make([]byte, 0, size)
	for i, r := range pass() {
		sp := spans[i]
		received(r)
		want := fmt.Sprintf("bytes %d-%d/%d", sp.start, sp.end, size)
		if r.Status != http.StatusPartialContent || r.Header.Get("Content-Range") != want || r.BodyErr != nil ||
			!bytes.Equal(r.Body, obj.Data[sp.start:sp.end+1]) {
			t.Errorf("first pass: %v (Content-Range %q, %d bytes, read error %v), want 206 %s with those bytes",
				r, r.Header.Get("Content-Range"), len(r.Body), r.BodyErr, want)
		}
		assembled = append(assembled, r.Body...)
	}
	if !bytes.Equal(assembled, obj.Data) {
		t.Errorf("the first pass assembled %d bytes that are not the %d-byte object", len(assembled), size)
	}
	first := total

	var full, truncated, refused int
	for i, r := range pass() {
		sp := spans[i]
		n := received(r)
		switch r.Status {
		case http.StatusPartialContent:
			if !bytes.Equal(r.Body, obj.Data[sp.start:sp.start+n]) {
				t.Errorf("second pass: %v: the %d bytes received are not the object's bytes at %d", r, n, sp.start)
			}
			if n == sp.end-sp.start+1 {
				full++
			} else {
				truncated++
			}
		case http.StatusForbidden:
			checkProblem(t, r, http.StatusForbidden, "byte-budget-exhausted")
			refused++
		default:
			t.Errorf("second pass: %v, want 206 or 403; body %.300q", r, r.Body)
		}
	}
	t.Logf("budget %d: first pass received %d bytes; second pass %d full ranges, %d truncated, %d × 403; %d bytes in total",
		budget, first, full, truncated, refused, total)
	if total > budget {
		t.Errorf("the session delivered %d body bytes, more than its byte budget of %d", total, budget)
	}
	if full == len(spans) {
		t.Errorf("the second pass received the whole object again: the budget of %d did not stop %d bytes", budget, 2*size)
	}
	// HEAD spends no budget: it still answers once the budget is gone.
	r := MustFetch(t, http.MethodHead, c.Gateways[1].On(s.SessionURL))
	if r.Status != http.StatusOK || r.Header.Get("Content-Length") != strconv.FormatInt(size, 10) {
		t.Errorf("%v with Content-Length %q after the budget is spent, want 200 with %d", r, r.Header.Get("Content-Length"), size)
	}
}

// testRevokeEndsSessions: revoking the link, or the session itself,
// stops the session's next range request on every process.
func testRevokeEndsSessions(t *testing.T, c *Cluster, obj *Object) {
	admin := c.Admin()
	rangeOK := func(t *testing.T, rawURL string) {
		t.Helper()
		r := MustFetch(t, http.MethodGet, rawURL, "Range", "bytes=0-1023")
		if r.Status != http.StatusPartialContent || !bytes.Equal(r.Body, obj.Data[:1024]) {
			t.Fatalf("%v (%d bytes), want 206 with the first KiB", r, len(r.Body))
		}
	}
	// gone: the process whose admin API revoked answers 404 at once; a
	// process that served the session keeps its row warm for at most
	// config.DefaultWarmRowTTL (1 s), so it answers 404 within that.
	gone := func(t *testing.T, rawURL string) {
		t.Helper()
		start := time.Now()
		for i, g := range c.Gateways {
			r := MustFetch(t, http.MethodGet, g.On(rawURL), "Range", "bytes=0-1023")
			for i > 0 && r.Status != http.StatusNotFound && time.Since(start) < config.DefaultWarmRowTTL+time.Second {
				time.Sleep(50 * time.Millisecond)
				r = MustFetch(t, http.MethodGet, g.On(rawURL), "Range", "bytes=0-1023")
			}
			checkProblem(t, r, http.StatusNotFound, "session-unavailable")
			checkProblem(t, MustFetch(t, http.MethodHead, g.On(rawURL)), http.StatusNotFound, "session-unavailable")
		}
		t.Logf("revoked session refused on every process %v after the revocation", time.Since(start).Round(time.Millisecond))
	}

	t.Run("RevokingTheLink", func(t *testing.T) {
		link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 2})
		s := MustMintSession(t, c.PublicURL, link)
		rangeOK(t, c.Gateways[0].On(s.SessionURL))
		admin.MustRevokeLink(t, link.ID)
		gone(t, s.SessionURL)
		if l := admin.MustLink(t, link.ID); l.ActiveSessions == nil || *l.ActiveSessions != 0 {
			t.Errorf("revoked link shows active_sessions %v, want 0", l.ActiveSessions)
		}
	})

	t.Run("DeletingTheSession", func(t *testing.T) {
		link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 2})
		s := MustMintSession(t, c.PublicURL, link)
		rangeOK(t, c.Gateways[1].On(s.SessionURL))
		admin.MustRevokeSession(t, s.SessionID)
		gone(t, s.SessionURL)
		// The link itself lives on: its last allowance mints a new session.
		again := MustMintSession(t, c.PublicURL, link)
		rangeOK(t, c.Gateways[2].On(again.SessionURL))
		admin.checkCounts(t, link.ID, 0, 2, 0)
	})
}

// testIdempotentMint: 20 simultaneous POSTs with one Idempotency-Key,
// spread over the processes, make one session and one claim: one 201 and
// nineteen 200 with the identical body.
func testIdempotentMint(t *testing.T, c *Cluster, obj *Object) {
	admin := c.Admin()
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 3})
	key := "e2e-" + randomHex(8)
	path := "/d/" + link.Token + "/sessions"
	addrs := make([]string, len(c.Gateways))
	for i, g := range c.Gateways {
		addrs[i] = g.PublicAddr
	}
	replies := MustStampede(t, addrs, 20, http.MethodPost, path, func(addr string) string {
		return "POST " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nIdempotency-Key: " + key +
			"\r\nContent-Length: 0\r\nConnection: close\r\n"
	})
	created, replayed := 0, 0
	var body []byte
	for _, r := range replies {
		switch r.Status {
		case http.StatusCreated:
			created++
		case http.StatusOK:
			replayed++
		default:
			t.Errorf("%v, want 201 or 200; body %.300q (%v)", r, r.Body, r.BodyErr)
			continue
		}
		checkPublicHeaders(t, r)
		if body == nil {
			body = r.Body
		} else if !bytes.Equal(r.Body, body) {
			t.Errorf("%v: body %.300q differs from %.300q", r, r.Body, body)
		}
	}
	t.Logf("20 simultaneous POSTs with one Idempotency-Key: %d × 201, %d × 200", created, replayed)
	if created != 1 || replayed != 19 {
		t.Errorf("got %d × 201 and %d × 200, want 1 and 19", created, replayed)
	}
	var s Session
	if err := json.Unmarshal(body, &s); err != nil || !strings.HasPrefix(s.SessionURL, c.PublicURL+"/s/") {
		t.Fatalf("session body %.300q (%v)", body, err)
	}
	noteToken(s.SessionURL)
	admin.checkCounts(t, link.ID, 2, 1, 0)
	if l := admin.MustLink(t, link.ID); l.ActiveSessions == nil || *l.ActiveSessions != 1 {
		t.Errorf("link shows active_sessions %v, want 1", l.ActiveSessions)
	}

	// A later retry is a replay too; another key is another claim.
	r, err := fetch(http.MethodPost, c.Gateways[2].PublicBase()+path, nil, "Idempotency-Key", key)
	if err != nil || r.Status != http.StatusOK || !bytes.Equal(r.Body, body) {
		t.Errorf("retry with the same key: %v (%v), want 200 with the identical body", r, err)
	}
	r, err = fetch(http.MethodPost, c.Gateways[0].PublicBase()+path, nil, "Idempotency-Key", key+"-other")
	if err != nil || r.Status != http.StatusCreated || bytes.Equal(r.Body, body) {
		t.Errorf("POST with another key: %v (%v), want 201 with a new session", r, err)
	}
	admin.checkCounts(t, link.ID, 1, 2, 0)
}

// testSessionRanges: multipart/byteranges, suffix ranges and
// unsatisfiable ranges from the real server.
func testSessionRanges(t *testing.T, c *Cluster, obj *Object) {
	link := c.Admin().MustCreateLink(t, obj, LinkRequest{Downloads: 1})
	s := MustMintSession(t, c.PublicURL, link)
	size := int64(len(obj.Data))

	r := MustFetch(t, http.MethodGet, c.Gateways[0].On(s.SessionURL), "Range", "bytes=0-9,100-199")
	if r.Status != http.StatusPartialContent {
		t.Fatalf("%v, want 206; body %.300q", r, r.Body)
	}
	checkPublicHeaders(t, r)
	mt, params, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/byteranges" || params["boundary"] == "" {
		t.Fatalf("%v: Content-Type %q (%v), want multipart/byteranges with a boundary", r, r.Header.Get("Content-Type"), err)
	}
	if got := r.Header.Get("Content-Length"); got != strconv.Itoa(len(r.Body)) || r.BodyErr != nil {
		t.Errorf("%v: Content-Length %q, body %d bytes (read error %v)", r, got, len(r.Body), r.BodyErr)
	}
	mr := multipart.NewReader(bytes.NewReader(r.Body), params["boundary"])
	for _, want := range []struct{ start, end int64 }{{0, 9}, {100, 199}} {
		p, err := mr.NextPart()
		if err != nil {
			t.Fatalf("part %d-%d: %v", want.start, want.end, err)
		}
		if got, cr := p.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-%d/%d", want.start, want.end, size); got != cr {
			t.Errorf("part Content-Range %q, want %q", got, cr)
		}
		data, err := io.ReadAll(p)
		if err != nil || !bytes.Equal(data, obj.Data[want.start:want.end+1]) {
			t.Errorf("part %d-%d: %d bytes (%v) that are not the object's", want.start, want.end, len(data), err)
		}
	}
	if p, err := mr.NextPart(); err != io.EOF {
		t.Errorf("after two parts: part %v, error %v; want the end", p, err)
	}

	r = MustFetch(t, http.MethodGet, c.Gateways[1].On(s.SessionURL), "Range", "bytes=-500")
	if want := fmt.Sprintf("bytes %d-%d/%d", size-500, size-1, size); r.Status != http.StatusPartialContent ||
		r.Header.Get("Content-Range") != want || !bytes.Equal(r.Body, obj.Data[size-500:]) {
		t.Errorf("%v with Content-Range %q and %d bytes, want 206 %s with the last 500 bytes", r, r.Header.Get("Content-Range"), len(r.Body), want)
	}

	r = MustFetch(t, http.MethodGet, c.Gateways[2].On(s.SessionURL), "Range", fmt.Sprintf("bytes=%d-", size))
	checkProblem(t, r, http.StatusRequestedRangeNotSatisfiable, "range-not-satisfiable")
	if got, want := r.Header.Get("Content-Range"), fmt.Sprintf("bytes */%d", size); got != want {
		t.Errorf("%v: Content-Range %q, want %q", r, got, want)
	}

	r = MustFetch(t, http.MethodHead, c.Gateways[0].On(s.SessionURL))
	if r.Status != http.StatusOK || r.Header.Get("Accept-Ranges") != "bytes" || r.Header.Get("Content-Length") != strconv.FormatInt(size, 10) {
		t.Errorf("%v: Accept-Ranges %q, Content-Length %q; want 200, bytes, %d", r, r.Header.Get("Accept-Ranges"), r.Header.Get("Content-Length"), size)
	}
}

func TestSlotOfAKilledProcessIsFreeAgainWithinTheLease(t *testing.T) {
	t.Parallel()
	const lease = 3 * time.Second
	curl := MustBinary(t, "curl")
	c := MustStartCluster(t, ClusterOptions{Processes: 2, Env: map[string]string{"GATEWAY_SLOT_LEASE": lease.String()}})
	admin := c.Admin()
	obj := admin.MustUpload(t, "slots/big.bin", 8<<20)
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1, Session: &SessionSettings{MaxConcurrency: 1}})
	s := MustMintSession(t, c.Gateways[0].PublicBase(), link)
	p1, p2 := c.Gateways[0], c.Gateways[1]

	// A slow range download on process 1 holds the only slot. The network
	// is slow (100 KiB/s), not curl: see Balancer.
	dir := t.TempDir()
	file := filepath.Join(dir, "slow.bin")
	net := MustStartBalancer(t, 100<<10, p1.PublicAddr)
	slow := MustStart(t, dir, curl, "-q", "-sS", "-r", fmt.Sprintf("0-%d", len(obj.Data)-1), "-o", file, net.On(s.SessionURL))
	deadline := time.Now().Add(30 * time.Second)
	for fileSize(file) == 0 {
		if slow.Exited() {
			out, err := slow.Wait()
			t.Fatalf("the slow download ended early (%v): %s", err, out)
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow download received nothing in 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	probe := func() *Reply { return MustFetch(t, http.MethodGet, p2.On(s.SessionURL), "Range", "bytes=0-99") }
	busy := func(r *Reply) {
		t.Helper()
		checkProblem(t, r, http.StatusTooManyRequests, "too-many-concurrent-requests")
		if got := r.Header.Get("Retry-After"); got != "1" {
			t.Errorf("%v: Retry-After %q, want 1", r, got)
		}
	}
	busy(probe())
	// Process 1 renews its lease while it streams: after more than a lease
	// period the slot is still taken.
	time.Sleep(lease + time.Second)
	if r := probe(); r.Status != http.StatusTooManyRequests {
		t.Fatalf("%v while process 1 still streams, more than a lease (%v) later: the running download lost its slot", r, lease)
	}

	p1.Kill(t)
	killed := time.Now()
	const bound = 30 * time.Second
	for {
		r := probe()
		if r.Status == http.StatusPartialContent {
			if !bytes.Equal(r.Body, obj.Data[:100]) {
				t.Errorf("%v: %d bytes that are not the object's first 100", r, len(r.Body))
			}
			t.Logf("process 2 served the session %.1fs after kill -9 of the slot holder (lease %v)", time.Since(killed).Seconds(), lease)
			break
		}
		busy(r)
		if t.Failed() {
			return
		}
		if time.Since(killed) > bound {
			t.Fatalf("the slot of the killed process was still taken %v after kill -9 (lease %v)", bound, lease)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The slow network may still be draining what process 1 sent before it
	// died; that download is over either way.
	slow.Kill()
	checkNoTokenInLogs(t, c.Gateways...)
}

// testConcurrencyCapAcrossProcesses: two slow downloads on two processes
// take both slots of a session; the third process answers 429 (HEAD,
// which takes no slot, still answers 200); once the downloads are cut, the
// slots come back.
func testConcurrencyCapAcrossProcesses(t *testing.T, c *Cluster, obj *Object) {
	curl := MustBinary(t, "curl")
	link := c.Admin().MustCreateLink(t, obj, LinkRequest{Downloads: 1, Session: &SessionSettings{MaxConcurrency: 2}})
	s := MustMintSession(t, c.PublicURL, link)
	dir := t.TempDir()
	var holders []*Background
	for i, g := range c.Gateways[:2] {
		file := filepath.Join(dir, fmt.Sprintf("slow%d.bin", i))
		slow := MustStartBalancer(t, 100<<10, g.PublicAddr)
		holders = append(holders, MustStart(t, dir, curl, "-q", "-sS", "-o", file, slow.On(s.SessionURL)))
		deadline := time.Now().Add(30 * time.Second)
		for fileSize(file) == 0 {
			if holders[i].Exited() {
				out, err := holders[i].Wait()
				t.Fatalf("slow download %d ended early (%v): %s", i+1, err, out)
			}
			if time.Now().After(deadline) {
				t.Fatalf("slow download %d received nothing in 30 s", i+1)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	third := c.Gateways[2].On(s.SessionURL)
	for _, u := range []string{third, c.Gateways[0].On(s.SessionURL)} {
		r := MustFetch(t, http.MethodGet, u, "Range", "bytes=0-99")
		checkProblem(t, r, http.StatusTooManyRequests, "too-many-concurrent-requests")
		if got := r.Header.Get("Retry-After"); got != "1" {
			t.Errorf("%v: Retry-After %q, want 1", r, got)
		}
	}
	if r := MustFetch(t, http.MethodHead, third); r.Status != http.StatusOK {
		t.Errorf("%v while both slots are taken, want 200: HEAD takes no slot", r)
	}
	for _, h := range holders {
		h.Kill()
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := MustFetch(t, http.MethodGet, third, "Range", "bytes=0-99")
		if r.Status == http.StatusPartialContent {
			if !bytes.Equal(r.Body, obj.Data[:100]) {
				t.Errorf("%v: %d bytes that are not the object's first 100", r, len(r.Body))
			}
			break
		}
		if r.Status != http.StatusTooManyRequests || time.Now().After(deadline) {
			t.Fatalf("%v after both slot holders were killed, want 206 (a 429 only until their slots are released)", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// testClientsAtTheCapAreNeverRefused: four clients on a session capped at
// four, each fetching its share in 1 MiB ranges with a new connection for
// every range, so that the balancer moves them from process to process.
// None of them ever has more than one request in flight, so the session
// never has more than its cap in flight: no 429, whichever process a
// range reaches and whatever the process it left keeps of the session.
func testClientsAtTheCapAreNeverRefused(t *testing.T, c *Cluster, obj *Object) {
	const clients, chunk = 4, 1 << 20
	const rounds = 3
	size := int64(len(obj.Data))
	link := c.Admin().MustCreateLink(t, obj, LinkRequest{Downloads: 1, Session: &SessionSettings{MaxConcurrency: clients, ByteBudget: 2 * rounds * size}})
	s := MustMintSession(t, c.PublicURL, link)
	var wg sync.WaitGroup
	errs := make(chan string, 4*clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range rounds {
				for start := int64(i) * chunk; start < size; start += clients * chunk {
					end := min(start+chunk, size) - 1
					r, err := fetch(http.MethodGet, s.SessionURL, nil, "Range", fmt.Sprintf("bytes=%d-%d", start, end), "Connection", "close")
					switch {
					case err != nil:
						errs <- err.Error()
						return
					case r.Status != http.StatusPartialContent || !bytes.Equal(r.Body, obj.Data[start:end+1]):
						errs <- fmt.Sprintf("client %d, round %d, bytes %d-%d: %v (%s)", i, round, start, end, r, r.Header.Get("Content-Type"))
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
