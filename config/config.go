// Package config loads the gateway's settings from flags, environment
// variables and an optional YAML file (SPEC §7), and keeps the embedded
// default's generated secrets in the data directory.
package config

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/dlgate/dlgate/ledger/sqlcore"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
	"github.com/dlgate/dlgate/sessions"
)

// Defaults from SPEC §7 and the gateway's operational knobs. Values derived
// from other settings (public URL, SQLite DSN, FS root) are filled in by Load.
// They are defined here, once, with those of the options that are no
// settings (options.go): the settings take theirs in Default, the
// gateway's options from ApplyDefaults, and the webhook deliverer
// (webhook.New) applies DefaultWebhookMaxAge to its own; configuration
// stays below the HTTP layer in the import graph.
const (
	DefaultListen                = "127.0.0.1:8080"
	DefaultAdminListen           = "127.0.0.1:8081"
	DefaultDataDir               = "./gateway-data"
	DefaultS3Region              = "us-east-1"
	DefaultShutdownGrace         = 30 * time.Second
	DefaultDBTimeout             = engine.DefaultTimeout
	DefaultClaimBatch            = sqlcore.DefaultClaimBatch
	DefaultRefusalCache          = sqlcore.DefaultRefusalCache
	DefaultMaxConnections        = 4096
	DefaultBodyTimeout           = 10 * time.Second
	DefaultSessionTTL            = sessions.DefaultTTL
	DefaultSessionMaxConcurrency = sessions.DefaultMaxConcurrency
	DefaultSlotLease             = 30 * time.Second // SPEC §3: a crashed process loses its slots within 30 s
	DefaultSweepInterval         = 15 * time.Second
	DefaultStoreOpenTimeout      = 10 * time.Second
	DefaultStoreIdleTimeout      = 30 * time.Second
	DefaultObjectRetention       = 168 * time.Hour
	DefaultAuditRetention        = 8760 * time.Hour
	DefaultWebhookMaxAge         = 72 * time.Hour
	// DefaultUploadExpiry is GATEWAY_UPLOAD_EXPIRY's (SPEC §7).
	DefaultUploadExpiry = 24 * time.Hour
	// DefaultSessionAffinity is GATEWAY_SESSION_AFFINITY's (SPEC §5).
	DefaultSessionAffinity = "client"
	// DefaultACMEDirectory is Let's Encrypt's production directory.
	DefaultACMEDirectory = "https://acme-v02.api.letsencrypt.org/directory"

	// EnvPrefix starts every environment variable name.
	EnvPrefix = "GATEWAY_"
)

