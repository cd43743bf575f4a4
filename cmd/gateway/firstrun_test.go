package main

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/dlgate/dlgate/config"
)

func TestCommandNameIsWhatAPersonWouldTypeAgain(t *testing.T) {
	cases := []struct{ in, want string }{
		{"/tmp/go-build1234/b001/exe/gateway", "go run ./cmd/gateway"},
		{"./bin/gateway", "./bin/gateway"},
		{"gateway", "gateway"},
		{"", "gateway"},
	}
	for _, c := range cases {
		if got := commandName(c.in); got != c.want {
			t.Errorf("commandName(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestTheFirstLinkHintWorksForThisProcess(t *testing.T) {
	defer func(old string) { progName = old }(progName)
	progName = "./bin/gateway"
	load := func(env map[string]string) *config.Config {
		t.Helper()
		cfg, err := config.Load(nil, func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	var out bytes.Buffer
	announce(&out, load(nil), "http://127.0.0.1:8080", "http://127.0.0.1:8081", "")
	if want := "gateway: create a first link with: ./bin/gateway links create ./some.file --downloads 3 --expires-in 24h\n"; !strings.HasSuffix(out.String(), want) {
		t.Errorf("default setup printed %q, want it to end in %q", out.String(), want)
	}
	out.Reset()
	announce(&out, load(map[string]string{"GATEWAY_DATA_DIR": "/srv/dl data"}), "http://127.0.0.1:9090", "http://127.0.0.1:9091", "")
	if want := "GATEWAY_DATA_DIR='/srv/dl data' ./bin/gateway links create ./some.file --downloads 3 --expires-in 24h --admin-url http://127.0.0.1:9091"; !strings.Contains(out.String(), want) {
		t.Errorf("custom setup printed %q, want %q", out.String(), want)
	}
	out.Reset()
	announce(&out, load(map[string]string{"GATEWAY_LOG_FORMAT": "json"}), "http://127.0.0.1:8080", "http://127.0.0.1:8081", "tok")
	for line := range strings.Lines(out.String()) {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Errorf("with --log-format json, stdout line %q is not JSON", line)
		}
	}
	if n := strings.Count(out.String(), "\n"); n != 3 {
		t.Errorf("json announce printed %d lines, want 3: %s", n, out.String())
	}
}

func TestPlural(t *testing.T) {
	if plural(1, "download") != "1 download" || plural(3, "download") != "3 downloads" || plural(0, "download") != "0 downloads" {
		t.Error("plural is wrong")
	}
}
