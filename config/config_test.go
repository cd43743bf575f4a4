package config

import (
	"errors"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// MustWriteFile writes content to name in a fresh temporary directory and
// returns its path.
func MustWriteFile(tb testing.TB, name, content string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// envOf serves a fixed environment the way os.Getenv would.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// MustLoad is Load that fails the test on error.
func MustLoad(tb testing.TB, args []string, env map[string]string) *Config {
	tb.Helper()
	c, err := Load(args, envOf(env))
	if err != nil {
		tb.Fatalf("Load(%q) = %v", args, err)
	}
	return c
}

func TestLoadDefaults(t *testing.T) {
	c := MustLoad(t, nil, nil)
	want := Default()
	want.PublicURL = "http://127.0.0.1:8080"
	want.DBDSN = filepath.Join("gateway-data", "gateway.db")
	want.FSRoot = filepath.Join("gateway-data", "objects")
	if *c != *want {
		t.Errorf("Load() = %+v, want %+v", *c, *want)
	}
}

func TestLoadPrecedence(t *testing.T) {
	file := MustWriteFile(t, "gateway.yaml", strings.Join([]string{
		"listen: 10.0.0.1:1",
		"s3_path_style: true",
		"shutdown_grace: 1m",
		"session_max_concurrency: 7",
		"db_dsn: /from/file.db",
		"log_level: warn",
	}, "\n"))

	tests := []struct {
		name string
		args []string
		env  map[string]string
		got  func(*Config) any
		want any
	}{
		{"DefaultWhenUnset", nil, nil, func(c *Config) any { return c.Listen }, DefaultListen},
		{"FileOverDefault", []string{"--config", file}, nil, func(c *Config) any { return c.Listen }, "10.0.0.1:1"},
		{"EnvOverFile", []string{"--config", file}, map[string]string{"GATEWAY_LISTEN": "10.0.0.2:2"}, func(c *Config) any { return c.Listen }, "10.0.0.2:2"},
		{"FlagOverEnv", []string{"--config", file, "--listen", "10.0.0.3:3"}, map[string]string{"GATEWAY_LISTEN": "10.0.0.2:2"}, func(c *Config) any { return c.Listen }, "10.0.0.3:3"},
		{"FlagEqualToDefaultStillWins", []string{"--listen=" + DefaultListen}, map[string]string{"GATEWAY_LISTEN": "10.0.0.2:2"}, func(c *Config) any { return c.Listen }, DefaultListen},
		{"EmptyEnvIsUnset", []string{"--config", file}, map[string]string{"GATEWAY_LISTEN": ""}, func(c *Config) any { return c.Listen }, "10.0.0.1:1"},
		{"BoolFromFile", []string{"--config", file}, nil, func(c *Config) any { return c.S3PathStyle }, true},
		{"BoolEnvOverFile", []string{"--config", file}, map[string]string{"GATEWAY_S3_PATH_STYLE": "false"}, func(c *Config) any { return c.S3PathStyle }, false},
		{"BareBoolFlagOverEnv", []string{"--s3-path-style"}, map[string]string{"GATEWAY_S3_PATH_STYLE": "0"}, func(c *Config) any { return c.S3PathStyle }, true},
		{"BoolFlagFalseOverFile", []string{"--config", file, "--s3-path-style=false"}, nil, func(c *Config) any { return c.S3PathStyle }, false},
		{"DurationFromFile", []string{"--config", file}, nil, func(c *Config) any { return c.ShutdownGrace }, time.Minute},
		{"ObjectRetentionDefault", nil, nil, func(c *Config) any { return c.ObjectRetention }, 168 * time.Hour},
		{"UploadExpiryDefault", nil, nil, func(c *Config) any { return c.UploadExpiry }, 24 * time.Hour},
		{"UploadExpiryFlag", []string{"--upload-expiry", "36h"}, nil, func(c *Config) any { return c.UploadExpiry }, 36 * time.Hour},
		{"ConsoleOnByDefault", nil, nil, func(c *Config) any { return c.Console }, true},
		{"ConsoleOffFromEnv", nil, map[string]string{"GATEWAY_CONSOLE": "false"}, func(c *Config) any { return c.Console }, false},
		{"ConsoleFlagOverEnv", []string{"--console"}, map[string]string{"GATEWAY_CONSOLE": "false"}, func(c *Config) any { return c.Console }, true},
		{"ConsoleOffFromFlag", []string{"--console=false"}, nil, func(c *Config) any { return c.Console }, false},
		{"AuditRetentionDefault", nil, nil, func(c *Config) any { return c.AuditRetention }, 8760 * time.Hour},
		{"ObjectRetentionZeroKeepsForever", []string{"--object-retention", "0"}, nil, func(c *Config) any { return c.ObjectRetention }, time.Duration(0)},
		{"AuditRetentionZeroKeepsForever", nil, map[string]string{"GATEWAY_AUDIT_RETENTION": "0s"}, func(c *Config) any { return c.AuditRetention }, time.Duration(0)},
		{"DurationFlagOverFile", []string{"--config", file, "-shutdown-grace", "90s"}, nil, func(c *Config) any { return c.ShutdownGrace }, 90 * time.Second},
		{"IntFromFile", []string{"--config", file}, nil, func(c *Config) any { return c.SessionMaxConcurrency }, 7},
		{"IntEnvOverFile", []string{"--config", file}, map[string]string{"GATEWAY_SESSION_MAX_CONCURRENCY": "9"}, func(c *Config) any { return c.SessionMaxConcurrency }, 9},
		{"LevelFromFile", []string{"--config", file}, nil, func(c *Config) any { return c.LogLevel }, slog.LevelWarn},
		{"LevelFlag", []string{"--log-level", "DEBUG"}, nil, func(c *Config) any { return c.LogLevel }, slog.LevelDebug},
		{"ExplicitDSNBeatsDerived", []string{"--config", file, "--data-dir", "/d"}, nil, func(c *Config) any { return c.DBDSN }, "/from/file.db"},
		{"DSNDerivedFromDataDir", []string{"--data-dir", "/d"}, nil, func(c *Config) any { return c.DBDSN }, filepath.Join("/d", "gateway.db")},
		{"FSRootDerivedFromEnvDataDir", nil, map[string]string{"GATEWAY_DATA_DIR": "/e"}, func(c *Config) any { return c.FSRoot }, filepath.Join("/e", "objects")},
		{"PublicURLDerivedFromListen", []string{"--listen", "10.0.0.3:3"}, nil, func(c *Config) any { return c.PublicURL }, "http://10.0.0.3:3"},
		{"PublicURLDerivedFromWildcardListen", []string{"--listen", ":8080"}, nil, func(c *Config) any { return c.PublicURL }, "http://localhost:8080"},
		{"PublicURLDerivedFromIPv6Wildcard", []string{"--listen", "[::]:8080"}, nil, func(c *Config) any { return c.PublicURL }, "http://localhost:8080"},
		{"PublicURLHTTPSWithTLSFiles", nil, map[string]string{"GATEWAY_TLS_CERT": "c.pem", "GATEWAY_TLS_KEY": "k.pem", "GATEWAY_LISTEN": ":8443"}, func(c *Config) any { return c.PublicURL }, "https://localhost:8443"},
		{"PublicURLNamesFirstACMEDomain", nil, map[string]string{"GATEWAY_ACME_DOMAINS": " dl.example.com , b.example.com", "GATEWAY_LISTEN": ":443"}, func(c *Config) any { return c.PublicURL }, "https://dl.example.com"},
		{"PublicURLACMEDomainWithPort", nil, map[string]string{"GATEWAY_ACME_DOMAINS": "dl.example.com", "GATEWAY_LISTEN": ":8443"}, func(c *Config) any { return c.PublicURL }, "https://dl.example.com:8443"},
		{"ACMEDirectoryDefault", nil, nil, func(c *Config) any { return c.ACMEDirectory }, DefaultACMEDirectory},
		{"PublicURLTrailingSlashStripped", nil, map[string]string{"GATEWAY_PUBLIC_URL": "https://dl.example.com/files/"}, func(c *Config) any { return c.PublicURL }, "https://dl.example.com/files"},
		{"NoMigrate", []string{"--no-migrate"}, nil, func(c *Config) any { return c.NoMigrate }, true},
		{"MigrateByDefault", nil, nil, func(c *Config) any { return c.NoMigrate }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := MustLoad(t, tt.args, tt.env)
			if got := tt.got(c); got != tt.want {
				t.Errorf("Load(%q) = %v, want %v", tt.args, got, tt.want)
			}
		})
	}
}

// samples is a valid value for every variable, none of them the default,
// that together pass validation.
var samples = map[string]string{
	"LISTEN":                  "10.1.1.1:81",
	"ADMIN_LISTEN":            "10.1.1.1:82",
	"PUBLIC_URL":              "https://dl.example.com",
	"ADMIN_TOKEN":             "admin-token-sample",
	"SECRET":                  strings.Repeat("s", 40),
	"SECRET_PREVIOUS":         strings.Repeat("p", 40) + "," + strings.Repeat("q", 32),
	"DATA_DIR":                "/srv/gw",
	"DB_DRIVER":               "mysql",
	"DB_DSN":                  "gw:pw@tcp(db:3306)/gateway",
	"STORE":                   "s3",
	"FS_ROOT":                 "/srv/objects",
	"S3_BUCKET":               "downloads",
	"S3_ENDPOINT":             "http://minio:9000",
	"S3_REGION":               "eu-west-1",
	"S3_PATH_STYLE":           "true",
	"S3_CA":                   "/etc/dlgate/s3-ca.pem",
	"TLS_CERT":                "/etc/dlgate/tls.crt",
	"TLS_KEY":                 "/etc/dlgate/tls.key",
	"ADMIN_TLS_CERT":          "/etc/dlgate/admin.crt",
	"ADMIN_TLS_KEY":           "/etc/dlgate/admin.key",
	"REDIRECT_LISTEN":         "10.1.1.1:80",
	"ACME_DOMAINS":            "dl.example.com,files.example.com",
	"ACME_EMAIL":              "ops@example.com",
	"ACME_DIRECTORY":          "https://acme-staging-v02.api.letsencrypt.org/directory",
	"STORE_OPEN_TIMEOUT":      "4s",
	"STORE_IDLE_TIMEOUT":      "45s",
	"SHUTDOWN_GRACE":          "1m0s",
	"DB_TIMEOUT":              "3s",
	"CLAIM_BATCH":             "16",
	"REFUSAL_CACHE":           "250ms",
	"MAX_CONNECTIONS":         "500",
	"BODY_TIMEOUT":            "7s",
	"LOG_LEVEL":               "debug",
	"LOG_FORMAT":              "json",
	"SESSION_TTL":             "2h0m0s",
	"SESSION_BYTE_BUDGET":     "1048576",
	"SESSION_MAX_CONCURRENCY": "8",
	"SESSION_AFFINITY":        "account",
	"SLOT_LEASE":              "45s",
	"SWEEP_INTERVAL":          "5s",
	"OBJECT_RETENTION":        "720h0m0s",
	"AUDIT_RETENTION":         "17520h0m0s",
	"WEBHOOK_URL":             "https://hooks.example.com/dlgate?channel=downloads",
	"WEBHOOK_SECRET":          "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
	"WEBHOOK_MAX_AGE":         "24h0m0s",
	"UPLOAD_EXPIRY":           "12h0m0s",
	"CONSOLE":                 "false",
	"PREVIEW_AGENTS":          "Slackbot,ExampleUnfurler",
	"PREVIEW_DETAILS":         "false",
	"AUTH":                    "jwt",
	"AUTH_COOKIE":             "session",
	"AUTH_HEADER":             "X-Auth-Request-User",
	"TRUSTED_PROXIES":         "10.0.0.0/8,::1",
	"JWT_KEY":                 "0123456789abcdef0123456789abcdef",
	"JWT_JWKS_URL":            "https://id.example/jwks.json",
	"JWT_ISSUER":              "https://id.example/",
	"JWT_AUDIENCE":            "dlgate",
	"JWT_ACCOUNT_CLAIM":       "email",
	"JWT_LEEWAY":              "10s",
}

// TestEveryVariableFromEverySource proves that each variable is wired to its
// flag, environment variable and file key, so a new variable cannot be
// half-added.
func TestEveryVariableFromEverySource(t *testing.T) {
	if len(samples) != len(vars) {
		t.Fatalf("samples has %d entries, vars %d", len(samples), len(vars))
	}
	var args []string
	env := map[string]string{}
	var yaml strings.Builder
	for _, v := range vars {
		s, ok := samples[v.name]
		if !ok {
			t.Fatalf("no sample for %s", v.name)
		}
		args = append(args, "--"+v.flag()+"="+s)
		env[v.env()] = s
		yaml.WriteString(v.key() + ": " + `"` + s + `"` + "\n")
	}
	file := MustWriteFile(t, "all.yaml", yaml.String())

	for _, src := range []struct {
		name string
		args []string
		env  map[string]string
	}{
		{"Flags", args, nil},
		{"Environment", nil, env},
		{"File", []string{"--config", file}, nil},
	} {
		t.Run(src.name, func(t *testing.T) {
			c := MustLoad(t, src.args, src.env)
			for _, v := range vars {
				if got := v.get(c); got != samples[v.name] {
					t.Errorf("%s = %q, want %q", v.env(), got, samples[v.name])
				}
			}
		})
	}
}

func TestFileKeysMatchVariables(t *testing.T) {
	keys := map[string]bool{}
	ft := reflect.TypeFor[fileConfig]()
	for i := range ft.NumField() {
		keys[ft.Field(i).Tag.Get("yaml")] = true
	}
	for _, v := range vars {
		if !keys[v.key()] {
			t.Errorf("fileConfig has no field for key %q", v.key())
		}
		delete(keys, v.key())
	}
	for k := range keys {
		t.Errorf("fileConfig key %q matches no variable", k)
	}
}

func TestLoadValidationErrors(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"UnknownDriver", map[string]string{"GATEWAY_DB_DRIVER": "pg"}, `config: GATEWAY_DB_DRIVER: must be "sqlite" or "mysql", got "pg"`},
		{"MySQLWithoutDSN", map[string]string{"GATEWAY_DB_DRIVER": "mysql"}, `config: GATEWAY_DB_DSN: required when GATEWAY_DB_DRIVER is "mysql"`},
		{"UnknownStore", map[string]string{"GATEWAY_STORE": "gcs"}, `config: GATEWAY_STORE: must be "fs" or "s3", got "gcs"`},
		{"S3WithoutBucket", map[string]string{"GATEWAY_STORE": "s3"}, `config: GATEWAY_S3_BUCKET: required when GATEWAY_STORE is "s3"`},
		{"ListenWithoutPort", map[string]string{"GATEWAY_LISTEN": "localhost"}, `config: GATEWAY_LISTEN: invalid host:port "localhost"`},
		{"ListenBadPort", map[string]string{"GATEWAY_LISTEN": "localhost:http"}, `config: GATEWAY_LISTEN: invalid port in "localhost:http"`},
		{"ListenPortTooLarge", map[string]string{"GATEWAY_LISTEN": "localhost:65536"}, `config: GATEWAY_LISTEN: invalid port`},
		{"AdminListenBad", map[string]string{"GATEWAY_ADMIN_LISTEN": "8081"}, `config: GATEWAY_ADMIN_LISTEN: invalid host:port "8081"`},
		{"SameListeners", map[string]string{"GATEWAY_ADMIN_LISTEN": DefaultListen}, `config: GATEWAY_ADMIN_LISTEN: must differ from GATEWAY_LISTEN`},
		{"PublicURLRelative", map[string]string{"GATEWAY_PUBLIC_URL": "/files"}, `config: GATEWAY_PUBLIC_URL: must be an absolute http or https URL, got "/files"`},
		{"PublicURLScheme", map[string]string{"GATEWAY_PUBLIC_URL": "ftp://example.com"}, `config: GATEWAY_PUBLIC_URL: must be an absolute http or https URL`},
		{"PublicURLNoHost", map[string]string{"GATEWAY_PUBLIC_URL": "http:///x"}, `config: GATEWAY_PUBLIC_URL: must have a host`},
		{"PublicURLQuery", map[string]string{"GATEWAY_PUBLIC_URL": "https://example.com/?a=b"}, `config: GATEWAY_PUBLIC_URL: must not have a query`},
		{"PublicURLFragment", map[string]string{"GATEWAY_PUBLIC_URL": "https://example.com/#x"}, `config: GATEWAY_PUBLIC_URL: must not have a fragment`},
		{"PublicURLUser", map[string]string{"GATEWAY_PUBLIC_URL": "https://u:p@example.com"}, `config: GATEWAY_PUBLIC_URL: must not contain user information`},
		{"S3EndpointRelative", map[string]string{"GATEWAY_S3_ENDPOINT": "minio:9000"}, `config: GATEWAY_S3_ENDPOINT: must be an absolute http or https URL`},
		{"ShortSecret", map[string]string{"GATEWAY_SECRET": "short"}, `config: GATEWAY_SECRET: must be at least 32 characters, got 5`},
		{"ShortPreviousSecret", map[string]string{"GATEWAY_SECRET_PREVIOUS": strings.Repeat("p", 32) + ",short"}, `config: GATEWAY_SECRET_PREVIOUS: entry 2 must be at least 32 characters, got 5`},
		{"EmptyPreviousSecret", map[string]string{"GATEWAY_SECRET_PREVIOUS": strings.Repeat("p", 32) + ","}, `config: GATEWAY_SECRET_PREVIOUS: entry 2 must be at least 32 characters, got 0`},
		{"TLSKeyMissing", map[string]string{"GATEWAY_TLS_CERT": "c.pem"}, `config: GATEWAY_TLS_KEY: required with GATEWAY_TLS_CERT`},
		{"AdminTLSCertMissing", map[string]string{"GATEWAY_ADMIN_TLS_KEY": "k.pem"}, `config: GATEWAY_ADMIN_TLS_CERT: required with GATEWAY_ADMIN_TLS_KEY`},
		{"RedirectWithoutTLS", map[string]string{"GATEWAY_REDIRECT_LISTEN": ":80"}, `config: GATEWAY_REDIRECT_LISTEN: needs HTTPS on the public listener (GATEWAY_TLS_CERT or GATEWAY_ACME_DOMAINS)`},
		{"RedirectToHTTP", map[string]string{"GATEWAY_REDIRECT_LISTEN": ":80", "GATEWAY_ACME_DOMAINS": "dl.example.com", "GATEWAY_PUBLIC_URL": "http://dl.example.com"}, `config: GATEWAY_REDIRECT_LISTEN: would redirect to GATEWAY_PUBLIC_URL "http://dl.example.com", which is not https`},
		{"RedirectOnPublicListener", map[string]string{"GATEWAY_REDIRECT_LISTEN": "127.0.0.1:8080", "GATEWAY_ACME_DOMAINS": "dl.example.com"}, `config: GATEWAY_REDIRECT_LISTEN: must differ from GATEWAY_LISTEN and GATEWAY_ADMIN_LISTEN, got "127.0.0.1:8080"`},
		{"ACMEWildcard", map[string]string{"GATEWAY_ACME_DOMAINS": "dl.example.com,*.example.com"}, `config: GATEWAY_ACME_DOMAINS: entry 2: "*.example.com": wildcard names need the DNS-01 challenge, which the gateway does not do`},
		{"ACMEIPAddress", map[string]string{"GATEWAY_ACME_DOMAINS": "192.0.2.1"}, `config: GATEWAY_ACME_DOMAINS: entry 1: "192.0.2.1": an IP address, not a domain name`},
		{"ACMEBareName", map[string]string{"GATEWAY_ACME_DOMAINS": "localhost"}, `config: GATEWAY_ACME_DOMAINS: entry 1: "localhost" is not a fully qualified domain name`},
		{"ACMENoDomain", map[string]string{"GATEWAY_ACME_DOMAINS": " , "}, `config: GATEWAY_ACME_DOMAINS: no domain in " , "`},
		{"ACMEEmail", map[string]string{"GATEWAY_ACME_EMAIL": "ops"}, `config: GATEWAY_ACME_EMAIL: must be an email address, got "ops"`},
		{"ACMEDirectoryHTTP", map[string]string{"GATEWAY_ACME_DIRECTORY": "http://ca.example/dir"}, `config: GATEWAY_ACME_DIRECTORY: must be an https URL, got "http://ca.example/dir"`},
		{"LogFormat", map[string]string{"GATEWAY_LOG_FORMAT": "xml"}, `config: GATEWAY_LOG_FORMAT: must be "text" or "json", got "xml"`},
		{"SessionAffinity", map[string]string{"GATEWAY_SESSION_AFFINITY": "cookie"}, `config: GATEWAY_SESSION_AFFINITY: must be "client", "account" or "off", got "cookie"`},
		{"LogLevel", map[string]string{"GATEWAY_LOG_LEVEL": "loud"}, `config: GATEWAY_LOG_LEVEL: invalid level "loud"`},
		{"ZeroGrace", map[string]string{"GATEWAY_SHUTDOWN_GRACE": "0s"}, `config: GATEWAY_SHUTDOWN_GRACE: must be positive, got 0s`},
		{"ZeroDBTimeout", map[string]string{"GATEWAY_DB_TIMEOUT": "0s"}, `config: GATEWAY_DB_TIMEOUT: must be positive, got 0s`},
		{"NegativeBodyTimeout", map[string]string{"GATEWAY_BODY_TIMEOUT": "-1s"}, `config: GATEWAY_BODY_TIMEOUT: must be positive, got -1s`},
		{"ZeroMaxConnections", map[string]string{"GATEWAY_MAX_CONNECTIONS": "0"}, `config: GATEWAY_MAX_CONNECTIONS: must be at least 1, got 0`},
		{"ZeroClaimBatch", map[string]string{"GATEWAY_CLAIM_BATCH": "0"}, `config: GATEWAY_CLAIM_BATCH: must be 1 (grouping off) to 1024, got 0`},
		{"HugeClaimBatch", map[string]string{"GATEWAY_CLAIM_BATCH": "1025"}, `config: GATEWAY_CLAIM_BATCH: must be 1 (grouping off) to 1024, got 1025`},
		{"NegativeRefusalCache", map[string]string{"GATEWAY_REFUSAL_CACHE": "-1s"}, `config: GATEWAY_REFUSAL_CACHE: must be 0 (off) or positive, got -1s`},
		{"NegativeTTL", map[string]string{"GATEWAY_SESSION_TTL": "-1h"}, `config: GATEWAY_SESSION_TTL: must be positive, got -1h0m0s`},
		{"ZeroLease", map[string]string{"GATEWAY_SLOT_LEASE": "0"}, `config: GATEWAY_SLOT_LEASE: must be positive, got 0s`},
		{"ZeroSweep", map[string]string{"GATEWAY_SWEEP_INTERVAL": "0ms"}, `config: GATEWAY_SWEEP_INTERVAL: must be positive, got 0s`},
		{"ZeroStoreOpenTimeout", map[string]string{"GATEWAY_STORE_OPEN_TIMEOUT": "0s"}, `config: GATEWAY_STORE_OPEN_TIMEOUT: must be positive, got 0s`},
		{"NegativeStoreIdleTimeout", map[string]string{"GATEWAY_STORE_IDLE_TIMEOUT": "-1s"}, `config: GATEWAY_STORE_IDLE_TIMEOUT: must be positive, got -1s`},
		{"DurationSyntax", map[string]string{"GATEWAY_SWEEP_INTERVAL": "15"}, `config: GATEWAY_SWEEP_INTERVAL: invalid duration "15"`},
		{"NegativeObjectRetention", map[string]string{"GATEWAY_OBJECT_RETENTION": "-1h"}, `config: GATEWAY_OBJECT_RETENTION: must be 0 (keep forever) or positive, got -1h0m0s`},
		{"NegativeAuditRetention", map[string]string{"GATEWAY_AUDIT_RETENTION": "-1s"}, `config: GATEWAY_AUDIT_RETENTION: must be 0 (keep forever) or positive, got -1s`},
		{"WebhookURLRelative", map[string]string{"GATEWAY_WEBHOOK_URL": "/hooks", "GATEWAY_WEBHOOK_SECRET": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, `config: GATEWAY_WEBHOOK_URL: must be an absolute http or https URL, got "/hooks"`},
		{"WebhookURLWithoutSecret", map[string]string{"GATEWAY_WEBHOOK_URL": "https://hooks.example.com/"}, `config: GATEWAY_WEBHOOK_SECRET: required when GATEWAY_WEBHOOK_URL is set`},
		{"WebhookSecretWithoutPrefix", map[string]string{"GATEWAY_WEBHOOK_SECRET": "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, `config: GATEWAY_WEBHOOK_SECRET: must start with whsec_`},
		{"WebhookSecretNotBase64", map[string]string{"GATEWAY_WEBHOOK_SECRET": "whsec_not base64!"}, `config: GATEWAY_WEBHOOK_SECRET: the part after whsec_ is not base64`},
		{"WebhookSecretShort", map[string]string{"GATEWAY_WEBHOOK_SECRET": "whsec_c2hvcnQ="}, `config: GATEWAY_WEBHOOK_SECRET: must decode to 24 to 64 bytes, got 5`},
		{"ZeroWebhookMaxAge", map[string]string{"GATEWAY_WEBHOOK_MAX_AGE": "0s"}, `config: GATEWAY_WEBHOOK_MAX_AGE: must be positive, got 0s`},
		{"ZeroUploadExpiry", map[string]string{"GATEWAY_UPLOAD_EXPIRY": "0s"}, `config: GATEWAY_UPLOAD_EXPIRY: must be positive, got 0s`},
		{"NegativeBudget", map[string]string{"GATEWAY_SESSION_BYTE_BUDGET": "-1"}, `config: GATEWAY_SESSION_BYTE_BUDGET: must be 0 (automatic) or positive, got -1`},
		{"BudgetNotInteger", map[string]string{"GATEWAY_SESSION_BYTE_BUDGET": "1MiB"}, `config: GATEWAY_SESSION_BYTE_BUDGET: invalid integer "1MiB" (from the environment)`},
		{"ZeroConcurrency", map[string]string{"GATEWAY_SESSION_MAX_CONCURRENCY": "0"}, `config: GATEWAY_SESSION_MAX_CONCURRENCY: must be at least 1, got 0`},
		{"BadBool", map[string]string{"GATEWAY_S3_PATH_STYLE": "yes"}, `config: GATEWAY_S3_PATH_STYLE: invalid boolean "yes"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(nil, envOf(tt.env))
			if err == nil {
				t.Fatalf("Load(env %v) = nil error, want %q", tt.env, tt.want)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, tt.want) || strings.Contains(msg, "\n") {
				t.Errorf("Load(env %v) = %q, want one line starting %q", tt.env, msg, tt.want)
			}
		})
	}
}

func TestLoadNamesTheSourceOfAnUnparsableValue(t *testing.T) {
	file := MustWriteFile(t, "g.yaml", "listen: 127.0.0.1:1\nslot_lease: soon\n")
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"Flag", []string{"--slot-lease", "soon"}, nil, `config: GATEWAY_SLOT_LEASE: invalid duration "soon" (want Go syntax like 30s, 5m, 1h) (from --slot-lease)`},
		{"Env", nil, map[string]string{"GATEWAY_SLOT_LEASE": "soon"}, `config: GATEWAY_SLOT_LEASE: invalid duration "soon" (want Go syntax like 30s, 5m, 1h) (from the environment)`},
		{"File", []string{"--config", file}, nil, `config: GATEWAY_SLOT_LEASE: invalid duration "soon" (want Go syntax like 30s, 5m, 1h) (from ` + file + ` line 2)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.args, envOf(tt.env))
			if err == nil || err.Error() != tt.want {
				t.Errorf("Load(%q) = %v, want %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestLoadFileErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string
	}{
		{"UnknownKey", "listen: 127.0.0.1:1\nlisten_addr: x\n", `line 2: unknown key "listen_addr"`},
		{"EnvNameAsKey", "GATEWAY_LISTEN: x\n", `line 1: unknown key "GATEWAY_LISTEN"`},
		{"KebabKey", "db-driver: mysql\n", `line 1: unknown key "db-driver"`},
		{"TwoUnknownKeys", "a: 1\nb: 2\n", `line 1: unknown key "a"; line 2: unknown key "b"`},
		{"NestedValue", "listen:\n  host: x\n", "line 2: value must be a single scalar"},
		{"ListValue", "listen: [a, b]\n", "line 1: value must be a single scalar"},
		{"DuplicateKey", "listen: a:1\nlisten: b:2\n", `mapping key "listen" already defined`},
		{"NotAMapping", "- listen\n", "cannot unmarshal"},
		{"Syntax", "listen: [\n", "line"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := MustWriteFile(t, "g.yaml", tt.content)
			_, err := Load([]string{"--config", file}, envOf(nil))
			if err == nil {
				t.Fatalf("Load(%q) = nil error, want %q", tt.content, tt.want)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "config: "+file+": ") || !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
				t.Errorf("Load(%q) = %q, want one line with %q", tt.content, msg, tt.want)
			}
		})
	}
}

func TestLoadFileEdgeCases(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string // Listen
	}{
		{"Empty", "", DefaultListen},
		{"OnlyComments", "# nothing here\n", DefaultListen},
		{"NullIsUnset", "listen:\n", DefaultListen},
		{"TildeIsUnset", "listen: ~\n", DefaultListen},
		{"Quoted", `listen: "10.0.0.9:9"`, "10.0.0.9:9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := MustWriteFile(t, "g.yaml", tt.content)
			c, err := Load([]string{"--config", file}, envOf(nil))
			if err != nil {
				t.Fatalf("Load(%q) = %v", tt.content, err)
			}
			if c.Listen != tt.want {
				t.Errorf("Load(%q).Listen = %q, want %q", tt.content, c.Listen, tt.want)
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "absent.yaml")
	_, err := Load([]string{"--config", path}, envOf(nil))
	if err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("Load(--config %s) = %v, want a no-such-file error", path, err)
	}
}

func TestLoadArgumentErrors(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantHelp bool
		want     string
	}{
		{"Help", []string{"-h"}, true, ""},
		{"LongHelp", []string{"--help"}, true, ""},
		{"UnknownFlag", []string{"--listen-addr", "x"}, false, "config: unknown flag --listen-addr"},
		{"MissingValue", []string{"--listen"}, false, "config: flag needs an argument: --listen"},
		{"StrayArgument", []string{"now"}, false, `config: unexpected argument "now"`},
		{"EnvStyleFlag", []string{"--db_driver", "x"}, false, "config: unknown flag --db_driver"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(tt.args, envOf(nil))
			if tt.wantHelp {
				if !errors.Is(err, flag.ErrHelp) {
					t.Errorf("Load(%q) = %v, want flag.ErrHelp", tt.args, err)
				}
				return
			}
			var fe *FlagError
			if !errors.As(err, &fe) || err.Error() != tt.want {
				t.Errorf("Load(%q) = %v, want *FlagError %q", tt.args, err, tt.want)
			}
		})
	}
}

