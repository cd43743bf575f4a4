package main

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAdminCA runs `links show` against an https admin API whose
// certificate no system root signed: refused without --admin-ca, trusted
// with it or GATEWAY_ADMIN_CA.
func TestAdminCA(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, ctype, answer := answerLikeTheGateway(r, nil)
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		w.Write([]byte(answer)) //nolint:errcheck // test
	}))
	defer srv.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	notPEM := MustFile(t, t.TempDir(), "ca.txt", "not a certificate", 0o644)
	env := map[string]string{"GATEWAY_ADMIN_URL": srv.URL, "GATEWAY_ADMIN_TOKEN": "t"}
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string
	}{
		{"Flag", []string{"--admin-ca", ca}, nil, ""},
		{"Environment", nil, map[string]string{"GATEWAY_ADMIN_CA": ca}, ""},
		{"SystemRootsOnly", nil, nil, "certificate signed by unknown authority"},
		{"NotPEM", []string{"--admin-ca", notPEM}, nil, "holds no PEM certificate"},
		{"Missing", []string{"--admin-ca", ca + ".missing"}, nil, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := map[string]string{}
			for k, v := range env {
				e[k] = v
			}
			for k, v := range tc.env {
				e[k] = v
			}
			r := MustRun(t, e, append([]string{"links", "show", testLinkID}, tc.args...)...)
			switch {
			case tc.wantErr == "" && r.code != 0:
				t.Errorf("links show: exit %d, %q; want success", r.code, r.line)
			case tc.wantErr != "" && (r.code != 1 || !strings.Contains(r.line, tc.wantErr)):
				t.Errorf("links show: exit %d, %q; want exit 1 with %q", r.code, r.line, tc.wantErr)
			}
		})
	}
}

func TestAdminSchemeFollowsTLSSettings(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{nil, "http://"},
		{map[string]string{"GATEWAY_TLS_CERT": "c.pem"}, "https://"},
		{map[string]string{"GATEWAY_ADMIN_TLS_CERT": "a.pem"}, "https://"},
		{map[string]string{"GATEWAY_ACME_DOMAINS": "dl.example.com"}, "https://"},
	} {
		if got := adminScheme(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("adminScheme(%v) = %q, want %q", tc.env, got, tc.want)
		}
	}
}
