package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/dlgate/dlgate/apikey"
)

const testKeyID = "01a2350b-8885-7b25-a001-73bd3dbd9c31"

// createdKeyAnswer is what POST /v1/keys answers the fakes.
const createdKeyAnswer = `{"id":"` + testKeyID + `","name":"ci uploads","scopes":["links:write","objects:write"],` +
	`"key":"dlk_vNiw1bULCR_1qf4BwA3fGbpe7IQuxrVLZzOKdY9-kpc","created_at":"2031-03-04T05:06:07Z","expires_at":"2031-06-02T05:06:07Z"}`

func TestKeysCreate(t *testing.T) {
	bearer := "Bearer " + testToken
	tests := []struct {
		name       string
		args       []string
		wantBody   string
		wantStdout string
		wantStderr string
	}{
		{"RepeatedScopes", []string{"ci uploads", "--scope", "objects:write", "--scope", "links:write", "--expires-in", "90d"},
			`{"name":"ci uploads","scopes":["objects:write","links:write"],"expires_in":7776000}`,
			"dlk_vNiw1bULCR_1qf4BwA3fGbpe7IQuxrVLZzOKdY9-kpc\n",
			"key " + testKeyID + " (ci uploads): links:write objects:write, expires 2031-06-02T05:06:07Z; it is shown only now\n"},
		{"CommaSeparatedScopesNoExpiry", []string{"--scope", "objects:write, links:write", "ci uploads"},
			`{"name":"ci uploads","scopes":["objects:write","links:write"]}`, "dlk_vNiw1bULCR_1qf4BwA3fGbpe7IQuxrVLZzOKdY9-kpc\n", ""},
		{"DurationRoundedUp", []string{"ci", "--scope", "links:read", "--expires-in", "1500ms"},
			`{"name":"ci","scopes":["links:read"],"expires_in":2}`, "dlk_vNiw1bULCR_1qf4BwA3fGbpe7IQuxrVLZzOKdY9-kpc\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := MustFakeAdmin(t)
			f.respondWith(http.StatusCreated, "application/json", createdKeyAnswer)
			r := MustRun(t, adminEnv(f), append([]string{"keys", "create"}, tt.args...)...)
			if r.err != nil {
				t.Fatalf("keys create %q = %v", tt.args, r.err)
			}
			got := f.requests()
			if len(got) != 1 || got[0].Method != "POST" || got[0].URI != "/v1/keys" || got[0].Auth != bearer || got[0].Body != tt.wantBody {
				t.Errorf("requests = %+v, want one POST /v1/keys with %s", got, tt.wantBody)
			}
			if r.stdout != tt.wantStdout {
				t.Errorf("stdout = %q, want just the key %q", r.stdout, tt.wantStdout)
			}
			if tt.wantStderr != "" && r.stderr != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", r.stderr, tt.wantStderr)
			}
		})
	}
	t.Run("JSON", func(t *testing.T) {
		f := MustFakeAdmin(t)
		f.respondWith(http.StatusCreated, "application/json", createdKeyAnswer)
		r := MustRun(t, adminEnv(f), "keys", "create", "ci uploads", "--scope", "links:write", "--json")
		var v map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &v); err != nil || v["key"] != "dlk_vNiw1bULCR_1qf4BwA3fGbpe7IQuxrVLZzOKdY9-kpc" || v["id"] != testKeyID {
			t.Errorf("keys create --json printed %q (%v), want the answer with its key", r.stdout, err)
		}
	})
}

func TestKeysCommandLineErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantLine string
	}{
		{"NoName", []string{"keys", "create", "--scope", "links:read"}, "gateway: keys create: want one NAME argument, got 0"},
		{"TwoNames", []string{"keys", "create", "a", "b", "--scope", "links:read"}, "gateway: keys create: want one NAME argument, got 2"},
		{"NoScope", []string{"keys", "create", "ci"}, "gateway: keys create: --scope is required (the scopes are links:read, links:write,"},
		{"UnknownScope", []string{"keys", "create", "ci", "--scope", "links:writ"}, `gateway: keys create: invalid value "links:writ" for flag --scope: unknown scope "links:writ" (the scopes are`},
		{"BadExpiry", []string{"keys", "create", "ci", "--scope", "links:read", "--expires-in", "soon"}, `gateway: keys create: --expires-in: invalid duration "soon"`},
		{"LongExpiry", []string{"keys", "create", "ci", "--scope", "links:read", "--expires-in", "4000d"}, "gateway: keys create: --expires-in must be at most 10 years"},
		{"RevokeNoID", []string{"keys", "revoke"}, "gateway: keys revoke: want ID, got 0 argument(s)"},
		{"RevokeBadID", []string{"keys", "revoke", "ci"}, `gateway: keys revoke: invalid key id "ci": want a UUID`},
		{"ListArgument", []string{"keys", "list", "all"}, `gateway: keys list: unexpected argument "all"`},
		{"ListBadLimit", []string{"keys", "list", "--limit", "501"}, "gateway: keys list: --limit must be between 1 and 500, got 501"},
		{"UnknownSubcommand", []string{"keys", "rotate"}, `gateway: keys: unknown subcommand "rotate"`},
		{"AuditBadAction", []string{"audit", "--action", "link.deleted"}, "gateway: audit: --action must be one of link.created,"},
		{"AuditBadTime", []string{"audit", "--after", "yesterday"}, `gateway: audit: --after must be an RFC 3339 time like 2030-01-02T03:04:05Z, got "yesterday"`},
		{"AuditArgument", []string{"audit", "everything"}, `gateway: audit: unexpected argument "everything"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := MustFakeAdmin(t)
			r := MustRun(t, adminEnv(f), tt.args...)
			if r.code != 2 || !strings.HasPrefix(r.line, tt.wantLine) {
				t.Errorf("gateway %q: exit %d, %q; want 2 and a line starting %q", tt.args, r.code, r.line, tt.wantLine)
			}
			if n := len(f.requests()); n != 0 {
				t.Errorf("a usage error sent %d requests", n)
			}
		})
	}
}

const (
	listedKey = `{"id":"` + testKeyID + `","name":"ci uploads","scopes":["links:write","objects:write"],"created_at":"2031-03-04T05:06:07Z",` +
		`"expires_at":"2999-06-02T05:06:07Z","revoked_at":null,"last_used_at":"2031-03-04T05:07:00Z"}`
	listedRevokedKey = `{"id":"01a2350b-8881-77a6-a36d-d4adfac94b3b","name":"old\u001b[2J","scopes":["audit:read"],"created_at":"2031-03-04T05:06:07Z",` +
		`"expires_at":null,"revoked_at":"2031-03-04T05:06:07Z","last_used_at":null}`
	listedExpiredKey = `{"id":"01a2350b-8881-77a6-a36d-d4adfac94b3c","name":"temp","scopes":["links:read"],"created_at":"2001-03-04T05:06:07Z",` +
		`"expires_at":"2001-03-05T05:06:07Z","revoked_at":null,"last_used_at":null}`
)

func TestKeysList(t *testing.T) {
	respond := func(r *http.Request, _ []byte) (int, string, string) {
		if r.URL.Query().Get("cursor") == "page-2" {
			return http.StatusOK, "application/json", `{"keys":[` + listedExpiredKey + `]}`
		}
		return http.StatusOK, "application/json", `{"keys":[` + listedKey + `,` + listedRevokedKey + `],"next_cursor":"page-2"}`
	}
	f := MustFakeAdmin(t)
	f.Respond = respond
	r := MustRunOn(t, true, adminEnv(f), "keys", "list", "--all")
	want := "ID                                    NAME        STATE    SCOPES                     LAST USED             EXPIRES\n" +
		testKeyID + "  ci uploads  active   links:write,objects:write  2031-03-04T05:07:00Z  2999-06-02T05:06:07Z\n" +
		"01a2350b-8881-77a6-a36d-d4adfac94b3b  old?[2J     revoked  audit:read                 never                 never\n" +
		"01a2350b-8881-77a6-a36d-d4adfac94b3c  temp        expired  links:read                 never                 2001-03-05T05:06:07Z\n"
	if r.err != nil || r.stdout != want {
		t.Errorf("keys list --all on a terminal = %v\n%s\nwant\n%s", r.err, r.stdout, want)
	}
	if got := f.requests(); len(got) != 2 || got[0].URI != "/v1/keys" || got[1].URI != "/v1/keys?cursor=page-2" {
		t.Errorf("requests = %+v", got)
	}
	f = MustFakeAdmin(t)
	f.Respond = respond
	r = MustRunOn(t, false, adminEnv(f), "keys", "list", "--limit", "2")
	if r.stdout != listedKey+"\n"+listedRevokedKey+"\n" || r.stderr != "more keys: run again with --cursor page-2, or with --all\n" {
		t.Errorf("keys list not on a terminal: stdout %q stderr %q, want JSON lines and the cursor hint", r.stdout, r.stderr)
	}
	if got := f.requests(); len(got) != 1 || got[0].URI != "/v1/keys?limit=2" {
		t.Errorf("requests = %+v", got)
	}
}

func TestKeysRevoke(t *testing.T) {
	f := MustFakeAdmin(t)
	f.respondWith(http.StatusNoContent, "", "")
	r := MustRun(t, adminEnv(f), "keys", "revoke", strings.ToUpper(testKeyID))
	if r.err != nil || r.stdout != "key "+testKeyID+" revoked\n" {
		t.Errorf("keys revoke = %v, %q", r.err, r.stdout)
	}
	if got := f.requests(); len(got) != 1 || got[0].Method != "DELETE" || got[0].URI != "/v1/keys/"+testKeyID {
		t.Errorf("requests = %+v, want DELETE /v1/keys/%s", got, testKeyID)
	}
}

const auditAnswer = `{"entries":[` +
	`{"id":"01a2350b-886c-79d3-8b7c-6fbddc4b40be","at":"2031-03-04T05:06:09Z","actor":{"key_id":"01a2350b-8858-7ace-9972-26d8ab2a3ef1","key_name":"support"},` +
	`"action":"link.revoked","target":{"type":"link","id":"` + testLinkID + `"},"request_id":"f26cf568392bc1036c23e0d6","details":{"sessions_revoked":0,"object_deleted":false}},` +
	`{"id":"01a2350b-8863-78df-9889-758ba7006a43","at":"2031-03-04T05:06:07Z","actor":{"key_id":"bootstrap","key_name":"bootstrap"},` +
	`"action":"object.stored","target":{"type":"object","id":"big.iso"},"request_id":"f838001572614e74a4d70450","details":{"key":"big.iso"}}]}`

func TestAudit(t *testing.T) {
	f := MustFakeAdmin(t)
	f.respondWith(http.StatusOK, "application/json", auditAnswer)
	r := MustRunOn(t, true, adminEnv(f), "audit", "--actor", "01a2350b-8858-7ace-9972-26d8ab2a3ef1", "--action", "link.revoked",
		"--target", testLinkID, "--after", "2031-03-04T00:00:00Z", "--before", "2031-03-05T00:00:00+02:00", "--limit", "10")
	want := "AT                    ACTION        TARGET                                     ACTOR      KEY ID                                REQUEST\n" +
		"2031-03-04T05:06:09Z  link.revoked  link " + testLinkID + "  support    01a2350b-8858-7ace-9972-26d8ab2a3ef1  f26cf568392bc1036c23e0d6\n" +
		"2031-03-04T05:06:07Z  object.stored object big.iso                         bootstrap  bootstrap                             f838001572614e74a4d70450\n"
	if r.err != nil {
		t.Fatal(r.err)
	}
	// The table is tabwriter's; what matters is one line per entry with
	// its cells, so compare the cells.
	if cells(r.stdout) != cells(want) {
		t.Errorf("audit table =\n%s\nwant\n%s", r.stdout, want)
	}
	wantURI := "/v1/audit?action=link.revoked&actor=01a2350b-8858-7ace-9972-26d8ab2a3ef1&after=2031-03-04T00%3A00%3A00Z" +
		"&before=2031-03-04T22%3A00%3A00Z&limit=10&target_id=" + testLinkID
	if got := f.requests(); len(got) != 1 || got[0].URI != wantURI || got[0].Auth != "Bearer "+testToken {
		t.Errorf("requests = %+v, want GET %s", got, wantURI)
	}
	r = MustRunOn(t, false, adminEnv(f), "audit")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 2 || !json.Valid([]byte(lines[0])) || !strings.Contains(lines[0], `"action":"link.revoked"`) {
		t.Errorf("audit not on a terminal = %q, want 2 JSON lines", r.stdout)
	}
}

// cells is the table's cells, one line per row, separated by one space.
func cells(table string) string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(table), "\n") {
		out = append(out, strings.Join(strings.Fields(l), " "))
	}
	return strings.Join(out, "\n")
}

// TestKeysAndAuditAgainstTheGateway runs the commands against a real
// gateway (the embedded default): keys made with the bootstrap token, a
// link changed by one key, a 403 naming the scope and a 401 after
// revocation each in one line with exit code 1, and the audit trail
// listing who did what.
func TestKeysAndAuditAgainstTheGateway(t *testing.T) {
	dir := t.TempDir()
	_, admin := MustServeIn(t, dir)
	boot := map[string]string{"GATEWAY_ADMIN_URL": "http://" + admin, "GATEWAY_DATA_DIR": dir} // the token from the data dir
	as := func(key string) map[string]string {
		return map[string]string{"GATEWAY_ADMIN_URL": "http://" + admin, "GATEWAY_ADMIN_TOKEN": key}
	}
	mustKey := func(name string, scopes ...string) (id, key string) {
		t.Helper()
		args := []string{"keys", "create", name}
		for _, s := range scopes {
			args = append(args, "--scope", s)
		}
		r := MustRun(t, boot, args...)
		if r.err != nil {
			t.Fatalf("keys create %s: %v", name, r.err)
		}
		key = strings.TrimSuffix(r.stdout, "\n")
		m := regexp.MustCompile(`^key (\S+) \(`).FindStringSubmatch(r.stderr)
		if !apikey.Valid(key) || m == nil {
			t.Fatalf("keys create printed stdout %q stderr %q, want the key and its id", r.stdout, r.stderr)
		}
		return m[1], key
	}
	supportID, support := mustKey("support", "links:read", "links:write")
	_, auditor := mustKey("auditor", "audit:read")

	file := filepath.Join(t.TempDir(), "report.txt")
	if err := os.WriteFile(file, []byte("quarterly report\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The support key cannot upload: one line naming the scope, exit 1.
	r := MustRun(t, as(support), "links", "create", file, "--downloads", "1", "--expires-in", "1h")
	if r.code != 1 || !strings.HasSuffix(r.line, ": admin API: 403: the key does not hold the scope objects:write") {
		t.Errorf("an upload with the support key: exit %d, %q", r.code, r.line)
	}
	r = MustRun(t, boot, "links", "create", file, "--downloads", "1", "--expires-in", "1h", "--json")
	if r.err != nil {
		t.Fatal(r.err)
	}
	var link struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &link); err != nil || link.ID == "" {
		t.Fatalf("links create --json = %q", r.stdout)
	}
	for _, args := range [][]string{{"links", "top-up", link.ID, "2", "--reason", "asked twice"}, {"links", "revoke", link.ID}} {
		if r := MustRun(t, as(support), args...); r.err != nil {
			t.Fatalf("%q with the support key: %v", args, r.err)
		}
	}
	r = MustRunOn(t, false, as(auditor), "audit", "--target", link.ID)
	var entries []struct {
		Action string `json:"action"`
		Actor  struct {
			KeyID   string `json:"key_id"`
			KeyName string `json:"key_name"`
		} `json:"actor"`
	}
	for l := range strings.Lines(r.stdout) {
		var e struct {
			Action string `json:"action"`
			Actor  struct {
				KeyID   string `json:"key_id"`
				KeyName string `json:"key_name"`
			} `json:"actor"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("audit line %q: %v", l, err)
		}
		entries = append(entries, e)
	}
	want := []struct{ action, id, name string }{
		{"link.revoked", supportID, "support"}, {"link.allowance_added", supportID, "support"}, {"link.created", "bootstrap", "bootstrap"}}
	if len(entries) != len(want) {
		t.Fatalf("audit --target %s = %q, want 3 entries", link.ID, r.stdout)
	}
	for i, w := range want {
		if e := entries[i]; e.Action != w.action || e.Actor.KeyID != w.id || e.Actor.KeyName != w.name {
			t.Errorf("entry %d = %+v, want %s by %s (%s)", i, e, w.action, w.name, w.id)
		}
	}
	// The auditor may read the trail but not the keys.
	r = MustRun(t, as(auditor), "keys", "list")
	if r.code != 1 || r.line != "gateway: admin API: 403: the key does not hold the scope keys:write" {
		t.Errorf("keys list with the auditor key: exit %d, %q", r.code, r.line)
	}
	r = MustRunOn(t, true, boot, "keys", "list")
	if !strings.Contains(r.stdout, supportID+"  support") || !strings.Contains(r.stdout, "links:read,links:write") || strings.Contains(r.stdout, support) {
		t.Errorf("keys list =\n%s\nwant the support key without its text", r.stdout)
	}
	if r := MustRun(t, boot, "keys", "revoke", supportID); r.err != nil || r.stdout != "key "+supportID+" revoked\n" {
		t.Fatalf("keys revoke = %v %q", r.err, r.stdout)
	}
	r = MustRun(t, as(support), "links", "show", link.ID)
	if r.code != 1 || r.line != "gateway: admin API: 401 A valid admin bearer token is required" {
		t.Errorf("a revoked key: exit %d, %q", r.code, r.line)
	}
}