func TestRedacted(t *testing.T) {
	c := MustLoad(t, nil, map[string]string{
		"GATEWAY_ADMIN_TOKEN": "admin-token-value",
		"GATEWAY_SECRET":      strings.Repeat("k", 40),
		"GATEWAY_DB_DRIVER":   "mysql",
		"GATEWAY_DB_DSN":      "gw:p@ss/w0rd@tcp(db:3306)/gateway?tls=true",
	})
	got := c.Redacted()
	want := map[string]string{
		"GATEWAY_ADMIN_TOKEN": "[redacted]",
		"GATEWAY_SECRET":      "[redacted]",
		"GATEWAY_DB_DSN":      "gw:[redacted]@tcp(db:3306)/gateway?tls=true",
		"GATEWAY_LISTEN":      DefaultListen,
		"GATEWAY_LOG_LEVEL":   "info",
		"GATEWAY_S3_BUCKET":   "",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("Redacted()[%q] = %q, want %q", k, got[k], v)
		}
	}
	if len(got) != len(vars) {
		t.Errorf("Redacted() has %d entries, want %d", len(got), len(vars))
	}

	var buf strings.Builder
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("starting", "config", c)
	for _, secret := range []string{"admin-token-value", strings.Repeat("k", 40), "p@ss"} {
		if strings.Contains(buf.String(), secret) {
			t.Errorf("log line %s contains a secret", buf.String())
		}
	}
	if !strings.Contains(buf.String(), `"listen":"127.0.0.1:8080"`) {
		t.Errorf("log line %s lacks the listen address", buf.String())
	}
}

