package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// jwksRefreshLimit is the gateway's bound on key-set refetches caused by
// tokens with an unknown kid (SPEC §8: at most once per 10 s).
const jwksRefreshLimit = 10 * time.Second

// TestAccounts runs verified accounts (SPEC §8) and session affinity
// (SPEC §5) on the real binary: three processes verifying JWTs against
// the key set of an issuer the test runs, and single processes taking the
// account from a proxy's header.
func TestAccounts(t *testing.T) {
	t.Parallel()
	iss := MustStartIssuer(t, "dlgate-e2e", []string{"rsa-1", "rsa-2", "rsa-3", "rogue"}, []string{"ed-1"},
		[]string{"rsa-1", "rsa-2", "ed-1"})

	t.Run("JWTsFromAnOIDCIssuer", func(t *testing.T) {
		t.Parallel()
		testJWTAccounts(t, iss)
	})
	t.Run("AnAccountHeaderFromAProxy", func(t *testing.T) {
		t.Parallel()
		t.Run("FromATrustedPeerTheHeaderAndTheForwardedAddressCount", func(t *testing.T) {
			t.Parallel()
			testHeaderFromATrustedPeer(t)
		})
		t.Run("FromAnUntrustedPeerTheHeaderAndTheForwardedAddressAreIgnored", func(t *testing.T) {
			t.Parallel()
			testHeaderFromAnUntrustedPeer(t)
		})
	})
}

// testJWTAccounts starts three processes that verify JWTs with the
// issuer's key set and runs the checks in order: the key rotation comes
// last, so that the processes' start-up fetch of the key set is as far
// behind as possible when the new kid arrives.
func testJWTAccounts(t *testing.T, iss *Issuer) {
	c := MustStartCluster(t, ClusterOptions{Processes: 3, Env: map[string]string{
		"GATEWAY_AUTH":         "jwt",
		"GATEWAY_JWT_JWKS_URL": iss.URL + "/jwks.json",
		"GATEWAY_JWT_ISSUER":   iss.URL,
		"GATEWAY_JWT_AUDIENCE": iss.Audience,
		"GATEWAY_AUTH_COOKIE":  "dl_session",
	}})
	started := time.Now()
	if n, _ := iss.Fetches(); n < len(c.Gateways) {
		t.Fatalf("the issuer served its key set %d times while %d processes started; each loads it at start", n, len(c.Gateways))
	}
	admin := c.Admin()
	small := admin.MustUpload(t, "accounts/small.bin", 256<<10)
	large := admin.MustUpload(t, "accounts/large.bin", 8<<20)

	t.Run("CurlWithABearerTokenDownloadsAnAccountBoundLinkOnEveryProcess", func(t *testing.T) {
		testBearerOnEveryProcess(t, c, iss, small)
	})
	t.Run("CurlWithTheSessionCookieDownloadsIt", func(t *testing.T) {
		testCookie(t, c, iss, small)
	})
	t.Run("AWrongAccountGets404AndAnInvalidToken401AndNeitherSpendsAnything", func(t *testing.T) {
		testRefusedCallers(t, c, iss, small)
	})
	t.Run("TwoFirstGetsOnTwoProcessesMakeOneSessionAndOneClaim", func(t *testing.T) {
		testAffinityAcrossProcesses(t, c, iss, small)
	})
	t.Run("Aria2cOnTheLinkURLSplitsThroughOneSessionForOneClaim", func(t *testing.T) {
		testAria2cOnAnAccountLink(t, c, iss, large)
	})
	t.Run("EveryProcessPicksUpARotatedKeyWithoutARestart", func(t *testing.T) {
		t.Logf("rotation starts %.1fs after the cluster was ready", time.Since(started).Seconds())
		testKeyRotation(t, c, iss, small)
	})
	t.Run("NoJWTOrRawTokenReachesTheLogs", func(t *testing.T) {
		checkNoJWTInLogs(t, iss.Issued(), c.Gateways...)
		checkNoTokenInLogs(t, c.Gateways...)
	})
}

// bearer is the header pair of an Authorization: Bearer credential.
func bearer(jwt string) []string { return []string{"Authorization", "Bearer " + jwt} }

