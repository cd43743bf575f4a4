package main

import (
	"strings"
	"testing"
)

func TestObjectsDelete(t *testing.T) {
	bearer := "Bearer " + testToken
	tests := []struct {
		name       string
		args       []string
		wantURI    string
		wantStdout string
	}{
		{"Version", []string{"reports/q1 final.pdf", "--version", "v-7"}, "/v1/objects/reports/q1%20final.pdf?version_id=v-7",
			"deleted reports/q1 final.pdf version v-7\n"},
		{"ForceAndBucket", []string{"--force", "--bucket", "archive", "k", "--version=v-7"}, "/v1/objects/k?bucket=archive&force=true&version_id=v-7",
			"deleted k version v-7\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := MustFakeAdmin(t)
			f.respondWith(204, "", "")
			r := MustRun(t, adminEnv(f), append([]string{"objects", "delete"}, tt.args...)...)
			if r.err != nil {
				t.Fatalf("objects delete %q = %v", tt.args, r.err)
			}
			got := f.requests()
			if len(got) != 1 || got[0].Method != "DELETE" || got[0].URI != tt.wantURI || got[0].Auth != bearer {
				t.Fatalf("requests = %+v, want one DELETE %s", got, tt.wantURI)
			}
			if r.stdout != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", r.stdout, tt.wantStdout)
			}
		})
	}
}

func TestObjectsDeleteErrors(t *testing.T) {
	problem := func(status int, body string) func(*fakeAdmin) {
		return func(f *fakeAdmin) { f.respondWith(status, "application/problem+json", body) }
	}
	tests := []struct {
		name      string
		args      []string
		setup     func(*fakeAdmin)
		wantCode  int
		wantLine  string
		wantCalls int
	}{
		{"NoKey", []string{"--version", "v"}, nil, 2, "gateway: objects delete: want one KEY argument, got 0", 0},
		{"TwoKeys", []string{"a", "b", "--version", "v"}, nil, 2, "gateway: objects delete: want one KEY argument, got 2", 0},
		{"NoVersion", []string{"k"}, nil, 2, "gateway: objects delete: --version is required", 0},
		{"UnknownFlag", []string{"k", "--version", "v", "--recursive"}, nil, 2, "gateway: objects delete: unknown flag --recursive", 0},
		{"KeyAPathCannotCarry", []string{"a//b", "--version", "v"}, nil, 1, `gateway: invalid object key "a//b"`, 0},
		{"Pinned", []string{"k", "--version", "v"},
			problem(409, `{"type":"https://dlgate.dev/problems/object-pinned","title":"A live link or session pins the object version",`+
				`"status":409,"detail":"1 live link and 0 live sessions pin this version; revoke them first or pass force=true."}`),
			1, "gateway: admin API: 409 A live link or session pins the object version: 1 live link and 0 live sessions pin this version; revoke them first or pass force=true.", 1},
		{"NotStored", []string{"k", "--version", "v"},
			problem(404, `{"type":"https://dlgate.dev/problems/object-version-not-found","title":"No version the gateway stored has that key and version id","status":404}`),
			1, "gateway: admin API: 404 No version the gateway stored has that key and version id", 1},
		{"StoreFailed", []string{"k", "--version", "v"},
			problem(502, "{\"title\":\"The object store failed\",\n\"detail\":\"try\\nagain\"}"),
			1, "gateway: admin API: 502 The object store failed: try again", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := MustFakeAdmin(t)
			if tt.setup != nil {
				tt.setup(f)
			}
			r := MustRun(t, adminEnv(f), append([]string{"objects", "delete"}, tt.args...)...)
			if r.code != tt.wantCode || !strings.HasPrefix(r.line, tt.wantLine) {
				t.Errorf("objects delete %q reported %q (exit %d), want %q (exit %d)", tt.args, r.line, r.code, tt.wantLine, tt.wantCode)
			}
			if n := len(f.requests()); n != tt.wantCalls {
				t.Errorf("objects delete %q sent %d requests, want %d", tt.args, n, tt.wantCalls)
			}
			if r.stdout != "" {
				t.Errorf("stdout = %q, want nothing on failure", r.stdout)
			}
		})
	}
}

func TestObjectsHelpAndDispatch(t *testing.T) {
	tests := []struct {
		args       []string
		wantCode   int
		wantLine   string
		wantStdout string
	}{
		{[]string{"help"}, 0, "", "gateway objects delete KEY --version V [--force]"},
		{[]string{"help", "objects"}, 0, "", "GATEWAY_OBJECT_RETENTION"},
		{[]string{"help", "objects", "delete"}, 0, "", "--force"},
		{[]string{"objects"}, 2, "gateway: objects: missing subcommand (delete, digest)", ""},
		{[]string{"objects", "purge"}, 2, `gateway: objects: unknown subcommand "purge"`, ""},
	}
	for _, tt := range tests {
		r := MustRun(t, nil, tt.args...)
		if r.code != tt.wantCode || !strings.HasPrefix(r.line, tt.wantLine) || !strings.Contains(r.stdout, tt.wantStdout) {
			t.Errorf("gateway %q: exit %d, %q, stdout %q; want exit %d, %q, stdout with %q",
				tt.args, r.code, r.line, r.stdout, tt.wantCode, tt.wantLine, tt.wantStdout)
		}
	}
}