func TestPreviousSecretsAreRedacted(t *testing.T) {
	old := strings.Repeat("o", 40)
	c := MustLoad(t, nil, map[string]string{"GATEWAY_SECRET_PREVIOUS": old + "," + old})
	if got := c.Redacted()["GATEWAY_SECRET_PREVIOUS"]; got != "[redacted]" {
		t.Errorf("Redacted()[GATEWAY_SECRET_PREVIOUS] = %q, want [redacted]", got)
	}
	var buf strings.Builder
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("starting", "config", c)
	PrintFlags(&buf)
	if strings.Contains(buf.String(), old) {
		t.Errorf("log line or help %s contains a previous secret", buf.String())
	}
}

func TestPreviousSecrets(t *testing.T) {
	a, b := strings.Repeat("a", 32), strings.Repeat("b", 40)
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  ", nil},
		{a, []string{a}},
		{a + "," + b, []string{a, b}},
		{" " + a + " , " + b + " ", []string{a, b}},
	}
	for _, tt := range tests {
		got := (&Config{SecretPrevious: tt.in}).PreviousSecrets()
		if len(got) != len(tt.want) {
			t.Errorf("PreviousSecrets(%q) = %q, want %q", tt.in, got, tt.want)
			continue
		}
		for i := range got {
			if string(got[i]) != tt.want[i] {
				t.Errorf("PreviousSecrets(%q) = %q, want %q", tt.in, got, tt.want)
			}
		}
	}
}