// testBearerOnEveryProcess: curl -H "Authorization: Bearer …" gets the
// file of a link bound to its account from each process, with a token of
// each of the issuer's keys (RS256 twice, EdDSA).
func testBearerOnEveryProcess(t *testing.T, c *Cluster, iss *Issuer, obj *Object) {
	curl := MustBinary(t, "curl")
	admin := c.Admin()
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 3, Account: "alice"})
	dir := t.TempDir()
	for i, kid := range []string{"rsa-1", "rsa-2", "ed-1"} {
		g := c.Gateways[i]
		file := filepath.Join(dir, fmt.Sprintf("%s-%s.bin", g.Name, kid))
		MustRun(t, dir, curl, "-q", "-fsS", "-H", "Authorization: Bearer "+iss.Token(t, kid, "alice"), "-o", file, g.On(link.URL))
		checkFile(t, file, obj)
	}
	admin.checkCounts(t, link.ID, 0, 3, 0)
	for _, gr := range mustGrants(t, admin, link.ID) {
		if gr.AccountID == nil || *gr.AccountID != "alice" || !strings.HasPrefix(gr.Client, "127.0.0.1 curl/") {
			t.Errorf("grant %+v, want account alice and client 127.0.0.1 curl/…", gr)
		}
	}
	t.Logf("curl with a bearer token (RS256 rsa-1, RS256 rsa-2, EdDSA ed-1) got the file from each of %d processes; 3 claims", len(c.Gateways))
}

// testCookie: the same token in the cookie GATEWAY_AUTH_COOKIE names.
func testCookie(t *testing.T, c *Cluster, iss *Issuer, obj *Object) {
	curl := MustBinary(t, "curl")
	admin := c.Admin()
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1, Account: "alice"})
	dir := t.TempDir()
	MustRun(t, dir, curl, "-q", "-fsS", "--cookie", "dl_session="+iss.Token(t, "ed-1", "alice"), "-o", "cookie.bin", link.URL)
	checkFile(t, filepath.Join(dir, "cookie.bin"), obj)
	admin.checkCounts(t, link.ID, 0, 1, 0)
	// A cookie of another name is no credential.
	checkProblem(t, MustFetch(t, http.MethodGet, link.URL, "Cookie", "session="+iss.Token(t, "ed-1", "alice")),
		http.StatusUnauthorized, "authentication-required")
}