// Config is the merged gateway configuration. Field comments name the
// environment variable; the flag is its kebab-case form without the prefix
// (GATEWAY_DB_DRIVER → --db-driver) and the YAML key its snake-case form
// (db_driver).
type Config struct {
	Listen      string // GATEWAY_LISTEN
	AdminListen string // GATEWAY_ADMIN_LISTEN
	PublicURL   string // GATEWAY_PUBLIC_URL, never with a trailing slash
	AdminToken  string // GATEWAY_ADMIN_TOKEN
	Secret      string // GATEWAY_SECRET; the HMAC key is the string's bytes
	DataDir     string // GATEWAY_DATA_DIR
	// SecretPrevious is GATEWAY_SECRET_PREVIOUS: older secrets,
	// comma-separated, whose tokens are still accepted (PreviousSecrets).
	SecretPrevious string

	DBDriver string // GATEWAY_DB_DRIVER: "sqlite" or "mysql"
	DBDSN    string // GATEWAY_DB_DSN
	// DBTimeout is GATEWAY_DB_TIMEOUT: how long one database call on
	// the request path (a lookup, a claim, a budget draw, a slot call)
	// may take before the request gets 503.
	DBTimeout time.Duration
	// ClaimBatch is GATEWAY_CLAIM_BATCH: how many claims one claim
	// transaction may decide together (SPEC §1 "Group claims"), 1 to
	// sqlcore.MaxClaimBatch; 1 turns grouping off.
	ClaimBatch int
	// RefusalCache is GATEWAY_REFUSAL_CACHE: how long a process may
	// answer a claim of an exhausted link from its own earlier refusal
	// (SPEC §1 "Refusals may be cached"); 0 turns the cache off.
	RefusalCache time.Duration

	Store       string // GATEWAY_STORE: "fs" or "s3"
	FSRoot      string // GATEWAY_FS_ROOT
	S3Bucket    string // GATEWAY_S3_BUCKET
	S3Endpoint  string // GATEWAY_S3_ENDPOINT; empty means AWS
	S3Region    string // GATEWAY_S3_REGION
	S3PathStyle bool   // GATEWAY_S3_PATH_STYLE
	// S3CA is GATEWAY_S3_CA: a PEM file of CA certificates trusted, on
	// top of the system's, for an https store endpoint (AWS_CA_BUNDLE,
	// the SDK's own variable, works too).
	S3CA string
	// StoreOpenTimeout is GATEWAY_STORE_OPEN_TIMEOUT: how long opening an
	// object may take until its first bytes arrive.
	StoreOpenTimeout time.Duration
	// StoreIdleTimeout is GATEWAY_STORE_IDLE_TIMEOUT: how long a running
	// download may wait for the next byte from the store.
	StoreIdleTimeout time.Duration

	ShutdownGrace time.Duration // GATEWAY_SHUTDOWN_GRACE
	LogLevel      slog.Level    // GATEWAY_LOG_LEVEL: debug, info, warn, error
	LogFormat     string        // GATEWAY_LOG_FORMAT: "text" or "json"

	// MaxConnections is GATEWAY_MAX_CONNECTIONS: how many connections
	// the public listener holds open at once; more wait in the backlog.
	MaxConnections int
	// BodyTimeout is GATEWAY_BODY_TIMEOUT: how long a public request
	// body may take to arrive whole, before anything is claimed.
	BodyTimeout time.Duration

	SessionTTL time.Duration // GATEWAY_SESSION_TTL
	// SessionByteBudget is GATEWAY_SESSION_BYTE_BUDGET in bytes; 0 means
	// "2 × object size, minimum 1 MiB" (SPEC §4).
	SessionByteBudget     int64
	SessionMaxConcurrency int // GATEWAY_SESSION_MAX_CONCURRENCY
	// SessionAffinity is GATEWAY_SESSION_AFFINITY (SPEC §5): "client"
	// (the default), "account" or "off"; the gateway package owns the
	// modes' meaning.
	SessionAffinity string
	SlotLease       time.Duration // GATEWAY_SLOT_LEASE
	SweepInterval   time.Duration // GATEWAY_SWEEP_INTERVAL

	// ObjectRetention is GATEWAY_OBJECT_RETENTION: how long a version the
	// gateway stored is kept once every link pinning it is dead (SPEC §6);
	// 0 keeps versions forever.
	ObjectRetention time.Duration
	// AuditRetention is GATEWAY_AUDIT_RETENTION: how long dead links, their
	// grants and sessions are kept; 0 keeps them forever.
	AuditRetention time.Duration

	// WebhookURL is GATEWAY_WEBHOOK_URL, the receiver of webhook events
	// (SPEC §6); empty turns webhooks off, and no event is written.
	WebhookURL string
	// WebhookSecret is GATEWAY_WEBHOOK_SECRET: "whsec_" and the base64 of
	// 24 to 64 random bytes (WebhookKey decodes it); required with a URL.
	WebhookSecret string
	// WebhookMaxAge is GATEWAY_WEBHOOK_MAX_AGE: how long an event is
	// retried before it is given up.
	WebhookMaxAge time.Duration
	// UploadExpiry is GATEWAY_UPLOAD_EXPIRY: how long an unfinished
	// resumable upload is kept after its creation or its last PATCH
	// before its bytes are removed (SPEC §11).
	UploadExpiry time.Duration
	// Console is GATEWAY_CONSOLE: whether the admin listener serves the
	// operator console at /console/ (SPEC §11); false answers 404 there.
	Console bool

	// PreviewAgents is GATEWAY_PREVIEW_AGENTS: a comma-separated list that
	// replaces the built-in list of link-preview user agents; "none" means
	// no agent (prefetch headers still count); empty keeps the built-in.
	PreviewAgents  string
	PreviewDetails bool // GATEWAY_PREVIEW_DETAILS: name file and size in previews

	// Caller verification and client address (SPEC §8); checked in depth
	// by auth.New when the gateway starts.
	Auth            string        // GATEWAY_AUTH: none, jwt or header
	AuthCookie      string        // GATEWAY_AUTH_COOKIE
	AuthHeader      string        // GATEWAY_AUTH_HEADER
	TrustedProxies  string        // GATEWAY_TRUSTED_PROXIES: comma-separated CIDRs or addresses
	JWTKey          string        // GATEWAY_JWT_KEY: HS256 secret, PEM public key or @file
	JWTJWKSURL      string        // GATEWAY_JWT_JWKS_URL
	JWTIssuer       string        // GATEWAY_JWT_ISSUER
	JWTAudience     string        // GATEWAY_JWT_AUDIENCE
	JWTAccountClaim string        // GATEWAY_JWT_ACCOUNT_CLAIM
	JWTLeeway       time.Duration // GATEWAY_JWT_LEEWAY

	// HTTPS (SPEC §10). TLSCert and TLSKey are PEM files for the public
	// listener; the admin listener uses its own pair, else the public
	// one. ACMEDomains (comma-separated) turns on certificates from the
	// ACME CA at ACMEDirectory; RedirectListen is a plain-HTTP listener
	// that answers 308 to the https public URL (and HTTP-01 challenges).
	TLSCert        string // GATEWAY_TLS_CERT
	TLSKey         string // GATEWAY_TLS_KEY
	AdminTLSCert   string // GATEWAY_ADMIN_TLS_CERT
	AdminTLSKey    string // GATEWAY_ADMIN_TLS_KEY
	RedirectListen string // GATEWAY_REDIRECT_LISTEN
	ACMEDomains    string // GATEWAY_ACME_DOMAINS
	ACMEEmail      string // GATEWAY_ACME_EMAIL
	ACMEDirectory  string // GATEWAY_ACME_DIRECTORY

	// NoMigrate is the --no-migrate flag of `gateway serve`; it has no
	// environment variable or file key.
	NoMigrate bool
}