func TestRedactDSN(t *testing.T) {
	tests := []struct{ in, want string }{
		{"user:pw@tcp(h:3306)/db", "user:[redacted]@tcp(h:3306)/db"},
		{"user@tcp(h:3306)/db", "user@tcp(h:3306)/db"},
		{"user:p@w/d@unix(/tmp/sock)/db?x=y", "user:[redacted]@unix(/tmp/sock)/db?x=y"},
		{"/db", "/db"},
		{"nodb", "nodb"},
	}
	for _, tt := range tests {
		if got := redactDSN(tt.in); got != tt.want {
			t.Errorf("redactDSN(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestPrintFlagsListsEveryVariable(t *testing.T) {
	var buf strings.Builder
	PrintFlags(&buf)
	for _, v := range vars {
		if !strings.Contains(buf.String(), "--"+v.flag()) || !strings.Contains(buf.String(), v.env()) {
			t.Errorf("PrintFlags lacks --%s or %s", v.flag(), v.env())
		}
	}
}

func TestDoubleDashNamesFlagsAsTheDocsDo(t *testing.T) {
	cases := []struct{ in, want string }{
		{"unknown flag --bogus", "unknown flag --bogus"},
		{"flag needs an argument: --listen", "flag needs an argument: --listen"},
		{`invalid value "x" for flag -downloads: parse error`, `invalid value "x" for flag --downloads: parse error`},
		{"something else -x", "something else -x"},
	}
	for _, c := range cases {
		if got := DoubleDash(errors.New(c.in)).Error(); got != c.want {
			t.Errorf("DoubleDash(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