// testRefusedCallers: on every process, a valid token of another account
// gets the generic 404; expired, not yet valid, forged and misaddressed
// tokens get 401 invalid_token; no token gets a bare 401 challenge. None
// of that spends anything, and none of the answers quotes the token.
func testRefusedCallers(t *testing.T, c *Cluster, iss *Issuer, obj *Object) {
	curl := MustBinary(t, "curl")
	admin := c.Admin()
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1, Account: "alice"})
	session := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1, Account: "alice", Delivery: "session"})

	with := func(edit func(jwt.MapClaims)) jwt.MapClaims {
		cl := iss.Claims("alice")
		edit(cl)
		return cl
	}
	hourAgo, inAnHour := time.Now().Add(-time.Hour).Unix(), time.Now().Add(time.Hour).Unix()
	invalid := []struct{ why, token string }{
		{"expired an hour ago", iss.Sign(t, "rsa-2", "rsa-2", with(func(cl jwt.MapClaims) { cl["exp"], cl["nbf"] = hourAgo, hourAgo-60 }))},
		{"valid only in an hour", iss.Sign(t, "ed-1", "ed-1", with(func(cl jwt.MapClaims) { cl["nbf"], cl["exp"] = inAnHour, inAnHour+3600 }))},
		// A key the issuer never published, under a published kid: no
		// refresh (the kid is known), the signature fails.
		{"signed by an unknown key", iss.Sign(t, "rogue", "rsa-2", iss.Claims("alice"))},
		{"of another issuer", iss.Sign(t, "rsa-2", "rsa-2", with(func(cl jwt.MapClaims) { cl["iss"] = "https://evil.example" }))},
		{"for another audience", iss.Sign(t, "rsa-2", "rsa-2", with(func(cl jwt.MapClaims) { cl["aud"] = "someone-else" }))},
		{"without a kid (the set has several keys)", iss.Sign(t, "rsa-2", "", iss.Claims("alice"))},
		{"with alg none", iss.SignRaw(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, "rsa-2", iss.Claims("alice"))},
		{"HS256 keyed with the public key (algorithm confusion)", iss.SignRaw(t, jwt.SigningMethodHS256, iss.PublicPEM(t, "rsa-2"), "rsa-2", iss.Claims("alice"))},
		{"EdDSA under an RSA key's kid", iss.Sign(t, "ed-1", "rsa-2", iss.Claims("alice"))},
		{"without an account", iss.Sign(t, "rsa-2", "rsa-2", with(func(cl jwt.MapClaims) { delete(cl, "sub") }))},
		{"garbage", "not.a.jwt"},
	}
	bob := iss.Token(t, "rsa-2", "bob")
	for _, g := range c.Gateways {
		for _, u := range []string{link.URL, session.URL} {
			r := MustFetch(t, http.MethodGet, g.On(u), bearer(bob)...)
			checkProblem(t, r, http.StatusNotFound, "link-unavailable")
			if r.Header.Get("WWW-Authenticate") != "" {
				t.Errorf("%v with bob's token: WWW-Authenticate %q, want none (a wrong account is the generic 404)", r, r.Header.Get("WWW-Authenticate"))
			}
			r = MustFetch(t, http.MethodGet, g.On(u))
			checkProblem(t, r, http.StatusUnauthorized, "authentication-required")
			if got := r.Header.Get("WWW-Authenticate"); got != "Bearer" {
				t.Errorf("%v without a token: WWW-Authenticate %q, want Bearer", r, got)
			}
			for _, tc := range invalid {
				for _, hdr := range [][]string{bearer(tc.token), {"Cookie", "dl_session=" + tc.token}} {
					r := MustFetch(t, http.MethodGet, g.On(u), hdr...)
					checkProblem(t, r, http.StatusUnauthorized, "authentication-required")
					if got := r.Header.Get("WWW-Authenticate"); got != `Bearer error="invalid_token"` {
						t.Errorf("%v with a token %s in %s: WWW-Authenticate %q, want Bearer error=\"invalid_token\"", r, tc.why, hdr[0], got)
					}
					if len(tc.token) > 20 && bytes.Contains(r.Body, []byte(tc.token[len(tc.token)-20:])) {
						t.Errorf("%v: the answer quotes the token %s", r, tc.why)
					}
				}
			}
		}
	}
	admin.checkCounts(t, link.ID, 1, 0, 0)
	admin.checkCounts(t, session.ID, 1, 0, 0)

	// Real curl sees the same: 404 for bob, and alice still gets the file.
	dir := t.TempDir()
	out, err := run(t, dir, curl, "-q", "-sS", "-o", "bob.bin", "-w", "%{http_code}", "-H", "Authorization: Bearer "+bob, link.URL)
	if err != nil || out != "404" {
		t.Errorf("curl with bob's token: %q (%v), want 404", out, err)
	}
	admin.checkCounts(t, link.ID, 1, 0, 0)
	MustRun(t, dir, curl, "-q", "-fsS", "-o", "alice.bin", "-H", "Authorization: Bearer "+iss.Token(t, "rsa-1", "alice"), link.URL)
	checkFile(t, filepath.Join(dir, "alice.bin"), obj)
	admin.checkCounts(t, link.ID, 0, 1, 0)

	reasons := authFailures(t, c.Gateways...)
	t.Logf("on %d processes × 2 links: bob's token 404, no token 401, %d kinds of invalid token 401 (Bearer and cookie); remaining unchanged; refusals by reason: %v",
		len(c.Gateways), len(invalid), reasons)
	for _, want := range []string{"expired", "not_yet_valid", "bad_signature", "wrong_issuer", "wrong_audience", "missing_kid", "alg_mismatch", "missing_claim", "malformed"} {
		if reasons[want] == 0 {
			t.Errorf("gateway_auth_failures_total shows no refusal for reason %q: %v", want, reasons)
		}
	}
}

