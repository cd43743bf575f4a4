package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// result is what one in-process run of the gateway command produced.
type result struct {
	stdout, stderr string
	err            error
	code           int    // exit code main would use
	line           string // what main would print to stderr
}

// MustRun runs the gateway command in-process with env as its whole
// environment. It fails the test only if the error report is not exactly one
// line.
func MustRun(tb testing.TB, env map[string]string, args ...string) result {
	tb.Helper()
	var stdout, stderr, errLine bytes.Buffer
	m := &Main{Stdout: &stdout, Stderr: &stderr, Env: func(k string) string { return env[k] }}
	err := m.Run(context.Background(), args)
	code := report(&errLine, err)
	line := errLine.String()
	if err != nil && (!strings.HasPrefix(line, "gateway: ") || strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n")) {
		tb.Fatalf("gateway %q reported %q, want one line \"gateway: ...\"", args, line)
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), err: err, code: code, line: strings.TrimSuffix(line, "\n")}
}

func TestRunDispatch(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantCode   int
		wantLine   string // prefix of the reported line, "" when no error
		wantStdout string // substring of stdout
	}{
		{"NoCommand", nil, nil, 2, "gateway: missing command; run 'gateway help'", ""},
		{"UnknownCommand", []string{"deploy"}, nil, 2, `gateway: unknown command "deploy"; run 'gateway help'`, ""},
		{"Help", []string{"help"}, nil, 0, "", "gateway links create FILE_OR_KEY"},
		{"DashH", []string{"-h"}, nil, 0, "", "Usage:"},
		{"DashDashHelp", []string{"--help"}, nil, 0, "", "Usage:"},
		{"HelpServe", []string{"help", "serve"}, nil, 0, "", "--admin-listen ADDR"},
		{"HelpLinks", []string{"help", "links"}, nil, 0, "", "GATEWAY_ADMIN_URL"},
		{"HelpLinksCreate", []string{"help", "links", "create"}, nil, 0, "", "--expires-in duration"},
		{"HelpLinksTopUp", []string{"help", "links", "top-up"}, nil, 0, "", "--reason"},
		{"HelpKeys", []string{"help", "keys"}, nil, 0, "", "keys:write"},
		{"HelpKeysCreate", []string{"help", "keys", "create"}, nil, 0, "", "--scope scope"},
		{"HelpAudit", []string{"help", "audit"}, nil, 0, "", "--actor id"},
		{"KeysNoSubcommand", []string{"keys"}, nil, 2, "gateway: keys: missing subcommand (create, list, revoke)", ""},
		{"HelpUnknown", []string{"help", "deploy"}, nil, 2, `gateway: unknown help topic "deploy"`, ""},
		{"ServeHelp", []string{"serve", "-h"}, nil, 0, "", "GATEWAY_SESSION_BYTE_BUDGET"},
		{"MigrateHelp", []string{"migrate", "--help"}, nil, 0, "", "--db-dsn DSN"},
		{"ServeBadFlag", []string{"serve", "--lisen", ":1"}, nil, 2, "gateway: config: unknown flag --lisen", ""},
		{"ServeStrayArgument", []string{"serve", "now"}, nil, 2, `gateway: config: unexpected argument "now"`, ""},
		{"ServeInvalidEnv", []string{"serve"}, map[string]string{"GATEWAY_DB_DRIVER": "pg"}, 1,
			`gateway: config: GATEWAY_DB_DRIVER: must be "sqlite" or "mysql", got "pg"`, ""},
		{"ServeInvalidFlagValue", []string{"serve", "--store", "gcs"}, nil, 1, `gateway: config: GATEWAY_STORE: must be "fs" or "s3", got "gcs"`, ""},
		{"MigrateInvalidEnv", []string{"migrate"}, map[string]string{"GATEWAY_STORE": "s3"}, 1,
			`gateway: config: GATEWAY_S3_BUCKET: required when GATEWAY_STORE is "s3"`, ""},
		{"LinksWithoutSubcommand", []string{"links"}, nil, 2, "gateway: links: missing subcommand", ""},
		{"LinksUnknownSubcommand", []string{"links", "delete"}, nil, 2, `gateway: links: unknown subcommand "delete"`, ""},
		{"LinksHelp", []string{"links", "-h"}, nil, 0, "", "gateway links top-up ID N"},
		{"VersionHelp", []string{"version", "-h"}, nil, 0, "", "Usage: gateway version"},
		{"VersionExtraArgument", []string{"version", "--short"}, nil, 2, `gateway: version: unexpected argument "--short"`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := MustRun(t, tt.env, tt.args...)
			if r.code != tt.wantCode {
				t.Errorf("gateway %q exit code = %d (%v), want %d", tt.args, r.code, r.err, tt.wantCode)
			}
			if !strings.HasPrefix(r.line, tt.wantLine) || (tt.wantLine == "") != (r.line == "") {
				t.Errorf("gateway %q reported %q, want %q", tt.args, r.line, tt.wantLine)
			}
			if !strings.Contains(r.stdout, tt.wantStdout) {
				t.Errorf("gateway %q stdout = %q, want it to contain %q", tt.args, r.stdout, tt.wantStdout)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	goVersion := fmt.Sprintf("(%s, %s/%s)", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	tests := []struct {
		version string
		want    string
	}{
		{"dev", "gateway dev " + goVersion + "\n"},
		{"v1.2.3", "gateway v1.2.3 " + goVersion + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			MustSetVersion(t, tt.version)
			r := MustRun(t, nil, "version")
			if r.err != nil || r.stdout != tt.want {
				t.Errorf("gateway version = %q, %v, want %q", r.stdout, r.err, tt.want)
			}
		})
	}
}

// MustSetVersion sets the link-time version for one test.
func MustSetVersion(tb testing.TB, v string) {
	tb.Helper()
	old := version
	version = v
	tb.Cleanup(func() { version = old })
}

func TestReport(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		wantCode int
		want     string
	}{
		{"NoError", nil, 0, ""},
		{"Failure", errors.New("boom"), 1, "gateway: boom\n"},
		{"MultiLineCollapsed", errors.New("first\n  second\r\nthird"), 1, "gateway: first second third\n"},
		{"Usage", usagef("bad %s", "flag"), 2, "gateway: bad flag\n"},
		{"WrappedUsage", fmt.Errorf("links: %w", usagef("bad")), 2, "gateway: links: bad\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if code := report(&buf, tt.err); code != tt.wantCode || buf.String() != tt.want {
				t.Errorf("report(%v) = %d, %q, want %d, %q", tt.err, code, buf.String(), tt.wantCode, tt.want)
			}
		})
	}
}
