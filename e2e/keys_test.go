package e2e

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// apiKey is a key made through POST /v1/keys, with its text.
type apiKey struct {
	ID        string  `json:"id"`
	Name      string  `json:"name"`
	Key       string  `json:"key"`
	ExpiresAt *string `json:"expires_at"`
}

// issuedKeys holds every key text the tests were given, to look for them
// in the gateways' logs afterwards.
var issuedKeys sync.Map // key text → struct{}

// MustCreateKey makes a key with scopes (and expires_in seconds, when not
// 0) through a's admin API.
func (a *Admin) MustCreateKey(tb testing.TB, name string, expiresIn int, scopes ...string) apiKey {
	tb.Helper()
	req := map[string]any{"name": name, "scopes": scopes}
	if expiresIn > 0 {
		req["expires_in"] = expiresIn
	}
	var k apiKey
	a.call(tb, http.MethodPost, "/v1/keys", req, http.StatusCreated, &k)
	if k.ID == "" || !strings.HasPrefix(k.Key, "dlk_") {
		tb.Fatalf("POST /v1/keys answered %+v", k)
	}
	issuedKeys.Store(k.Key, struct{}{})
	return k
}

// checkAdminProblem checks that r is an admin API problem answer with
// status and a type ending in "/"+kind (the admin listener has none of the
// public headers).
func checkAdminProblem(tb testing.TB, r *Reply, status int, kind string) {
	tb.Helper()
	var p problem
	if err := json.Unmarshal(r.Body, &p); r.Status != status || err != nil || !strings.HasSuffix(p.Type, "/"+kind) ||
		r.Header.Get("Content-Type") != "application/problem+json" {
		tb.Errorf("%v, want %d %s; body %.300q", r, status, kind, r.Body)
	}
}

// as is a client of g's admin API authenticated with key.
func as(g *Gateway, key apiKey) *Admin { return &Admin{Base: "http://" + g.AdminAddr, Token: key.Key} }