// authFailures sums gateway_auth_failures_total by reason over gws.
func authFailures(tb testing.TB, gws ...*Gateway) map[string]int {
	tb.Helper()
	out := map[string]int{}
	for _, g := range gws {
		r := MustFetch(tb, http.MethodGet, "http://"+g.AdminAddr+"/metrics")
		sc := bufio.NewScanner(bytes.NewReader(r.Body))
		for sc.Scan() {
			line := sc.Text()
			rest, ok := strings.CutPrefix(line, `gateway_auth_failures_total{reason="`)
			if !ok {
				continue
			}
			reason, value, _ := strings.Cut(rest, `"} `)
			n, _ := strconv.ParseFloat(value, 64)
			out[reason] += int(n)
		}
	}
	return out
}

// testAffinityAcrossProcesses: one account's two simultaneous first GETs
// of a session-delivery link, one on each of two processes, both get 303
// to one session for one claim; a Range GET on the link URL gets 303 to
// it too; once it is revoked the next GET claims anew.
func testAffinityAcrossProcesses(t *testing.T, c *Cluster, iss *Issuer, obj *Object) {
	admin := c.Admin()
	alice := iss.Token(t, "rsa-2", "alice")
	const trials = 5
	var first *Link
	var firstSession *Session
	for trial := 1; trial <= trials; trial++ {
		link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 3, Account: "alice", Delivery: "session"})
		path := "/d/" + link.Token
		replies := MustStampede(t, []string{c.Gateways[0].PublicAddr, c.Gateways[1].PublicAddr}, 2, http.MethodGet, path, func(addr string) string {
			return "GET " + path + " HTTP/1.1\r\nHost: " + addr + "\r\nAuthorization: Bearer " + alice +
				"\r\nUser-Agent: dlgate-e2e-stampede\r\nConnection: close\r\n"
		})
		var locs []string
		var s Session
		for _, r := range replies {
			if r.Status != http.StatusSeeOther {
				t.Fatalf("trial %d: %v, want 303; body %.300q (%v)", trial, r, r.Body, r.BodyErr)
			}
			checkPublicHeaders(t, r)
			if err := json.Unmarshal(r.Body, &s); err != nil {
				t.Fatalf("trial %d: %v: body %.300q: %v", trial, r, r.Body, err)
			}
			noteToken(s.SessionURL)
			locs = append(locs, r.Header.Get("Location"))
		}
		if locs[0] != locs[1] || !strings.HasPrefix(locs[0], c.PublicURL+"/s/") {
			t.Errorf("trial %d: the two first GETs were sent to %s and %s, want one session", trial, redact(locs[0]), redact(locs[1]))
		}
		admin.checkCounts(t, link.ID, 2, 1, 0)
		if l := admin.MustLink(t, link.ID); l.ActiveSessions == nil || *l.ActiveSessions != 1 {
			t.Errorf("trial %d: active_sessions %v, want 1", trial, l.ActiveSessions)
		}
		if first == nil {
			first, firstSession = link, &s
		}
	}
	t.Logf("%d trials of two simultaneous first GETs on two processes: one session and one claim each time", trials)

	link, s := first, firstSession
	loc := s.NamedSessionURL
	// A Range on the link URL, on the third process: 303 to the session,
	// which serves the range to alice only.
	r := MustFetch(t, http.MethodGet, c.Gateways[2].On(link.URL), append(bearer(alice), "Range", "bytes=100-199")...)
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") != loc {
		t.Fatalf("%v with Range, Location %q; want 303 to the session %s", r, redact(r.Header.Get("Location")), redact(loc))
	}
	r = MustFetch(t, http.MethodGet, c.Gateways[2].On(loc), append(bearer(alice), "Range", "bytes=100-199")...)
	if r.Status != http.StatusPartialContent || !bytes.Equal(r.Body, obj.Data[100:200]) {
		t.Errorf("%v (%d bytes), want 206 with bytes 100-199", r, len(r.Body))
	}
	checkProblem(t, MustFetch(t, http.MethodGet, c.Gateways[0].On(loc), "Range", "bytes=0-9"), http.StatusUnauthorized, "authentication-required")
	checkProblem(t, MustFetch(t, http.MethodGet, c.Gateways[1].On(loc), append(bearer(iss.Token(t, "rsa-2", "bob")), "Range", "bytes=0-9")...),
		http.StatusNotFound, "session-unavailable")
	// Another account's Range is not sent anywhere.
	checkProblem(t, MustFetch(t, http.MethodGet, c.Gateways[1].On(link.URL), append(bearer(iss.Token(t, "ed-1", "bob")), "Range", "bytes=0-9")...),
		http.StatusConflict, "range-requires-session")
	admin.checkCounts(t, link.ID, 2, 1, 0)

	// A revoked session is not reused: a Range finds no session to
	// resume, and the next GET claims a new one.
	admin.MustRevokeSession(t, s.SessionID)
	checkProblem(t, MustFetch(t, http.MethodGet, c.Gateways[1].On(link.URL), append(bearer(alice), "Range", "bytes=0-9")...),
		http.StatusConflict, "range-requires-session")
	r = MustFetch(t, http.MethodGet, c.Gateways[2].On(link.URL), bearer(alice)...)
	if r.Status != http.StatusSeeOther || r.Header.Get("Location") == "" || r.Header.Get("Location") == loc {
		t.Fatalf("%v after the revocation, Location %q; want 303 to a new session", r, redact(r.Header.Get("Location")))
	}
	var again Session
	if err := json.Unmarshal(r.Body, &again); err == nil {
		noteToken(again.SessionURL)
	}
	checkBody(t, MustFetch(t, http.MethodGet, r.Header.Get("Location"), bearer(alice)...), obj)
	admin.checkCounts(t, link.ID, 1, 2, 0)
}

