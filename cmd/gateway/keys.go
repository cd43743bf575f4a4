package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/client"
)

// Run dispatches to create, list or revoke.
func (c *keysCommand) Run(ctx context.Context, args []string) error {
	return c.main.dispatch(ctx, "keys", keysUsage, commands{{"create", c.create}, {"list", c.list}, {"revoke", c.revoke}}, args)
}

var keysUsage = `Usage:
  gateway keys create NAME --scope S [--scope S…] [--expires-in D] [--json]
  gateway keys list [--limit N] [--all] [--json]
  gateway keys revoke ID

API keys are credentials of the admin API besides the bootstrap token
(GATEWAY_ADMIN_TOKEN), each holding some scopes:
  ` + strings.Join(apikey.All().Strings(), ", ") + `
A key can only give the scopes it holds; keys create, list and revoke need
keys:write. A revoked key is refused by every gateway process within a second.

The keys commands are clients of the admin API, found and authenticated like
the links commands (--admin-url, --admin-token, GATEWAY_ADMIN_URL,
GATEWAY_ADMIN_TOKEN, which may be any key).

Run 'gateway help keys SUBCOMMAND' for its flags.
`

// scopeList is a repeatable --scope flag; each value may also list
// several scopes separated by commas.
type scopeList []string

func (s *scopeList) String() string { return strings.Join(*s, ",") }

func (s *scopeList) Set(v string) error {
	for _, name := range strings.Split(v, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		if _, err := apikey.ParseScope(name); err != nil {
			return fmt.Errorf("unknown scope %q (the scopes are %s)", name, strings.Join(apikey.All().Strings(), ", "))
		}
		*s = append(*s, name)
	}
	return nil
}

const keysCreateUsage = `Usage: gateway keys create NAME --scope S [--scope S…] [--expires-in D] [--json]

Makes an API key holding the scopes given, and prints it once, on stdout: the
gateway keeps only its SHA-256, so store it now. Its id goes to stderr.`

func (c *keysCommand) create(ctx context.Context, args []string) error {
	sc := c.main.subcommand("keys create", keysCreateUsage)
	var scopes scopeList
	sc.fs.Var(&scopes, "scope", "a `scope` the key holds; repeat it, or separate scopes with commas (at least one)")
	expiresIn := sc.fs.String("expires-in", "", "lifetime, a Go `duration` (90m, 36h) or days (90d); default until revoked")
	asJSON := sc.fs.Bool("json", false, "print the created key as JSON, its text included")
	name, err := sc.one(args, "NAME")
	if err != nil {
		return err
	}
	if len(scopes) == 0 {
		return usagef("keys create: --scope is required (the scopes are %s)", strings.Join(apikey.All().Strings(), ", "))
	}
	req := client.CreateKeyRequest{Name: name, Scopes: scopes}
	if *expiresIn != "" {
		d, err := parseLifetime(*expiresIn)
		if err != nil {
			return usagef("keys create: --expires-in: %v", err)
		}
		if d > 10*366*24*time.Hour {
			return usagef("keys create: --expires-in must be at most 10 years")
		}
		req.ExpiresIn = int64((d + time.Second - 1) / time.Second)
	}
	cl, err := sc.client()
	if err != nil {
		return err
	}
	k, err := cl.CreateKey(ctx, req)
	if err != nil {
		return err
	}
	if *asJSON {
		return printRaw(c.main.Stdout, k.Raw, k)
	}
	expires := "never expires"
	if k.ExpiresAt != nil {
		expires = "expires " + k.ExpiresAt.UTC().Format(time.RFC3339)
	}
	fmt.Fprintf(c.main.Stderr, "key %s (%s): %s, %s; it is shown only now\n", k.ID, printable(k.Name), strings.Join(k.Scopes, " "), expires)
	fmt.Fprintln(c.main.Stdout, k.Secret)
	return nil
}

func (c *keysCommand) list(ctx context.Context, args []string) error {
	sc := c.main.subcommand("keys list", "Usage: gateway keys list [--limit N] [--all] [--json]\n\n"+
		"Lists the API keys, newest first, revoked and expired ones included, never their\n"+
		"text: a table on a terminal, otherwise one JSON object per line.")
	page := registerPageFlags(sc.fs, "keys")
	if err := sc.none(args); err != nil {
		return err
	}
	if err := page.check("keys list"); err != nil {
		return err
	}
	cl, err := sc.client()
	if err != nil {
		return err
	}
	now := time.Now()
	return page.list(c.main, "ID\tNAME\tSTATE\tSCOPES\tLAST USED\tEXPIRES", func(cursor string, out *listPrinter) (string, error) {
		p, err := cl.ListKeys(ctx, cursor, *page.limit)
		if err != nil {
			return "", err
		}
		for _, k := range p.Keys {
			out.row(k.Raw, k.ID, k.Name, keyState(k, now), strings.Join(k.Scopes, ","), timeOr(k.LastUsedAt, "never"), timeOr(k.ExpiresAt, "never"))
		}
		return p.NextCursor, nil
	})
}

// keyState is revoked, expired or active, read from the key at now.
func keyState(k client.Key, now time.Time) string {
	switch {
	case k.RevokedAt != nil:
		return "revoked"
	case k.ExpiresAt != nil && !k.ExpiresAt.After(now):
		return "expired"
	}
	return "active"
}

// timeOr is t in RFC 3339 UTC, or none when t is nil.
func timeOr(t *time.Time, none string) string {
	if t == nil {
		return none
	}
	return t.UTC().Format(time.RFC3339)
}

func (c *keysCommand) revoke(ctx context.Context, args []string) error {
	sc := c.main.subcommand("keys revoke", "Usage: gateway keys revoke ID\n\n"+
		"Revokes the key: every gateway process refuses it within a second, and its\n"+
		"console sessions end. Revoking twice is harmless.")
	id, _, err := sc.id(args, 1, "key", ", as keys list prints it")
	if err != nil {
		return err
	}
	cl, err := sc.client()
	if err != nil {
		return err
	}
	if err := cl.RevokeKey(ctx, id); err != nil {
		return err
	}
	fmt.Fprintf(c.main.Stdout, "key %s revoked\n", id)
	return nil
}
