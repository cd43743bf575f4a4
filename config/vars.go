package config

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// variable is one setting. Its environment variable, flag and YAML key are
// all derived from name, so the three spellings cannot drift apart.
type variable struct {
	name   string // "DB_DRIVER"
	arg    string // placeholder in the flag help
	usage  string
	secret bool // never printed or logged
	ptr    func(*Config) any
}

func (v variable) env() string  { return EnvPrefix + v.name }
func (v variable) flag() string { return strings.ReplaceAll(strings.ToLower(v.name), "_", "-") }
func (v variable) key() string  { return strings.ToLower(v.name) }

// vars lists every setting in the order help and logs show them.
var vars = []variable{
	{name: "LISTEN", arg: "ADDR", usage: "public listener, host:port", ptr: func(c *Config) any { return &c.Listen }},
	{name: "ADMIN_LISTEN", arg: "ADDR", usage: "admin API, health and metrics listener, host:port", ptr: func(c *Config) any { return &c.AdminListen }},
	{name: "PUBLIC_URL", arg: "URL", usage: "base of link and session URLs (default http:// + listen address)", ptr: func(c *Config) any { return &c.PublicURL }},
	{name: "ADMIN_TOKEN", arg: "TOKEN", usage: "admin bearer token (default: generated into the data dir)", secret: true, ptr: func(c *Config) any { return &c.AdminToken }},
	{name: "SECRET", arg: "KEY", usage: "token derivation key, at least 32 characters (default: generated into the data dir)", secret: true, ptr: func(c *Config) any { return &c.Secret }},
	{name: "SECRET_PREVIOUS", arg: "KEYS", usage: "older secrets, comma-separated, whose tokens are still accepted while the secret rotates", secret: true, ptr: func(c *Config) any { return &c.SecretPrevious }},
	{name: "DATA_DIR", arg: "DIR", usage: "home of the embedded default's database, objects and secrets", ptr: func(c *Config) any { return &c.DataDir }},
	{name: "DB_DRIVER", arg: "NAME", usage: `"sqlite" or "mysql"`, ptr: func(c *Config) any { return &c.DBDriver }},
	{name: "DB_DSN", arg: "DSN", usage: "SQLite file (default data dir/gateway.db) or go-sql-driver MySQL DSN", ptr: func(c *Config) any { return &c.DBDSN }},
	{name: "DB_TIMEOUT", arg: "DURATION", usage: "how long one database call of a request may take; past it the answer is 503", ptr: func(c *Config) any { return &c.DBTimeout }},
	{name: "CLAIM_BATCH", arg: "N", usage: "claims that arrive while a claim transaction is in flight are decided together in the next, at most N (1 turns grouping off)", ptr: func(c *Config) any { return &c.ClaimBatch }},
	{name: "REFUSAL_CACHE", arg: "DURATION", usage: "how long a refusal of an exhausted link is answered again without asking the database (0: off)", ptr: func(c *Config) any { return &c.RefusalCache }},
	{name: "STORE", arg: "NAME", usage: `object store, "fs" or "s3"`, ptr: func(c *Config) any { return &c.Store }},
	{name: "FS_ROOT", arg: "DIR", usage: "local store root (default data dir/objects)", ptr: func(c *Config) any { return &c.FSRoot }},
	{name: "S3_BUCKET", arg: "NAME", usage: "default bucket, required for the s3 store", ptr: func(c *Config) any { return &c.S3Bucket }},
	{name: "S3_ENDPOINT", arg: "URL", usage: "S3-compatible endpoint (default AWS)", ptr: func(c *Config) any { return &c.S3Endpoint }},
	{name: "S3_REGION", arg: "NAME", usage: "S3 region", ptr: func(c *Config) any { return &c.S3Region }},
	{name: "S3_PATH_STYLE", usage: "use path-style S3 addressing", ptr: func(c *Config) any { return &c.S3PathStyle }},
	{name: "S3_CA", arg: "FILE", usage: "PEM file of CA certificates trusted, besides the system's, for an https store endpoint (AWS_CA_BUNDLE works too)", ptr: func(c *Config) any { return &c.S3CA }},
	{name: "STORE_OPEN_TIMEOUT", arg: "DURATION", usage: "how long opening an object may take until its first bytes arrive; past it the claim is refunded and the answer is 504", ptr: func(c *Config) any { return &c.StoreOpenTimeout }},
	{name: "STORE_IDLE_TIMEOUT", arg: "DURATION", usage: "how long a running download may wait for the next byte from the store before it is cut", ptr: func(c *Config) any { return &c.StoreIdleTimeout }},
	{name: "TLS_CERT", arg: "FILE", usage: "PEM certificate chain of the public listener, which then serves HTTPS and HTTP/2; reloaded on SIGHUP and when the file changes", ptr: func(c *Config) any { return &c.TLSCert }},
	{name: "TLS_KEY", arg: "FILE", usage: "PEM private key of GATEWAY_TLS_CERT", ptr: func(c *Config) any { return &c.TLSKey }},
	{name: "ADMIN_TLS_CERT", arg: "FILE", usage: "PEM certificate chain of the admin listener (default: the public listener's)", ptr: func(c *Config) any { return &c.AdminTLSCert }},
	{name: "ADMIN_TLS_KEY", arg: "FILE", usage: "PEM private key of GATEWAY_ADMIN_TLS_CERT", ptr: func(c *Config) any { return &c.AdminTLSKey }},
	{name: "REDIRECT_LISTEN", arg: "ADDR", usage: "plain-HTTP listener answering every request with 308 to the https public URL (and ACME HTTP-01), host:port", ptr: func(c *Config) any { return &c.RedirectListen }},
	{name: "ACME_DOMAINS", arg: "LIST", usage: "comma-separated domains to get certificates for from the ACME CA (TLS-ALPN-01 on the public listener, HTTP-01 on the redirect listener)", ptr: func(c *Config) any { return &c.ACMEDomains }},
	{name: "ACME_EMAIL", arg: "ADDR", usage: "contact address of the ACME account (optional)", ptr: func(c *Config) any { return &c.ACMEEmail }},
	{name: "ACME_DIRECTORY", arg: "URL", usage: "ACME directory URL", ptr: func(c *Config) any { return &c.ACMEDirectory }},
	{name: "SHUTDOWN_GRACE", arg: "DURATION", usage: "how long shutdown waits for running requests", ptr: func(c *Config) any { return &c.ShutdownGrace }},
	{name: "MAX_CONNECTIONS", arg: "N", usage: "connections the public listener holds open at once; more wait in the kernel's backlog", ptr: func(c *Config) any { return &c.MaxConnections }},
	{name: "BODY_TIMEOUT", arg: "DURATION", usage: "how long a public request body may take to arrive whole; past it the answer is 408 and nothing is claimed", ptr: func(c *Config) any { return &c.BodyTimeout }},
	{name: "LOG_LEVEL", arg: "LEVEL", usage: "debug, info, warn or error", ptr: func(c *Config) any { return &c.LogLevel }},
	{name: "LOG_FORMAT", arg: "FORMAT", usage: `"text" or "json"`, ptr: func(c *Config) any { return &c.LogFormat }},
	{name: "SESSION_TTL", arg: "DURATION", usage: "default transfer session lifetime", ptr: func(c *Config) any { return &c.SessionTTL }},
	{name: "SESSION_BYTE_BUDGET", arg: "BYTES", usage: "default session byte budget; 0 means 2 × object size, minimum 1 MiB", ptr: func(c *Config) any { return &c.SessionByteBudget }},
	{name: "SESSION_MAX_CONCURRENCY", arg: "N", usage: "default concurrent requests per session", ptr: func(c *Config) any { return &c.SessionMaxConcurrency }},
	{name: "SESSION_AFFINITY", arg: "MODE", usage: `who is sent back to their session by a link URL instead of claiming again: "client" (account, else cookie, else address and User-Agent), "account" or "off"`, ptr: func(c *Config) any { return &c.SessionAffinity }},
	{name: "SLOT_LEASE", arg: "DURATION", usage: "lease of a session's concurrency slot; a crashed process's slots lapse after it", ptr: func(c *Config) any { return &c.SlotLease }},
	{name: "PREVIEW_AGENTS", arg: "LIST", usage: `comma-separated user-agent tokens of link previewers, replacing the built-in list ("none": no agent)`, ptr: func(c *Config) any { return &c.PreviewAgents }},
	{name: "PREVIEW_DETAILS", usage: "show file name and size in link previews", ptr: func(c *Config) any { return &c.PreviewDetails }},
	{name: "AUTH", arg: "MODE", usage: `how callers are verified on public routes: "none", "jwt" or "header"`, ptr: func(c *Config) any { return &c.Auth }},
	{name: "AUTH_COOKIE", arg: "NAME", usage: "cookie that may carry the JWT (GATEWAY_AUTH=jwt)", ptr: func(c *Config) any { return &c.AuthCookie }},
	{name: "AUTH_HEADER", arg: "NAME", usage: "header naming the account, set by a trusted proxy (GATEWAY_AUTH=header)", ptr: func(c *Config) any { return &c.AuthHeader }},
	{name: "TRUSTED_PROXIES", arg: "CIDRS", usage: "comma-separated proxies whose forwarding and account headers are believed", ptr: func(c *Config) any { return &c.TrustedProxies }},
	{name: "JWT_KEY", arg: "KEY", usage: "HS256 secret, PEM public key (RS256, ES256, EdDSA) or @file", secret: true, ptr: func(c *Config) any { return &c.JWTKey }},
	{name: "JWT_JWKS_URL", arg: "URL", usage: "JSON Web Key Set: http(s) URL or file path", ptr: func(c *Config) any { return &c.JWTJWKSURL }},
	{name: "JWT_ISSUER", arg: "ISS", usage: "required iss claim", ptr: func(c *Config) any { return &c.JWTIssuer }},
	{name: "JWT_AUDIENCE", arg: "AUD", usage: "required aud claim", ptr: func(c *Config) any { return &c.JWTAudience }},
	{name: "JWT_ACCOUNT_CLAIM", arg: "CLAIM", usage: "claim that names the account", ptr: func(c *Config) any { return &c.JWTAccountClaim }},
	{name: "JWT_LEEWAY", arg: "DURATION", usage: "clock skew allowed on exp and nbf", ptr: func(c *Config) any { return &c.JWTLeeway }},
	{name: "SWEEP_INTERVAL", arg: "DURATION", usage: "how often expired slots and sessions are swept", ptr: func(c *Config) any { return &c.SweepInterval }},
	{name: "OBJECT_RETENTION", arg: "DURATION", usage: "how long a version the gateway stored is kept once every link to it is dead; 0 keeps versions forever", ptr: func(c *Config) any { return &c.ObjectRetention }},
	{name: "AUDIT_RETENTION", arg: "DURATION", usage: "how long dead links, their grants and sessions are kept; 0 keeps them forever", ptr: func(c *Config) any { return &c.AuditRetention }},
	{name: "WEBHOOK_URL", arg: "URL", usage: "receiver of webhook events (link.created, grant.created, …); empty: no webhooks", ptr: func(c *Config) any { return &c.WebhookURL }},
	{name: "WEBHOOK_SECRET", arg: "SECRET", usage: "Standard Webhooks signing secret, whsec_ and the base64 of 24 to 64 random bytes", secret: true, ptr: func(c *Config) any { return &c.WebhookSecret }},
	{name: "WEBHOOK_MAX_AGE", arg: "DURATION", usage: "how long an undelivered webhook event is retried before it is given up", ptr: func(c *Config) any { return &c.WebhookMaxAge }},
	{name: "CONSOLE", usage: "serve the operator console at /console/ on the admin listener", ptr: func(c *Config) any { return &c.Console }},
	{name: "UPLOAD_EXPIRY", arg: "DURATION", usage: "how long an unfinished resumable upload (/v1/uploads/) is kept after its creation or its last PATCH; then its bytes are removed", ptr: func(c *Config) any { return &c.UploadExpiry }},
}

