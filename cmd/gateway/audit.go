package main

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/dlgate/dlgate/client"
	"github.com/dlgate/dlgate/ledger"
)

const auditUsage = `Usage: gateway audit [--actor ID] [--action A] [--target ID] [--after T] [--before T] [--limit N] [--all] [--json]

Lists the changes made through the admin API, newest first: who (the key, or
bootstrap for the admin token), what, to which link, object, session or key, and
the request id: a table on a terminal, otherwise one JSON object per line. Needs
the scope audit:read. A client of the admin API, found and authenticated like
the links commands.`

// Run lists one page of entries, or every page with --all.
func (c *auditCommand) Run(ctx context.Context, args []string) error {
	sc := c.main.subcommand("audit", auditUsage)
	fs := sc.fs
	actor := fs.String("actor", "", "only changes by this key `id` (bootstrap: the admin token)")
	action := fs.String("action", "", "only this `action`: "+strings.Join(ledger.Actions(), ", "))
	target := fs.String("target", "", "only changes to this link, session or key `id`, or object key")
	after := fs.String("after", "", "only changes after this RFC 3339 `time`")
	before := fs.String("before", "", "only changes before this RFC 3339 `time`")
	page := registerPageFlags(fs, "entries")
	if err := sc.none(args); err != nil {
		return err
	}
	if *action != "" && !slices.Contains(ledger.Actions(), *action) {
		return usagef("audit: --action must be one of %s, got %q", strings.Join(ledger.Actions(), ", "), *action)
	}
	if err := page.check("audit"); err != nil {
		return err
	}
	opts := client.AuditOptions{Limit: *page.limit, Actor: *actor, Action: *action, TargetID: *target}
	for _, b := range []struct {
		flag, v string
		t       *time.Time
	}{{"after", *after, &opts.After}, {"before", *before, &opts.Before}} {
		if b.v == "" {
			continue
		}
		t, err := time.Parse(time.RFC3339, b.v)
		if err != nil {
			return usagef("audit: --%s must be an RFC 3339 time like 2030-01-02T03:04:05Z, got %q", b.flag, b.v)
		}
		*b.t = t
	}
	cl, err := sc.client()
	if err != nil {
		return err
	}
	return page.list(c.main, "AT\tACTION\tTARGET\tACTOR\tKEY ID\tREQUEST", func(cursor string, out *listPrinter) (string, error) {
		opts.Cursor = cursor
		p, err := cl.Audit(ctx, opts)
		if err != nil {
			return "", err
		}
		for _, e := range p.Entries {
			out.row(e.Raw, e.At.UTC().Format(time.RFC3339), e.Action, e.Target.Type+" "+e.Target.ID, e.Actor.KeyName, e.Actor.KeyID, e.RequestID)
		}
		return p.NextCursor, nil
	})
}
