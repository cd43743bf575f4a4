package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// MustRunOn is MustRun with stdout taken for a terminal or not.
func MustRunOn(tb testing.TB, terminal bool, env map[string]string, args ...string) result {
	tb.Helper()
	var stdout, stderr, errLine bytes.Buffer
	m := &Main{Stdout: &stdout, Stderr: &stderr, Env: func(k string) string { return env[k] },
		IsTerminal: func(w io.Writer) bool { return terminal && w == &stdout }}
	err := m.Run(context.Background(), args)
	code := report(&errLine, err)
	line := errLine.String()
	if err != nil && (!strings.HasPrefix(line, "gateway: ") || strings.Count(line, "\n") != 1) {
		tb.Fatalf("gateway %q reported %q, want one line \"gateway: ...\"", args, line)
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err, code: code, line: strings.TrimSuffix(line, "\n")}
}

const (
	listedActive = `{"id":"` + testLinkID + `","url":"` + testURL + `","named_url":"` + testURL + `/report.pdf",` +
		`"downloads":5,"remaining":2,"expires_at":"2999-01-02T03:04:05Z","revoked_at":null,"created_at":"2030-01-01T00:00:00Z",` +
		`"delivery":"stream","account_id":"alice","filename":"report.pdf",` +
		`"object":{"bucket":"default","key":"docs/report.pdf","version_id":"v-7","size":13,"etag":"\"e\""},` +
		`"grants":{"granted":3,"refunded":0},"active_sessions":0}`
	listedRevoked = `{"id":"0192f000-0000-7000-8000-000000000002","downloads":1,"remaining":1,` +
		`"expires_at":"2999-01-02T03:04:05Z","revoked_at":"2030-01-01T00:00:00Z","filename":"",` +
		`"object":{"key":"evil` + `\u001b[31m` + `.txt"}}`
	listedExpired = `{"id":"0192f000-0000-7000-8000-000000000003","downloads":2,"remaining":2,` +
		`"expires_at":"2001-01-01T00:00:00Z","revoked_at":null,"filename":"old.zip","object":{"key":"old.zip"}}`
	listedExhausted = `{"id":"0192f000-0000-7000-8000-000000000004","downloads":2,"remaining":0,` +
		`"expires_at":"2999-01-01T00:00:00Z","revoked_at":null,"filename":"gone.iso","object":{"key":"gone.iso"}}`
)

// pagedLinks answers GET /v1/links with two pages, the second behind the
// cursor "page-2".
func pagedLinks(r *http.Request, _ []byte) (int, string, string) {
	if r.Method != http.MethodGet || r.URL.Path != "/v1/links" {
		return http.StatusNotFound, "application/problem+json", `{"title":"Not Found"}`
	}
	if r.URL.Query().Get("cursor") == "page-2" {
		return http.StatusOK, "application/json", `{"links":[` + listedExhausted + `]}` + "\n"
	}
	return http.StatusOK, "application/json", `{"links":[` + listedActive + `,` + listedRevoked + `,` + listedExpired + `],"next_cursor":"page-2"}` + "\n"
}