// set parses raw into the setting. The error omits the variable's name;
// the caller adds it with the source of the value.
func (v variable) set(c *Config, raw string) error {
	switch p := v.ptr(c).(type) {
	case *string:
		*p = raw
	case *bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return fmt.Errorf("invalid boolean %q", raw)
		}
		*p = b
	case *time.Duration:
		d, err := time.ParseDuration(raw)
		if err != nil {
			return fmt.Errorf("invalid duration %q (want Go syntax like 30s, 5m, 1h)", raw)
		}
		*p = d
	case *int:
		n, err := strconv.Atoi(raw)
		if err != nil {
			return fmt.Errorf("invalid integer %q", raw)
		}
		*p = n
	case *int64:
		n, err := strconv.ParseInt(raw, 10, 64)
		if err != nil {
			return fmt.Errorf("invalid integer %q", raw)
		}
		*p = n
	case *slog.Level:
		if err := p.UnmarshalText([]byte(raw)); err != nil {
			return fmt.Errorf("invalid level %q (want debug, info, warn or error)", raw)
		}
	default:
		panic(fmt.Sprintf("config: %s has unsupported type %T", v.name, p))
	}
	return nil
}

// get formats the setting the way set parses it.
func (v variable) get(c *Config) string {
	switch p := v.ptr(c).(type) {
	case *string:
		return *p
	case *bool:
		return strconv.FormatBool(*p)
	case *time.Duration:
		return p.String()
	case *int:
		return strconv.Itoa(*p)
	case *int64:
		return strconv.FormatInt(*p, 10)
	case *slog.Level:
		return strings.ToLower(p.String())
	default:
		panic(fmt.Sprintf("config: %s has unsupported type %T", v.name, p))
	}
}