// TestKeys runs operators' keys and the audit trail on the cluster of three
// processes, with a webhook receiver: revocation on every process within
// 1 s, expiry, the audit of changes made by three keys on three processes
// (in GET /v1/audit, in `gateway audit`, and in the webhook events), and
// no key's text in any log line or error body.
func TestKeys(t *testing.T) {
	t.Parallel()
	rv := mustStartReceiver(t)
	c := MustStartCluster(t, ClusterOptions{Env: map[string]string{
		"GATEWAY_WEBHOOK_URL":    rv.srv.URL + "/events",
		"GATEWAY_WEBHOOK_SECRET": rv.secret,
	}})
	boot := c.Admin()
	var bodies sync.Map // the bodies of refusals, to look for key texts in

	t.Run("ARevokedKeyIsRefusedOnEveryProcessWithinASecond", func(t *testing.T) {
		k := boot.MustCreateKey(t, "to revoke", 0, "links:read")
		// Each process verifies the key, so that each has it cached.
		for _, g := range c.Gateways {
			as(g, k).call(t, http.MethodGet, "/v1/links?limit=1", nil, http.StatusOK, nil)
		}
		boot.call(t, http.MethodDelete, "/v1/keys/"+k.ID, nil, http.StatusNoContent, nil)
		answered := time.Now()
		guarantee := answered.Add(time.Second)
		var (
			wg     sync.WaitGroup
			mu     sync.Mutex
			late   []string                     // 2xx to requests sent after the guarantee
			first  = map[string]time.Duration{} // first 401 after the answer, per process
			errors []string
		)
		for _, g := range c.Gateways {
			wg.Go(func() {
				// Poll for twice the guarantee: a bounded wait, and long
				// enough to see that a refusal stays a refusal. At most
				// 14 polls, each a failed authentication once refused:
				// below the 20 a process lets an address fail in 10 s
				// before it throttles it.
				for end := answered.Add(2 * time.Second); time.Now().Before(end); time.Sleep(150 * time.Millisecond) {
					sent := time.Now()
					r, err := fetch(http.MethodGet, "http://"+g.AdminAddr+"/v1/links?limit=1", nil, "Authorization", "Bearer "+k.Key)
					mu.Lock()
					switch {
					case err != nil:
						errors = append(errors, g.Name+": "+err.Error())
					case r.Status/100 == 2 && sent.After(guarantee):
						late = append(late, g.Name+" at "+sent.Sub(answered).String())
					case r.Status == http.StatusUnauthorized:
						if _, ok := first[g.Name]; !ok {
							first[g.Name] = sent.Sub(answered)
						}
						bodies.Store(string(r.Body), struct{}{})
					case r.Status/100 != 2:
						errors = append(errors, g.Name+": "+r.String())
					}
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if len(errors) > 0 {
			t.Errorf("unexpected answers: %v", errors)
		}
		if len(late) > 0 {
			t.Errorf("the revoked key was accepted more than 1 s after the DELETE's answer: %v", late)
		}
		for _, g := range c.Gateways {
			if _, ok := first[g.Name]; !ok {
				t.Errorf("%s never refused the revoked key within 2 s", g.Name)
			}
		}
		t.Logf("first 401 after the DELETE's answer, per process: %v", first)
	})

	t.Run("AnExpiredKeyIsRefusedOnEveryProcess", func(t *testing.T) {
		k := boot.MustCreateKey(t, "short-lived", 1, "links:read")
		expires, err := time.Parse(time.RFC3339Nano, *k.ExpiresAt)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Until(expires.Add(100 * time.Millisecond)))
		for _, g := range c.Gateways {
			r, err := fetch(http.MethodGet, "http://"+g.AdminAddr+"/v1/links?limit=1", nil, "Authorization", "Bearer "+k.Key)
			if err != nil {
				t.Fatal(err)
			}
			checkAdminProblem(t, r, http.StatusUnauthorized, "unauthorized")
			bodies.Store(string(r.Body), struct{}{})
		}
	})

	t.Run("ThreeKeysOnThreeProcessesAreAuditedAndNamedInTheirWebhooks", func(t *testing.T) {
		alice := boot.MustCreateKey(t, "alice", 0, "links:write")
		bob := boot.MustCreateKey(t, "bob", 0, "links:write")
		carol := boot.MustCreateKey(t, "carol", 0, "links:write")
		auditor := boot.MustCreateKey(t, "auditor", 0, "audit:read")
		obj := boot.MustUpload(t, "keys/audited.bin", 4096)

		l := as(c.Gateways[0], alice).MustCreateLink(t, obj, LinkRequest{Downloads: 1})
		as(c.Gateways[1], bob).call(t, http.MethodPost, "/v1/links/"+l.ID+"/allowance", map[string]any{"add": 2, "reason": "e2e"}, http.StatusOK, nil)
		as(c.Gateways[2], carol).call(t, http.MethodPost, "/v1/links/"+l.ID+"/revoke", nil, http.StatusOK, nil)
		// A key without the scope changes nothing and is told which.
		r, err := fetch(http.MethodPost, "http://"+c.Gateways[1].AdminAddr+"/v1/links/"+l.ID+"/revoke", nil, "Authorization", "Bearer "+auditor.Key)
		if err != nil {
			t.Fatal(err)
		}
		checkAdminProblem(t, r, http.StatusForbidden, "insufficient-scope")
		bodies.Store(string(r.Body), struct{}{})

		want := []struct{ action, keyID, keyName string }{
			{"link.revoked", carol.ID, "carol"}, {"link.allowance_added", bob.ID, "bob"}, {"link.created", alice.ID, "alice"}}
		type entry struct {
			Action string `json:"action"`
			Actor  struct {
				KeyID   string `json:"key_id"`
				KeyName string `json:"key_name"`
			} `json:"actor"`
			RequestID string `json:"request_id"`
		}
		check := func(where string, got []entry) {
			t.Helper()
			if len(got) != len(want) {
				t.Fatalf("%s: %d entries for the link, want 3: %+v", where, len(got), got)
			}
			for i, w := range want {
				if e := got[i]; e.Action != w.action || e.Actor.KeyID != w.keyID || e.Actor.KeyName != w.keyName || len(e.RequestID) != 24 {
					t.Errorf("%s: entry %d = %+v, want %s by %s (%s) with a request id", where, i, e, w.action, w.keyName, w.keyID)
				}
			}
		}
		// The trail is the same from every process.
		for _, g := range c.Gateways {
			var page struct {
				Entries []entry `json:"entries"`
			}
			as(g, auditor).call(t, http.MethodGet, "/v1/audit?target_id="+l.ID, nil, http.StatusOK, &page)
			check("GET /v1/audit on "+g.Name, page.Entries)
		}
		// And through the CLI, as an operator reads it.
		cmd := exec.Command(MustGatewayBinary(t), "audit", "--target", l.ID)
		cmd.Env = childEnv(map[string]string{"GATEWAY_ADMIN_URL": "http://" + c.Gateways[2].AdminAddr, "GATEWAY_ADMIN_TOKEN": auditor.Key})
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("gateway audit: %v: %s", err, stderr.String())
		}
		var lines []entry
		for line := range strings.Lines(stdout.String()) {
			var e entry
			if err := json.Unmarshal([]byte(line), &e); err != nil {
				t.Fatalf("gateway audit printed %q: %v", line, err)
			}
			lines = append(lines, e)
		}
		check("gateway audit", lines)

		// The webhook events of the changes name the same keys.
		waitFor(t, 30*time.Second, "the receiver did not get link.created and link.revoked", func() bool {
			return len(rv.Delivered(l.ID)) >= 2
		})
		actors := map[string]map[string]any{}
		for _, h := range rv.Delivered(l.ID) {
			if !h.Verified {
				t.Errorf("event %s (%s) has no valid signature", h.ID, h.Event.Type)
			}
			a, _ := h.Event.Data["actor"].(map[string]any)
			actors[h.Event.Type] = a
		}
		for typ, k := range map[string]apiKey{"link.created": alice, "link.revoked": carol} {
			if a := actors[typ]; a["key_id"] != k.ID || a["key_name"] != k.Name {
				t.Errorf("%s event's actor = %v, want %s (%s)", typ, a, k.Name, k.ID)
			}
		}
		t.Logf("3 changes by 3 keys on 3 processes: audited alike on each process and in the CLI; webhook actors %v", actors)
	})

	t.Run("NoKeyIsInALogLineOrAnErrorBody", func(t *testing.T) {
		var keys []string
		issuedKeys.Range(func(k, _ any) bool {
			keys = append(keys, k.(string))
			return true
		})
		if len(keys) == 0 {
			t.Fatal("no key was recorded; the check would prove nothing")
		}
		// The text without its prefix too: a log that cut "dlk_" off
		// would still leak the secret.
		secrets := append([]string(nil), keys...)
		for _, k := range keys {
			secrets = append(secrets, strings.TrimPrefix(k, "dlk_"))
		}
		checkNotLogged(t, "key", secrets, c.Gateways...)
		n := 0
		bodies.Range(func(b, _ any) bool {
			n++
			for _, s := range secrets {
				if strings.Contains(b.(string), s) {
					t.Errorf("an error body carries a key (%s…): %q", s[:6], b)
				}
			}
			return true
		})
		if n == 0 {
			t.Error("no error body was recorded; the check would prove nothing")
		}
	})
}