func TestLinksList(t *testing.T) {
	bearer := "Bearer " + testToken
	get := func(uri string) seen { return seen{Method: "GET", URI: uri, Auth: bearer} }
	jsonLines := listedActive + "\n" + listedRevoked + "\n" + listedExpired + "\n"
	table := "ID                                    STATE    REMAINING  EXPIRES               FILE\n" +
		testLinkID + "  active   2/5        2999-01-02T03:04:05Z  report.pdf\n" +
		"0192f000-0000-7000-8000-000000000002  revoked  1/1        2999-01-02T03:04:05Z  evil?[31m.txt\n" +
		"0192f000-0000-7000-8000-000000000003  expired  2/2        2001-01-01T00:00:00Z  old.zip\n"
	// The table is laid out once for every page: "exhausted" on the
	// second page widens STATE on the first.
	tableAll := "ID                                    STATE      REMAINING  EXPIRES               FILE\n" +
		testLinkID + "  active     2/5        2999-01-02T03:04:05Z  report.pdf\n" +
		"0192f000-0000-7000-8000-000000000002  revoked    1/1        2999-01-02T03:04:05Z  evil?[31m.txt\n" +
		"0192f000-0000-7000-8000-000000000003  expired    2/2        2001-01-01T00:00:00Z  old.zip\n" +
		"0192f000-0000-7000-8000-000000000004  exhausted  0/2        2999-01-01T00:00:00Z  gone.iso\n"
	tests := []struct {
		name       string
		args       []string
		terminal   bool
		want       []seen
		wantStdout string
		wantStderr string
	}{
		{"JSONLinesWhenNotATerminal", nil, false, []seen{get("/v1/links")}, jsonLines,
			"more links: run again with --cursor page-2, or with --all\n"},
		{"TableOnATerminal", nil, true, []seen{get("/v1/links")}, table,
			"more links: run again with --cursor page-2, or with --all\n"},
		{"JSONOnATerminalWhenAsked", []string{"--json"}, true, []seen{get("/v1/links")}, jsonLines,
			"more links: run again with --cursor page-2, or with --all\n"},
		{"AllFollowsTheCursor", []string{"--all"}, true, []seen{get("/v1/links"), get("/v1/links?cursor=page-2")},
			tableAll, ""},
		{"Filters", []string{"--account", "a b", "--state", "revoked", "--object-key", "docs/x.pdf", "--limit", "3", "--cursor", "page-2"}, false,
			[]seen{get("/v1/links?account=a+b&cursor=page-2&limit=3&object_key=docs%2Fx.pdf&state=revoked")}, listedExhausted + "\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := MustFakeAdmin(t)
			f.Respond = pagedLinks
			r := MustRunOn(t, tt.terminal, adminEnv(f), append([]string{"links", "list"}, tt.args...)...)
			if r.err != nil {
				t.Fatalf("links list %q = %v", tt.args, r.err)
			}
			if got := f.requests(); fmt.Sprint(got) != fmt.Sprint(tt.want) {
				t.Errorf("requests = %+v\nwant %+v", got, tt.want)
			}
			if r.stdout != tt.wantStdout {
				t.Errorf("stdout =\n%s\nwant\n%s", r.stdout, tt.wantStdout)
			}
			if r.stderr != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", r.stderr, tt.wantStderr)
			}
		})
	}
}

func TestLinksListAlignsColumnsAcrossPages(t *testing.T) {
	f := MustFakeAdmin(t)
	f.Respond = pagedLinks
	r := MustRunOn(t, true, adminEnv(f), "links", "list", "--all")
	lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
	if len(lines) != 5 {
		t.Fatalf("table has %d lines, want a header and 4 links:\n%s", len(lines), r.stdout)
	}
	col := strings.Index(lines[0], "FILE")
	for _, l := range lines[1:] {
		if len(l) <= col || l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("FILE column not aligned at %d in %q", col, l)
		}
	}
}

func TestLinksListEmpty(t *testing.T) {
	for _, terminal := range []bool{false, true} {
		f := MustFakeAdmin(t)
		f.respondWith(http.StatusOK, "application/json", `{"links":[]}`)
		r := MustRunOn(t, terminal, adminEnv(f), "links", "list", "--state", "active")
		if r.err != nil || r.stdout != "" {
			t.Errorf("terminal=%v: empty listing printed %q, %v; want nothing on stdout", terminal, r.stdout, r.err)
		}
		if want := map[bool]string{false: "", true: "no links\n"}[terminal]; r.stderr != want {
			t.Errorf("terminal=%v: stderr = %q, want %q", terminal, r.stderr, want)
		}
	}
}

const grantsAnswer = `{"grants":[` +
	`{"id":"g-2","kind":"session","status":"refunded","account_id":"alice","session_id":"s-1","client":"203.0.113.9 curl/8.5","created_at":"2030-01-02T03:04:05.123456Z","refunded_at":"2030-01-02T03:05:00Z","delivery":{"status":"partial","bytes_acked":600,"coverage":0.6,"attempts":1,"delivered_at":null,"interrupted_at":"2030-01-02T03:05:00Z","measured":true}},` +
	`{"id":"g-1","kind":"stream","status":"granted","account_id":null,"session_id":null,"client":"","created_at":"2030-01-01T00:00:00Z","refunded_at":null,"delivery":{"status":"complete","bytes_acked":3145728,"coverage":1,"attempts":2,"delivered_at":"2030-01-01T00:01:00Z","interrupted_at":"2030-01-01T00:00:30Z","measured":true}},` +
	`{"id":"g-3","kind":"stream","status":"granted","account_id":null,"session_id":null,"client":"","created_at":"2029-12-31T00:00:00Z","refunded_at":null,"delivery":{"status":"partial","bytes_acked":1572864,"coverage":0.5,"attempts":1,"delivered_at":null,"interrupted_at":"2029-12-31T00:00:30Z","measured":false}}` +
	`],"next_cursor":"more"}`