func (v variable) isBool() bool {
	_, ok := v.ptr(&Config{}).(*bool)
	return ok
}

// rawFlag records a flag's text; values are parsed only after the file and
// environment have been applied, so that precedence decides which error a
// user sees.
type rawFlag struct {
	variable variable
	value    string
}

func (f *rawFlag) String() string { return f.value }
func (f *rawFlag) Set(s string) error {
	f.value = s
	return nil
}
func (f *rawFlag) IsBoolFlag() bool { return f.variable.isBool() }

// newFlagSet defines the flags of `gateway serve` and `gateway migrate`.
func newFlagSet(out io.Writer) (fs *flag.FlagSet, raws map[string]*rawFlag, file *string, noMigrate *bool) {
	fs = flag.NewFlagSet("gateway serve", flag.ContinueOnError)
	fs.SetOutput(out)
	file = fs.String("config", "", "YAML file with the same settings")
	noMigrate = fs.Bool("no-migrate", false, "do not apply pending database migrations")
	raws = make(map[string]*rawFlag, len(vars))
	for _, v := range vars {
		r := &rawFlag{variable: v}
		raws[v.flag()] = r
		fs.Var(r, v.flag(), v.usage)
	}
	return fs, raws, file, noMigrate
}

// PrintFlags writes the help for the flags Load accepts, with each flag's
// environment variable and default.
func PrintFlags(w io.Writer) {
	fmt.Fprintf(w, "  --%-32s %s\n", "config FILE", "YAML file; keys are the names below in snake_case (listen, db_driver, ...)")
	fmt.Fprintf(w, "  --%-32s %s\n", "no-migrate", "do not apply pending database migrations")
	def := Default()
	for _, v := range vars {
		name := v.flag()
		if v.arg != "" {
			name += " " + v.arg
		}
		fmt.Fprintf(w, "  --%-32s %s\n", name, v.usage)
		env := v.env()
		if d := v.get(def); d != "" && !v.secret && (!v.isBool() || d != "false") {
			env += ", default " + d
		}
		fmt.Fprintf(w, "  %-34s %s\n", "", env)
	}
}
