package config

import (
	"log/slog"
	"net/url"
	"strings"
)

// redacted replaces a secret that is set; an unset one stays "" so that the
// log still shows whether the generated default is in use.
const redacted = "[redacted]"

// Redacted returns every setting by environment variable name, formatted as
// Load parses it, with the admin token, the secret and a MySQL DSN's
// password replaced.
func (c *Config) Redacted() map[string]string {
	m := make(map[string]string, len(vars))
	for _, v := range vars {
		m[v.env()] = v.safe(c)
	}
	return m
}

// LogValue implements slog.LogValuer, so that logging a *Config never logs
// a secret. Keys are the YAML keys.
func (c *Config) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, len(vars)+1)
	for _, v := range vars {
		attrs = append(attrs, slog.String(v.key(), v.safe(c)))
	}
	attrs = append(attrs, slog.Bool("no_migrate", c.NoMigrate))
	return slog.GroupValue(attrs...)
}

func (v variable) safe(c *Config) string {
	s := v.get(c)
	switch {
	case s == "":
		return ""
	case v.secret:
		return redacted
	case v.name == "DB_DSN" && c.DBDriver == "mysql":
		return redactDSN(s)
	case strings.Contains(s, "://"):
		return redactURL(s)
	}
	return s
}

// redactURL hides the user information of a URL setting (an S3 endpoint
// or JWKS URL written as https://user:password@host/) and its query, which
// may carry a signature or an API key.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		// Unparsable: show only the scheme, never what might be a secret.
		scheme, _, _ := strings.Cut(raw, "://")
		return scheme + "://" + redacted
	}
	if u.User != nil {
		u.User = url.User(redacted)
	}
	if u.RawQuery != "" {
		u.RawQuery = redacted
	}
	return u.String()
}

// redactDSN hides the password of a go-sql-driver DSN,
// [user[:password]@][net[(addr)]]/dbname[?params]. The password may itself
// contain '@' and '/', so the user information ends at the last '@' before
// the last '/', as the driver's own parser decides.
func redactDSN(dsn string) string {
	slash := strings.LastIndex(dsn, "/")
	if slash < 0 {
		return dsn
	}
	at := strings.LastIndex(dsn[:slash], "@")
	if at < 0 {
		return dsn
	}
	user, _, hasPass := strings.Cut(dsn[:at], ":")
	if !hasPass {
		return dsn
	}
	return user + ":" + redacted + dsn[at:]
}
