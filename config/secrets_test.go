package config

import (
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

var tokenShape = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// MustDataDir returns a data directory path that does not exist yet, inside
// a temporary directory removed after the test.
func MustDataDir(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(tb.TempDir(), "gateway-data")
}

func skipWithoutUnixModes(tb testing.TB) {
	tb.Helper()
	if runtime.GOOS == "windows" {
		tb.Skip("Windows has no Unix file modes")
	}
}

func mode(tb testing.TB, path string) fs.FileMode {
	tb.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		tb.Fatal(err)
	}
	return fi.Mode().Perm()
}

func TestEnsureSecretsGeneratesOnFirstStart(t *testing.T) {
	skipWithoutUnixModes(t)
	dir := MustDataDir(t)
	c := &Config{DataDir: dir}
	printed, err := c.EnsureSecrets()
	if err != nil {
		t.Fatal(err)
	}

	if b, err := hex.DecodeString(c.Secret); err != nil || len(b) != 32 {
		t.Errorf("Secret = %q, want 64 hex characters", c.Secret)
	}
	if !tokenShape.MatchString(c.AdminToken) {
		t.Errorf("AdminToken = %q, want 43 base64url characters", c.AdminToken)
	}
	if printed != c.AdminToken {
		t.Errorf("EnsureSecrets() = %q, want the new token %q", printed, c.AdminToken)
	}
	if m := mode(t, dir); m != 0o700 {
		t.Errorf("data dir mode = %04o, want 0700", m)
	}
	for name, want := range map[string]string{SecretFile: c.Secret, AdminTokenFile: c.AdminToken} {
		path := filepath.Join(dir, name)
		if m := mode(t, path); m != 0o600 {
			t.Errorf("%s mode = %04o, want 0600", name, m)
		}
		if got, err := ReadSecretFile(path); err != nil || got != want {
			t.Errorf("ReadSecretFile(%s) = %q, %v, want %q", name, got, err, want)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 {
		t.Errorf("data dir holds %d entries, want 2 (no temporary files left)", len(entries))
	}
}

func TestEnsureSecretsIsIdempotent(t *testing.T) {
	dir := MustDataDir(t)
	first := &Config{DataDir: dir}
	if _, err := first.EnsureSecrets(); err != nil {
		t.Fatal(err)
	}
	second := &Config{DataDir: dir}
	printed, err := second.EnsureSecrets()
	if err != nil {
		t.Fatal(err)
	}
	if printed != "" {
		t.Errorf("second EnsureSecrets() = %q, want \"\" (token already printed once)", printed)
	}
	if second.Secret != first.Secret || second.AdminToken != first.AdminToken {
		t.Errorf("second start got (%q, %q), want the saved (%q, %q)", second.Secret, second.AdminToken, first.Secret, first.AdminToken)
	}
}

func TestEnsureSecretsKeepsConfiguredValues(t *testing.T) {
	dir := MustDataDir(t)
	c := &Config{DataDir: dir, Secret: strings.Repeat("s", 32), AdminToken: "configured"}
	printed, err := c.EnsureSecrets()
	if err != nil || printed != "" {
		t.Fatalf("EnsureSecrets() = %q, %v, want \"\", nil", printed, err)
	}
	if c.Secret != strings.Repeat("s", 32) || c.AdminToken != "configured" {
		t.Errorf("EnsureSecrets changed configured values to (%q, %q)", c.Secret, c.AdminToken)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("data dir was created although nothing had to be generated (stat: %v)", err)
	}
}

func TestEnsureSecretsOnlyGeneratesWhatIsMissing(t *testing.T) {
	dir := MustDataDir(t)
	c := &Config{DataDir: dir, AdminToken: "configured"}
	printed, err := c.EnsureSecrets()
	if err != nil || printed != "" {
		t.Fatalf("EnsureSecrets() = %q, %v, want \"\", nil", printed, err)
	}
	if _, err := os.Stat(filepath.Join(dir, AdminTokenFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("admin-token file written although the token was configured (stat: %v)", err)
	}
	if _, err := os.Stat(filepath.Join(dir, SecretFile)); err != nil {
		t.Errorf("secret file not written: %v", err)
	}
}

func TestEnsureSecretsUsesExistingFiles(t *testing.T) {
	dir := MustDataDir(t)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret := strings.Repeat("a", 64)
	MustWriteSecret(t, dir, SecretFile, secret+"\n", 0o600)
	MustWriteSecret(t, dir, AdminTokenFile, "  operator-token\n", 0o400)

	c := &Config{DataDir: dir}
	printed, err := c.EnsureSecrets()
	if err != nil {
		t.Fatal(err)
	}
	if c.Secret != secret || c.AdminToken != "operator-token" || printed != "" {
		t.Errorf("EnsureSecrets() = %q with (%q, %q), want \"\" with (%q, %q)", printed, c.Secret, c.AdminToken, secret, "operator-token")
	}
	if m := mode(t, dir); m != 0o755 {
		t.Errorf("existing data dir mode changed to %04o", m)
	}
	if m := mode(t, filepath.Join(dir, AdminTokenFile)); m != 0o400 {
		t.Errorf("existing admin-token mode changed to %04o", m)
	}
}

func TestEnsureSecretsRefusesBadFiles(t *testing.T) {
	skipWithoutUnixModes(t)
	tests := []struct {
		name    string
		file    string
		content string
		perm    fs.FileMode
		want    string
	}{
		{"WorldReadableSecret", SecretFile, strings.Repeat("a", 64), 0o644, "mode 0644 lets group or others read it"},
		{"GroupReadableToken", AdminTokenFile, "tok", 0o640, "mode 0640 lets group or others read it"},
		{"EmptySecret", SecretFile, "\n", 0o600, "is empty"},
		{"ShortSecret", SecretFile, "abc", 0o600, "must be at least 32 characters, got 3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := MustDataDir(t)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			path := MustWriteSecret(t, dir, tt.file, tt.content, tt.perm)
			c := &Config{DataDir: dir}
			_, err := c.EnsureSecrets()
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("EnsureSecrets() = %v, want an error naming %s with %q", err, path, tt.want)
			}
			if m := mode(t, path); m != tt.perm {
				t.Errorf("mode of refused file changed from %04o to %04o", tt.perm, m)
			}
			if got, _ := os.ReadFile(path); string(got) != tt.content {
				t.Errorf("refused file rewritten to %q", got)
			}
		})
	}
}

func TestEnsureSecretsRefusesDirectory(t *testing.T) {
	dir := MustDataDir(t)
	if err := os.MkdirAll(filepath.Join(dir, SecretFile), 0o700); err != nil {
		t.Fatal(err)
	}
	c := &Config{DataDir: dir}
	if _, err := c.EnsureSecrets(); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("EnsureSecrets() = %v, want not a regular file", err)
	}
}