// testAria2cOnAnAccountLink: aria2c -x4 -s4 with the bearer token on
// every request, pointed at the link URL through the balancer. What the
// gateway guarantees, whatever process each connection lands on and
// however aria2c schedules them: the file is byte-exact for one claim and
// one session, exactly one request minted it, and a Range on the link URL
// on every process is sent to that same session. How many processes
// aria2c's own connections reached depends on its speed and is only
// reported.
func testAria2cOnAnAccountLink(t *testing.T, c *Cluster, iss *Issuer, obj *Object) {
	aria2c := MustBinary(t, "aria2c")
	admin := c.Admin()
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 3, Account: "alice", Delivery: "session", Filename: "film.mkv"})
	before := linkLogLines(t, link.ID, c.Gateways...)
	dir := t.TempDir()
	alice := iss.Token(t, "ed-1", "alice")
	out := MustRun(t, dir, aria2c, "--no-conf", "-x4", "-s4", "-k1M", "--max-tries=5", "--retry-wait=1",
		"--header=Authorization: Bearer "+alice,
		"--file-allocation=none", "--summary-interval=0", "--console-log-level=notice",
		"--allow-overwrite=true", "--auto-file-renaming=false", "-d", dir, "-o", "a.bin", link.URL)
	checkFile(t, filepath.Join(dir, "a.bin"), obj)
	admin.checkCounts(t, link.ID, 2, 1, 0)
	if l := admin.MustLink(t, link.ID); l.ActiveSessions == nil || *l.ActiveSessions != 1 {
		t.Errorf("link shows active_sessions %v, want 1", l.ActiveSessions)
	}
	// Info lines reach the log within 50 ms (internal/logbuf): wait for
	// the mint's line rather than for a time.
	var (
		sent   []string
		minted int
	)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		after := linkLogLines(t, link.ID, c.Gateways...)
		sent, minted = nil, 0
		for i, g := range c.Gateways {
			sent = append(sent, fmt.Sprintf("%s %d", g.Name, after[i].total()-before[i].total()))
			minted += after[i].minted - before[i].minted
		}
		if minted > 0 || time.Now().After(deadline) {
			break
		}
	}
	if minted != 1 {
		t.Errorf("%d requests minted a session of the link, want exactly 1", minted)
	}
	// Every process sends the account's Range on the link URL to the one
	// session (SPEC §5), asked directly rather than through the balancer.
	loc := ""
	for _, g := range c.Gateways {
		r := MustFetch(t, http.MethodGet, g.On(link.URL), append(bearer(alice), "Range", "bytes=0-9")...)
		if r.Status != http.StatusSeeOther {
			t.Fatalf("%s: %v for a Range on the link URL after aria2c, want 303 to its session", g.Name, r)
		}
		if loc == "" {
			loc = r.Header.Get("Location")
		} else if r.Header.Get("Location") != loc {
			t.Errorf("%s sent the Range to %q, another process to %q: want one session", g.Name, redact(r.Header.Get("Location")), redact(loc))
		}
	}
	admin.checkCounts(t, link.ID, 2, 1, 0)
	t.Logf("aria2c -x4 -s4 on the link URL via the balancer: byte-exact %d bytes, one claim, one session; its requests on the link URL (the one that minted the session, the others sent to it) by process: %s; aria2c output:\n%s",
		len(obj.Data), strings.Join(sent, ", "), lastLines(out, 6))
}