func TestLinksGrants(t *testing.T) {
	bearer := "Bearer " + testToken
	tests := []struct {
		name       string
		args       []string
		terminal   bool
		wantURIs   []string
		wantStdout string
		wantStderr string
	}{
		{"JSONLines", []string{testLinkID}, false, []string{"/v1/links/" + testLinkID + "/grants"},
			`{"id":"g-2","kind":"session","status":"refunded","account_id":"alice","session_id":"s-1","client":"203.0.113.9 curl/8.5","created_at":"2030-01-02T03:04:05.123456Z","refunded_at":"2030-01-02T03:05:00Z","delivery":{"status":"partial","bytes_acked":600,"coverage":0.6,"attempts":1,"delivered_at":null,"interrupted_at":"2030-01-02T03:05:00Z","measured":true}}` + "\n" +
				`{"id":"g-1","kind":"stream","status":"granted","account_id":null,"session_id":null,"client":"","created_at":"2030-01-01T00:00:00Z","refunded_at":null,"delivery":{"status":"complete","bytes_acked":3145728,"coverage":1,"attempts":2,"delivered_at":"2030-01-01T00:01:00Z","interrupted_at":"2030-01-01T00:00:30Z","measured":true}}` + "\n" +
				`{"id":"g-3","kind":"stream","status":"granted","account_id":null,"session_id":null,"client":"","created_at":"2029-12-31T00:00:00Z","refunded_at":null,"delivery":{"status":"partial","bytes_acked":1572864,"coverage":0.5,"attempts":1,"delivered_at":null,"interrupted_at":"2029-12-31T00:00:30Z","measured":false}}` + "\n",
			"more grants: run again with --cursor more, or with --all\n"},
		{"Table", []string{testLinkID, "--limit", "2"}, true, []string{"/v1/links/" + testLinkID + "/grants?limit=2"},
			"ID   STATUS    KIND     DELIVERY               ACCOUNT  CLIENT                CREATED\n" +
				"g-2  refunded  session  partial 60%            alice    203.0.113.9 curl/8.5  2030-01-02T03:04:05Z\n" +
				"g-1  granted   stream   complete (2 attempts)  -        -                     2030-01-01T00:00:00Z\n" +
				"g-3  granted   stream   partial ~1.5 MiB       -        -                     2029-12-31T00:00:00Z\n",
			"more grants: run again with --cursor more, or with --all\n"},
		{"DeliveryFilter", []string{testLinkID, "--delivery", "partial", "--json"}, true, []string{"/v1/links/" + testLinkID + "/grants?delivery=partial"},
			`{"id":"g-2","kind":"session","status":"refunded","account_id":"alice","session_id":"s-1","client":"203.0.113.9 curl/8.5","created_at":"2030-01-02T03:04:05.123456Z","refunded_at":"2030-01-02T03:05:00Z","delivery":{"status":"partial","bytes_acked":600,"coverage":0.6,"attempts":1,"delivered_at":null,"interrupted_at":"2030-01-02T03:05:00Z","measured":true}}` + "\n" +
				`{"id":"g-1","kind":"stream","status":"granted","account_id":null,"session_id":null,"client":"","created_at":"2030-01-01T00:00:00Z","refunded_at":null,"delivery":{"status":"complete","bytes_acked":3145728,"coverage":1,"attempts":2,"delivered_at":"2030-01-01T00:01:00Z","interrupted_at":"2030-01-01T00:00:30Z","measured":true}}` + "\n" +
				`{"id":"g-3","kind":"stream","status":"granted","account_id":null,"session_id":null,"client":"","created_at":"2029-12-31T00:00:00Z","refunded_at":null,"delivery":{"status":"partial","bytes_acked":1572864,"coverage":0.5,"attempts":1,"delivered_at":null,"interrupted_at":"2029-12-31T00:00:30Z","measured":false}}` + "\n",
			"more grants: run again with --cursor more, or with --all\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := MustFakeAdmin(t)
			f.respondWith(http.StatusOK, "application/json", grantsAnswer)
			r := MustRunOn(t, tt.terminal, adminEnv(f), append([]string{"links", "grants"}, tt.args...)...)
			if r.err != nil {
				t.Fatalf("links grants %q = %v", tt.args, r.err)
			}
			got := f.requests()
			if len(got) != len(tt.wantURIs) {
				t.Fatalf("requests = %+v, want %v", got, tt.wantURIs)
			}
			for i, s := range got {
				if s.Method != "GET" || s.URI != tt.wantURIs[i] || s.Auth != bearer {
					t.Errorf("request %d = %+v, want GET %s", i, s, tt.wantURIs[i])
				}
			}
			if r.stdout != tt.wantStdout {
				t.Errorf("stdout =\n%s\nwant\n%s", r.stdout, tt.wantStdout)
			}
			if r.stderr != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", r.stderr, tt.wantStderr)
			}
		})
	}
}