// Default returns the configuration used when nothing is set, before the
// derived defaults (PublicURL, DBDSN, FSRoot) are filled in.
func Default() *Config {
	return &Config{
		Listen:                DefaultListen,
		AdminListen:           DefaultAdminListen,
		DataDir:               DefaultDataDir,
		DBDriver:              "sqlite",
		Store:                 "fs",
		S3Region:              DefaultS3Region,
		ShutdownGrace:         DefaultShutdownGrace,
		DBTimeout:             DefaultDBTimeout,
		ClaimBatch:            DefaultClaimBatch,
		RefusalCache:          DefaultRefusalCache,
		MaxConnections:        DefaultMaxConnections,
		BodyTimeout:           DefaultBodyTimeout,
		LogLevel:              slog.LevelInfo,
		LogFormat:             "text",
		SessionTTL:            DefaultSessionTTL,
		SessionMaxConcurrency: DefaultSessionMaxConcurrency,
		SessionAffinity:       DefaultSessionAffinity,
		SlotLease:             DefaultSlotLease,
		SweepInterval:         DefaultSweepInterval,
		ObjectRetention:       DefaultObjectRetention,
		AuditRetention:        DefaultAuditRetention,
		WebhookMaxAge:         DefaultWebhookMaxAge,
		UploadExpiry:          DefaultUploadExpiry,
		Console:               true,
		StoreOpenTimeout:      DefaultStoreOpenTimeout,
		StoreIdleTimeout:      DefaultStoreIdleTimeout,
		PreviewDetails:        true,
		Auth:                  "none",
		JWTAccountClaim:       "sub",
		JWTLeeway:             30 * time.Second,
		ACMEDirectory:         DefaultACMEDirectory,
	}
}