// linkLines counts one process's log lines of requests on a link URL:
// those that minted a session and those sent to an existing one.
type linkLines struct{ minted, sent int }

func (n linkLines) total() int { return n.minted + n.sent }

// linkLogLines counts, per process, the log lines of requests on the link
// URL of linkID that minted its session or were sent to the existing one.
func linkLogLines(tb testing.TB, linkID string, gws ...*Gateway) []linkLines {
	tb.Helper()
	out := make([]linkLines, len(gws))
	for i, g := range gws {
		b, err := os.ReadFile(g.StderrPath)
		if err != nil {
			tb.Fatal(err)
		}
		for line := range strings.Lines(string(b)) {
			if !strings.Contains(line, linkID) {
				continue
			}
			switch {
			case strings.Contains(line, "session minted"):
				out[i].minted++
			case strings.Contains(line, "range sent to the affinity session"), strings.Contains(line, "affinity session reused"):
				out[i].sent++
			}
		}
	}
	return out
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// testKeyRotation: the issuer drops rsa-1 and publishes rsa-3. A token
// signed with rsa-3 works on every process without a restart (the
// unknown kid makes each process refetch the set, at most once per 10 s,
// so a process that fetched less than 10 s ago takes up to the rest of
// that window); rsa-1 tokens are refused from then on. Probing uses HEAD,
// which checks the credential and claims nothing.
func testKeyRotation(t *testing.T, c *Cluster, iss *Issuer, obj *Object) {
	curl := MustBinary(t, "curl")
	admin := c.Admin()
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 3, Account: "alice"})
	old := iss.Token(t, "rsa-1", "alice")
	for _, g := range c.Gateways {
		if r := MustFetch(t, http.MethodHead, g.On(link.URL), bearer(old)...); r.Status != http.StatusOK {
			t.Fatalf("%v with an rsa-1 token before the rotation, want 200", r)
		}
	}

	before, lastFetch := iss.Fetches()
	iss.Publish(t, "rsa-2", "ed-1", "rsa-3")
	rotated := time.Now()
	window := max(0, lastFetch.Add(jwksRefreshLimit).Sub(rotated))
	t.Logf("rotated rsa-1 → rsa-3; the last fetch of the key set was %.1fs before, so a refetch may have to wait %.1fs",
		rotated.Sub(lastFetch).Seconds(), window.Seconds())

	fresh := iss.Token(t, "rsa-3", "alice")
	type pickup struct {
		after  time.Duration
		probes int
		last   *Reply
		err    error
	}
	pickups := make([]pickup, len(c.Gateways))
	deadline := rotated.Add(window + 5*time.Second)
	var wg sync.WaitGroup
	for i, g := range c.Gateways {
		wg.Go(func() {
			p := &pickups[i]
			for {
				p.probes++
				r, err := fetch(http.MethodHead, g.On(link.URL), nil, bearer(fresh)...)
				p.last, p.err = r, err
				if err != nil || r.Status == http.StatusOK {
					p.after = time.Since(rotated)
					return
				}
				if r.Status != http.StatusUnauthorized || time.Now().After(deadline) {
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
		})
	}
	wg.Wait()
	var report []string
	for i, p := range pickups {
		g := c.Gateways[i]
		switch {
		case p.err != nil:
			t.Errorf("%s: HEAD with an rsa-3 token: %v", g.Name, p.err)
		case p.last.Status != http.StatusOK:
			t.Errorf("%s: %v with an rsa-3 token after %d probes over %.1fs, want 200: the new kid was not picked up (the refetch limit left a window of %.1fs)",
				g.Name, p.last, p.probes, time.Since(rotated).Seconds(), window.Seconds())
		default:
			report = append(report, fmt.Sprintf("%s %.2fs (%d probes)", g.Name, p.after.Seconds(), p.probes))
		}
	}
	if t.Failed() {
		return
	}
	after, _ := iss.Fetches()
	t.Logf("rsa-3 accepted without a restart after: %s; the issuer served the key set %d times since the rotation", strings.Join(report, ", "), after-before)
	if after-before != len(c.Gateways) {
		t.Errorf("the key set was fetched %d times after the rotation, want %d (one refetch per process for the unknown kid)", after-before, len(c.Gateways))
	}

	// rsa-1 is gone from every process's keys; rsa-2 and ed-1 stay.
	for _, g := range c.Gateways {
		for _, m := range []string{http.MethodHead, http.MethodGet} {
			r := MustFetch(t, m, g.On(link.URL), bearer(old)...)
			checkProblem(t, r, http.StatusUnauthorized, "authentication-required")
			if got := r.Header.Get("WWW-Authenticate"); got != `Bearer error="invalid_token"` {
				t.Errorf("%v with the rotated-out rsa-1 token: WWW-Authenticate %q", r, got)
			}
		}
		for _, kid := range []string{"rsa-2", "ed-1"} {
			if r := MustFetch(t, http.MethodHead, g.On(link.URL), bearer(iss.Token(t, kid, "alice"))...); r.Status != http.StatusOK {
				t.Errorf("%v with an %s token after the rotation, want 200", r, kid)
			}
		}
	}
	admin.checkCounts(t, link.ID, 3, 0, 0)
	dir := t.TempDir()
	for _, g := range c.Gateways {
		file := filepath.Join(dir, g.Name+".bin")
		MustRun(t, dir, curl, "-q", "-fsS", "-H", "Authorization: Bearer "+fresh, "-o", file, g.On(link.URL))
		checkFile(t, file, obj)
	}
	admin.checkCounts(t, link.ID, 0, 3, 0)
	if reasons := authFailures(t, c.Gateways...); reasons["unknown_kid"] == 0 {
		t.Errorf("no refusal counted as unknown_kid: %v", reasons)
	}
}

// checkNoJWTInLogs checks that no JWT the issuer signed appears in the
// processes' output: JWTs never reach a log line (SPEC §8).
func checkNoJWTInLogs(tb testing.TB, jwts []string, gws ...*Gateway) {
	tb.Helper()
	if len(jwts) == 0 {
		tb.Fatal("no JWT was issued; the check would prove nothing")
	}
	needles := make([]string, len(jwts))
	for i, tok := range jwts {
		needles[i] = jwtSignature(tok)
		if len(needles[i]) < 20 { // alg none has no signature
			needles[i] = tok
		}
	}
	checkNotLogged(tb, "JWT", needles, gws...)
}

// grant is one row of GET /v1/links/{id}/grants.
type grant struct {
	Status    string  `json:"status"`
	AccountID *string `json:"account_id"`
	Client    string  `json:"client"`
}

// mustGrants returns a link's grants, newest first.
func mustGrants(tb testing.TB, a *Admin, linkID string) []grant {
	tb.Helper()
	var page struct {
		Grants []grant `json:"grants"`
	}
	a.call(tb, http.MethodGet, "/v1/links/"+linkID+"/grants", nil, http.StatusOK, &page)
	return page.Grants
}

// headerCluster starts one process taking the account from
// X-Auth-Request-User when the direct peer is inside trusted.
func headerCluster(t *testing.T, trusted string) *Cluster {
	return MustStartCluster(t, ClusterOptions{Processes: 1, Env: map[string]string{
		"GATEWAY_AUTH":            "header",
		"GATEWAY_AUTH_HEADER":     "X-Auth-Request-User",
		"GATEWAY_TRUSTED_PROXIES": trusted,
	}})
}

// testHeaderFromATrustedPeer: with 127.0.0.0/8 trusted, the test (peer
// 127.0.0.1) is the authenticating proxy: its account header counts, and
// the grant records the right-most X-Forwarded-For entry that is not
// itself a trusted proxy.
func testHeaderFromATrustedPeer(t *testing.T) {
	curl := MustBinary(t, "curl")
	c := headerCluster(t, "127.0.0.0/8, 10.0.0.0/8")
	g := c.Gateways[0]
	admin := c.Admin()
	obj := admin.MustUpload(t, "accounts/header.bin", 64<<10)
	link := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 2, Account: "alice"})

	checkProblem(t, MustFetch(t, http.MethodGet, g.On(link.URL)), http.StatusUnauthorized, "authentication-required")
	checkProblem(t, MustFetch(t, http.MethodGet, g.On(link.URL), "X-Auth-Request-User", "bob"), http.StatusNotFound, "link-unavailable")
	admin.checkCounts(t, link.ID, 2, 0, 0)

	dir := t.TempDir()
	for i, xff := range []string{
		"198.51.100.1, 203.0.113.7",        // client, then the proxy's peer
		"203.0.113.9, 10.1.2.3, 127.0.0.5", // trusted hops on the right are skipped
	} {
		file := filepath.Join(dir, fmt.Sprintf("h%d.bin", i))
		MustRun(t, dir, curl, "-q", "-fsS", "-H", "X-Auth-Request-User: alice", "-H", "X-Forwarded-For: "+xff, "-o", file, g.On(link.URL))
		checkFile(t, file, obj)
	}
	admin.checkCounts(t, link.ID, 0, 2, 0)
	grants := mustGrants(t, admin, link.ID)
	want := []string{"203.0.113.9 curl/", "203.0.113.7 curl/"} // newest first
	if len(grants) != len(want) {
		t.Fatalf("grants %+v, want %d", grants, len(want))
	}
	for i, gr := range grants {
		if !strings.HasPrefix(gr.Client, want[i]) || gr.AccountID == nil || *gr.AccountID != "alice" {
			t.Errorf("grant %+v, want account alice and client %s…", gr, want[i])
		}
	}
	t.Logf("trusted peer: header account honoured (401 without, 404 for bob, 2 downloads for alice); clients recorded %q, %q",
		grants[1].Client, grants[0].Client)
}