// TestPublishNeverReplaces covers the race of two first starts: the loser
// must not overwrite the winner's secret.
func TestPublishNeverReplaces(t *testing.T) {
	dir := t.TempDir()
	if err := publish(dir, "secret", "first"); err != nil {
		t.Fatal(err)
	}
	if err := publish(dir, "secret", "second"); !errors.Is(err, fs.ErrExist) {
		t.Errorf("second publish = %v, want fs.ErrExist", err)
	}
	if got, err := ReadSecretFile(filepath.Join(dir, "secret")); got != "first" || err != nil {
		t.Errorf("ReadSecretFile = %q, %v, want \"first\"", got, err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("dir holds %d entries, want 1 (temporary files removed)", len(entries))
	}
}

func TestLoadOrCreateReturnsCreatedOnlyOnce(t *testing.T) {
	dir := t.TempDir()
	calls := 0
	gen := func() (string, error) { calls++; return "generated", nil }
	for i, wantCreated := range []bool{true, false, false} {
		v, created, err := loadOrCreate(dir, "f", gen)
		if err != nil || v != "generated" || created != wantCreated {
			t.Errorf("call %d: loadOrCreate = %q, %v, %v, want \"generated\", %v, nil", i, v, created, err, wantCreated)
		}
	}
	if calls != 1 {
		t.Errorf("generator called %d times, want 1", calls)
	}
}

// MustWriteSecret writes a file with exactly perm, whatever the umask.
func MustWriteSecret(tb testing.TB, dir, name, content string, perm fs.FileMode) string {
	tb.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content), perm); err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(path, perm); err != nil {
		tb.Fatal(err)
	}
	return path
}