// FlagError reports command-line arguments Load could not parse (unknown
// flag, missing flag value, stray argument), as opposed to a value that is
// invalid wherever it came from. The CLI exits 2 for it.
type FlagError struct{ Err error }

// flagName finds the "-name" Go's flag package puts in its messages.
var flagName = regexp.MustCompile(`(^|\s)-([A-Za-z0-9][A-Za-z0-9_.-]*)`)

// DoubleDash rewrites an error of Go's flag package so that it names flags
// the way the help and the docs spell them: "unknown flag --bogus" instead
// of "flag provided but not defined: -bogus". Other errors pass unchanged.
func DoubleDash(err error) error {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return err
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		return errors.New("unknown flag --" + name)
	}
	if !strings.Contains(msg, "flag") {
		return err
	}
	return errors.New(flagName.ReplaceAllString(msg, "$1--$2"))
}

func (e *FlagError) Error() string { return "config: " + e.Err.Error() }
func (e *FlagError) Unwrap() error { return e.Err }

// Load merges, lowest precedence first, the defaults, the YAML file named by
// --config, the environment (env, usually os.Getenv; empty values count as
// unset) and the flags in args that were actually given. It then fills in the
// derived defaults and validates the result.
//
// It returns an error wrapping flag.ErrHelp for -h/--help, a *FlagError for
// unparsable arguments, and otherwise a one-line error naming the variable.
func Load(args []string, env func(string) string) (*Config, error) {
	if env == nil {
		env = func(string) string { return "" }
	}
	fs, raws, file, noMigrate := newFlagSet(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, &FlagError{Err: DoubleDash(err)}
	}
	if fs.NArg() > 0 {
		return nil, &FlagError{Err: fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}

	c := Default()
	c.NoMigrate = *noMigrate
	if *file != "" {
		values, err := readFile(*file)
		if err != nil {
			return nil, err
		}
		for _, v := range vars {
			fv, ok := values[v.key()]
			if !ok {
				continue
			}
			if err := v.set(c, fv.value); err != nil {
				return nil, fmt.Errorf("config: %s: %v (from %s line %d)", v.env(), err, *file, fv.line)
			}
		}
	}
	for _, v := range vars {
		raw := env(v.env())
		if raw == "" {
			continue
		}
		if err := v.set(c, raw); err != nil {
			return nil, fmt.Errorf("config: %s: %v (from the environment)", v.env(), err)
		}
	}
	var err error
	fs.Visit(func(f *flag.Flag) {
		v, ok := raws[f.Name]
		if !ok || err != nil {
			return
		}
		if e := v.variable.set(c, v.value); e != nil {
			err = fmt.Errorf("config: %s: %v (from --%s)", v.variable.env(), e, f.Name)
		}
	})
	if err != nil {
		return nil, err
	}

	c.fillDerived()
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// fillDerived sets the defaults that depend on other settings, so that they
// follow a Listen or DataDir given at any precedence level.
func (c *Config) fillDerived() {
	if c.PublicURL == "" {
		c.PublicURL = c.DefaultPublicURL(c.Listen)
	}
	c.PublicURL = strings.TrimRight(c.PublicURL, "/")
	if c.DBDSN == "" && c.DBDriver == "sqlite" {
		c.DBDSN = filepath.Join(c.DataDir, "gateway.db")
	}
	if c.FSRoot == "" {
		c.FSRoot = filepath.Join(c.DataDir, "objects")
	}
}

// TLS reports whether the public listener serves HTTPS.
func (c *Config) TLS() bool { return c.TLSCert != "" || c.ACMEDomains != "" }

// ACMEDomainList is ACMEDomains split at commas, trimmed, empty entries
// dropped.
func (c *Config) ACMEDomainList() []string {
	var out []string
	for _, d := range strings.Split(c.ACMEDomains, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}

// DefaultPublicURL is the public URL when GATEWAY_PUBLIC_URL is unset,
// for a public listener at listen: http:// and the listen address, or
// https:// with TLS on, naming the first ACME domain (and the listen
// port unless it is 443) when there is one.
func (c *Config) DefaultPublicURL(listen string) string {
	if !c.TLS() {
		return "http://" + DialableAddr(listen)
	}
	domains := c.ACMEDomainList()
	if len(domains) == 0 {
		return "https://" + DialableAddr(listen)
	}
	if _, port, err := net.SplitHostPort(listen); err == nil && port != "443" {
		return "https://" + net.JoinHostPort(domains[0], port)
	}
	return "https://" + domains[0]
}

// DialableAddr turns a listen address into one a client on the same machine
// can put in a URL: a wildcard or empty host ("0.0.0.0:8080", ":8080")
// becomes "localhost", because "http://:8080" is no usable link base.
func DialableAddr(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen // Validate reports it.
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return net.JoinHostPort(host, port)
}

// minSecretLen guards token derivation: every link token is
// HMAC-SHA256(secret, id), so a short secret makes tokens guessable. The
// generated secret is 64 hex characters.
const minSecretLen = 32

// PreviousSecrets returns the entries of SecretPrevious, newest first as
// written, each trimmed of surrounding spaces; nil when it is unset.
func (c *Config) PreviousSecrets() [][]byte {
	if strings.TrimSpace(c.SecretPrevious) == "" {
		return nil
	}
	var out [][]byte
	for _, p := range strings.Split(c.SecretPrevious, ",") {
		out = append(out, []byte(strings.TrimSpace(p)))
	}
	return out
}

// Validate checks a merged configuration. Load calls it; call it yourself
// when you build a Config by hand. The error is one line naming the variable.
func (c *Config) Validate() error {
	bad := func(name, format string, args ...any) error {
		return fmt.Errorf("config: %s%s: %s", EnvPrefix, name, fmt.Sprintf(format, args...))
	}
	for _, l := range []struct{ name, addr string }{{"LISTEN", c.Listen}, {"ADMIN_LISTEN", c.AdminListen}} {
		if err := checkListen(l.addr); err != nil {
			return bad(l.name, "%v", err)
		}
	}
	if _, port, _ := net.SplitHostPort(c.Listen); port != "0" && c.Listen == c.AdminListen {
		return bad("ADMIN_LISTEN", "must differ from GATEWAY_LISTEN, both are %q", c.Listen)
	}
	if err := checkBaseURL(c.PublicURL, false); err != nil {
		return bad("PUBLIC_URL", "%v", err)
	}
	if c.Secret != "" && len(c.Secret) < minSecretLen {
		return bad("SECRET", "must be at least %d characters, got %d", minSecretLen, len(c.Secret))
	}
	// A previous secret still admits every token it made: it gets the
	// same rule. The message names the entry, never its value.
	for i, p := range c.PreviousSecrets() {
		if len(p) < minSecretLen {
			return bad("SECRET_PREVIOUS", "entry %d must be at least %d characters, got %d", i+1, minSecretLen, len(p))
		}
	}
	if c.DataDir == "" {
		return bad("DATA_DIR", "must not be empty")
	}
	switch c.DBDriver {
	case "sqlite":
	case "mysql":
		if c.DBDSN == "" {
			return bad("DB_DSN", `required when GATEWAY_DB_DRIVER is "mysql"`)
		}
	default:
		return bad("DB_DRIVER", `must be "sqlite" or "mysql", got %q`, c.DBDriver)
	}
	if c.DBDSN == "" {
		return bad("DB_DSN", "must not be empty")
	}
	switch c.Store {
	case "fs":
		if c.FSRoot == "" {
			return bad("FS_ROOT", "must not be empty")
		}
	case "s3":
		if c.S3Bucket == "" {
			return bad("S3_BUCKET", `required when GATEWAY_STORE is "s3"`)
		}
		if c.S3Region == "" {
			return bad("S3_REGION", `required when GATEWAY_STORE is "s3"`)
		}
	default:
		return bad("STORE", `must be "fs" or "s3", got %q`, c.Store)
	}
	if c.S3Endpoint != "" {
		if err := checkBaseURL(c.S3Endpoint, true); err != nil {
			return bad("S3_ENDPOINT", "%v", err)
		}
	}
	switch c.Auth {
	case "none", "jwt", "header":
	default:
		return bad("AUTH", `must be "none", "jwt" or "header", got %q`, c.Auth)
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		return bad("LOG_FORMAT", `must be "text" or "json", got %q`, c.LogFormat)
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{
		{"SHUTDOWN_GRACE", c.ShutdownGrace},
		{"DB_TIMEOUT", c.DBTimeout},
		{"BODY_TIMEOUT", c.BodyTimeout},
		{"SESSION_TTL", c.SessionTTL},
		{"SLOT_LEASE", c.SlotLease},
		{"SWEEP_INTERVAL", c.SweepInterval},
		{"STORE_OPEN_TIMEOUT", c.StoreOpenTimeout},
		{"STORE_IDLE_TIMEOUT", c.StoreIdleTimeout},
		{"WEBHOOK_MAX_AGE", c.WebhookMaxAge},
		{"UPLOAD_EXPIRY", c.UploadExpiry},
	} {
		if d.d <= 0 {
			return bad(d.name, "must be positive, got %v", d.d)
		}
	}
	for _, d := range []struct {
		name string
		d    time.Duration
	}{
		{"OBJECT_RETENTION", c.ObjectRetention},
		{"AUDIT_RETENTION", c.AuditRetention},
	} {
		if d.d < 0 {
			return bad(d.name, "must be 0 (keep forever) or positive, got %v", d.d)
		}
	}
	if err := c.validateWebhook(bad); err != nil {
		return err
	}
	if c.SessionByteBudget < 0 {
		return bad("SESSION_BYTE_BUDGET", "must be 0 (automatic) or positive, got %d", c.SessionByteBudget)
	}
	if c.MaxConnections < 1 {
		return bad("MAX_CONNECTIONS", "must be at least 1, got %d", c.MaxConnections)
	}
	if c.ClaimBatch < 1 || c.ClaimBatch > sqlcore.MaxClaimBatch {
		return bad("CLAIM_BATCH", "must be 1 (grouping off) to %d, got %d", sqlcore.MaxClaimBatch, c.ClaimBatch)
	}
	if c.RefusalCache < 0 {
		return bad("REFUSAL_CACHE", "must be 0 (off) or positive, got %v", c.RefusalCache)
	}
	switch c.SessionAffinity {
	case "client", "account", "off":
	default:
		return bad("SESSION_AFFINITY", `must be "client", "account" or "off", got %q`, c.SessionAffinity)
	}
	if c.SessionMaxConcurrency < 1 {
		return bad("SESSION_MAX_CONCURRENCY", "must be at least 1, got %d", c.SessionMaxConcurrency)
	}
	return c.validateTLS(bad)
}

func checkListen(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("invalid host:port %q: %v", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("invalid port in %q", addr)
	}
	return nil
}

// checkBaseURL accepts an absolute http(s) URL usable as a prefix: no query
// or fragment, because link paths are appended to it. allowUser is false
// for URLs the gateway publishes, which must not leak credentials.
func checkBaseURL(raw string, allowUser bool) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("invalid URL %q", raw)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("must be an absolute http or https URL, got %q", raw)
	case u.Hostname() == "":
		return fmt.Errorf("must have a host, got %q", raw)
	case u.RawQuery != "" || u.ForceQuery:
		return fmt.Errorf("must not have a query, got %q", raw)
	case u.Fragment != "":
		return fmt.Errorf("must not have a fragment, got %q", raw)
	case u.User != nil && !allowUser:
		return fmt.Errorf("must not contain user information")
	}
	return nil
}