func TestLinksGrantsAllFollowsTheCursor(t *testing.T) {
	f := MustFakeAdmin(t)
	f.Respond = func(r *http.Request, _ []byte) (int, string, string) {
		if r.URL.Query().Get("cursor") == "more" {
			return http.StatusOK, "application/json", `{"grants":[{"id":"g-0","kind":"stream","status":"granted","created_at":"2029-01-01T00:00:00Z"}]}`
		}
		return http.StatusOK, "application/json", grantsAnswer
	}
	r := MustRun(t, adminEnv(f), "links", "grants", "--all", testLinkID)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if n := strings.Count(r.stdout, "\n"); n != 4 || !strings.Contains(r.stdout, `"id":"g-0"`) {
		t.Errorf("stdout = %q, want 4 grants over two pages", r.stdout)
	}
	if reqs := f.requests(); len(reqs) != 2 || reqs[1].URI != "/v1/links/"+testLinkID+"/grants?cursor=more" {
		t.Errorf("requests = %+v", reqs)
	}
}

func TestLinksListAndGrantsErrors(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		status    int    // the fake's answer; 0 for a good one
		detail    string // the fake's problem detail
		wantCode  int
		wantLine  string
		wantCalls int
	}{
		{"ListUnknownState", []string{"list", "--state", "dormant"}, 0, "", 2,
			`gateway: links list: --state must be one of active, exhausted, expired, revoked, got "dormant"`, 0},
		{"ListLimitZero", []string{"list", "--limit", "0"}, 0, "", 0, "", 1}, // 0 is the default
		{"ListLimitTooLarge", []string{"list", "--limit", "501"}, 0, "", 2, "gateway: links list: --limit must be between 1 and 500, got 501", 0},
		{"ListStrayArgument", []string{"list", "alice"}, 0, "", 2, `gateway: links list: unexpected argument "alice"`, 0},
		{"ListUnknownFlag", []string{"list", "--acount", "a"}, 0, "", 2, "gateway: links list: unknown flag --acount", 0},
		{"ListServerRefusesCursor", []string{"list", "--cursor", "forged"}, 400, "cursor is not one this API returned;\npass it unchanged.", 1,
			"gateway: admin API: 400 Bad Request: cursor is not one this API returned; pass it unchanged.", 1},
		{"GrantsWithoutID", []string{"grants"}, 0, "", 2, "gateway: links grants: want ID, got 0 argument(s)", 0},
		{"GrantsNotAUUID", []string{"grants", "abc"}, 0, "", 2, `gateway: links grants: invalid link id "abc": want a UUID`, 0},
		{"GrantsBadLimit", []string{"grants", testLinkID, "--limit", "-1"}, 0, "", 2, "gateway: links grants: --limit must be between 1 and 500, got -1", 0},
		{"GrantsNotFound", []string{"grants", testLinkID}, 404, "", 1, "gateway: admin API: 404 Not Found", 1},
		{"GrantsUnknownDelivery", []string{"grants", testLinkID, "--delivery", "done"}, 0, "", 2,
			`gateway: links grants: --delivery must be one of complete, partial, none, got "done"`, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := MustFakeAdmin(t)
			switch {
			case tt.status != 0:
				f.respondWith(tt.status, "application/problem+json",
					fmt.Sprintf(`{"title":%q,"detail":%q}`, http.StatusText(tt.status), tt.detail))
			default:
				f.respondWith(http.StatusOK, "application/json", `{"links":[],"grants":[]}`)
			}
			r := MustRun(t, adminEnv(f), append([]string{"links"}, tt.args...)...)
			if r.code != tt.wantCode || r.line != tt.wantLine {
				t.Errorf("links %q reported %q (exit %d), want %q (exit %d)", tt.args, r.line, r.code, tt.wantLine, tt.wantCode)
			}
			if n := len(f.requests()); n != tt.wantCalls {
				t.Errorf("links %q sent %d requests, want %d", tt.args, n, tt.wantCalls)
			}
		})
	}
}

func TestHelpLinksListAndGrants(t *testing.T) {
	for _, sub := range []string{"list", "grants"} {
		r := MustRun(t, nil, "help", "links", sub)
		if r.err != nil || !strings.Contains(r.stdout, "--all") || !strings.Contains(r.stdout, "--json") {
			t.Errorf("help links %s = %q, %v", sub, r.stdout, r.err)
		}
	}
	r := MustRun(t, nil, "help", "links")
	if !strings.Contains(r.stdout, "gateway links list") || !strings.Contains(r.stdout, "gateway links grants ID") {
		t.Errorf("help links does not name list and grants:\n%s", r.stdout)
	}
}