// testHeaderFromAnUntrustedPeer: with only 192.0.2.0/24 trusted, the
// test's account header is ignored (an account-bound link answers 401 and
// spends nothing) and so are its forwarding headers: the grant of an
// unbound link records the direct peer and no account.
func testHeaderFromAnUntrustedPeer(t *testing.T) {
	curl := MustBinary(t, "curl")
	c := headerCluster(t, "192.0.2.0/24")
	g := c.Gateways[0]
	admin := c.Admin()
	obj := admin.MustUpload(t, "accounts/header.bin", 64<<10)
	bound := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1, Account: "alice"})
	spoof := []string{"X-Auth-Request-User", "alice", "X-Forwarded-For", "203.0.113.7", "Forwarded", "for=203.0.113.8"}
	for _, m := range []string{http.MethodGet, http.MethodHead, http.MethodPost} {
		r := MustFetch(t, m, g.On(bound.URL), spoof...)
		checkProblem(t, r, http.StatusUnauthorized, "authentication-required")
		if got := r.Header.Get("WWW-Authenticate"); got != "Bearer" {
			t.Errorf("%v: WWW-Authenticate %q, want Bearer", r, got)
		}
	}
	admin.checkCounts(t, bound.ID, 1, 0, 0)

	open := admin.MustCreateLink(t, obj, LinkRequest{Downloads: 1})
	dir := t.TempDir()
	MustRun(t, dir, curl, "-q", "-fsS", "-H", "X-Auth-Request-User: alice", "-H", "X-Forwarded-For: 203.0.113.7",
		"-H", "Forwarded: for=203.0.113.8", "-o", "open.bin", g.On(open.URL))
	checkFile(t, filepath.Join(dir, "open.bin"), obj)
	admin.checkCounts(t, open.ID, 0, 1, 0)
	grants := mustGrants(t, admin, open.ID)
	if len(grants) != 1 || !strings.HasPrefix(grants[0].Client, "127.0.0.1 curl/") || grants[0].AccountID != nil {
		t.Fatalf("grants %+v, want one by no account from client 127.0.0.1 curl/…", grants)
	}
	if slices.ContainsFunc([]string{"203.0.113.7", "203.0.113.8"}, func(a string) bool { return strings.Contains(grants[0].Client, a) }) {
		t.Errorf("grant client %q took a forwarded address from an untrusted peer", grants[0].Client)
	}
	t.Logf("untrusted peer: header ignored (401 Bearer on the bound link, remaining 1), spoofed X-Forwarded-For/Forwarded ignored: client %q", grants[0].Client)
}
