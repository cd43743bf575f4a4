package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/dlgate/dlgate/client"
)

// listsTables reports whether stdout is a person's terminal, where
// listings are tables; anywhere else they are JSON lines for scripts.
func (m *Main) listsTables() bool { return m.terminal(m.Stdout) }

// pageFlags are the paging flags of list and grants.
type pageFlags struct {
	limit  *int
	cursor *string
	all    *bool
	json   *bool
}

func registerPageFlags(fs *flag.FlagSet, what string) pageFlags {
	one := strings.TrimSuffix(what, "s")
	if base, ok := strings.CutSuffix(what, "ies"); ok {
		one = base + "y"
	}
	return pageFlags{
		limit:  fs.Int("limit", 0, "at most `N` "+what+" per page, 1 to 500 (default 100)"),
		cursor: fs.String("cursor", "", "start at this `cursor`, printed when more "+what+" remain"),
		all:    fs.Bool("all", false, "follow every page instead of stopping after one"),
		json:   fs.Bool("json", false, "print JSON lines, one per "+one+" (the default when stdout is not a terminal)"),
	}
}

func (p pageFlags) check(cmd string) error {
	if *p.limit != 0 && (*p.limit < 1 || *p.limit > 500) {
		return usagef("%s: --limit must be between 1 and 500, got %d", cmd, *p.limit)
	}
	return nil
}

var linkStates = []string{"active", "exhausted", "expired", "revoked"}

func (c *linksCommand) list(ctx context.Context, args []string) error {
	sc := c.main.subcommand("links list", "Usage: gateway links list [--account A] [--state S] [--object-key K] [--limit N] [--all] [--json]\n\n"+
		"Lists links, newest first: a table on a terminal, otherwise one JSON object per line\n"+
		"(each as 'links show' prints it, without the token).")
	fs := sc.fs
	account := fs.String("account", "", "only links bound to this `account`")
	state := fs.String("state", "", "only links in this `state`: active, exhausted, expired or revoked")
	objectKey := fs.String("object-key", "", "only links to this object `key`")
	page := registerPageFlags(fs, "links")
	pos, helped, err := sc.parse(args)
	if helped {
		return nil
	}
	if err != nil {
		return usagef("links list: %v", err)
	}
	if len(pos) != 0 {
		return usagef("links list: unexpected argument %q", pos[0])
	}
	if *state != "" && !slices.Contains(linkStates, *state) {
		return usagef("links list: --state must be one of %s, got %q", strings.Join(linkStates, ", "), *state)
	}
	if err := page.check("links list"); err != nil {
		return err
	}
	cl, err := sc.client()
	if err != nil {
		return err
	}
	out := newListPrinter(c.main.Stdout, *page.json || !c.main.listsTables(), "ID\tSTATE\tREMAINING\tEXPIRES\tFILE")
	opts := client.ListOptions{Cursor: *page.cursor, Limit: *page.limit, Account: *account, ObjectKey: *objectKey, State: *state}
	now := time.Now()
	for {
		p, err := cl.ListLinks(ctx, opts)
		if err != nil {
			return err
		}
		for _, l := range p.Links {
			file := l.Filename
			if file == "" {
				file = l.Object.Key
			}
			out.row(l.Raw, l.ID, linkState(l, now), fmt.Sprintf("%d/%d", l.Remaining, l.Downloads),
				l.ExpiresAt.UTC().Format(time.RFC3339), file)
		}
		if opts.Cursor = p.NextCursor; opts.Cursor == "" {
			break
		}
		if !*page.all {
			fmt.Fprintf(c.main.Stderr, "more links: run again with --cursor %s, or with --all\n", opts.Cursor)
			break
		}
	}
	return out.done(c.main.Stderr, "no links")
}

// linkState is the state the server filters by (SPEC §6), read from the
// link at now: revocation first, then expiry, then what remains.
func linkState(l client.Link, now time.Time) string {
	switch {
	case l.RevokedAt != nil:
		return "revoked"
	case !l.ExpiresAt.After(now):
		return "expired"
	case l.Remaining <= 0:
		return "exhausted"
	}
	return "active"
}

func (c *linksCommand) grants(ctx context.Context, args []string) error {
	sc := c.main.subcommand("links grants", "Usage: gateway links grants ID [--delivery S] [--limit N] [--all] [--json]\n\n"+
		"Lists the link's grants (its audit trail), newest first: a table on a terminal,\n"+
		"otherwise one JSON object per line. DELIVERY says what each grant's client\n"+
		"acknowledged: complete, partial or none, with the bytes (or the share of a\n"+
		"session's file), the attempts of a stream download retried, and ~ when the\n"+
		"number is only what the gateway wrote.")
	fs := sc.fs
	delivery := fs.String("delivery", "", "only grants whose delivery is `S`: complete, partial or none")
	page := registerPageFlags(fs, "grants")
	pos, helped, err := sc.parse(args)
	if helped {
		return nil
	}
	id, err := linkID("links grants", pos, err, 1)
	if err != nil {
		return err
	}
	if err := page.check("links grants"); err != nil {
		return err
	}
	if *delivery != "" && !slices.Contains(deliveryStatuses, *delivery) {
		return usagef("links grants: --delivery must be one of %s, got %q", strings.Join(deliveryStatuses, ", "), *delivery)
	}
	cl, err := sc.client()
	if err != nil {
		return err
	}
	out := newListPrinter(c.main.Stdout, *page.json || !c.main.listsTables(), "ID\tSTATUS\tKIND\tDELIVERY\tACCOUNT\tCLIENT\tCREATED")
	opts := client.GrantOptions{Cursor: *page.cursor, Limit: *page.limit, Delivery: *delivery}
	for {
		p, err := cl.Grants(ctx, id, opts)
		if err != nil {
			return err
		}
		for _, g := range p.Grants {
			account := g.AccountID
			if account == "" {
				account = "-"
			}
			out.row(g.Raw, g.ID, g.Status, g.Kind, deliveryCell(g), account, g.Client, g.CreatedAt.UTC().Format(time.RFC3339))
		}
		if opts.Cursor = p.NextCursor; opts.Cursor == "" {
			break
		}
		if !*page.all {
			fmt.Fprintf(c.main.Stderr, "more grants: run again with --cursor %s, or with --all\n", opts.Cursor)
			break
		}
	}
	return out.done(c.main.Stderr, "no grants")
}

var deliveryStatuses = []string{"complete", "partial", "none"}

// deliveryCell is a grant's delivery in the table: its status and, once
// any byte was acknowledged, how much (bytes for a stream download, the
// share of the file for a session's), the attempts when a stream
// download was retried, and "~" before a number that is only what the
// gateway wrote (HTTP/2, no TCP counters).
func deliveryCell(g client.Grant) string {
	d := g.Delivery
	if d.Status == "" {
		return "-"
	}
	cell := d.Status
	if d.BytesAcked > 0 && d.Status != "complete" {
		mark := ""
		if !d.Measured {
			mark = "~"
		}
		if g.Kind == "session" {
			cell += fmt.Sprintf(" %s%.0f%%", mark, 100*d.Coverage)
		} else {
			cell += fmt.Sprintf(" %s%s", mark, byteCount(d.BytesAcked))
		}
	} else if d.Status == "complete" && !d.Measured {
		cell += " ~"
	}
	if d.Attempts > 1 {
		cell += fmt.Sprintf(" (%d attempts)", d.Attempts)
	}
	return cell
}

// byteCount writes n in bytes, KiB, MiB or GiB, as a person reads a size.
func byteCount(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit && exp < 2; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMG"[exp])
}

// listPrinter prints rows as a table, or each row's JSON as received, one
// per line.
type listPrinter struct {
	w     io.Writer
	json  bool
	table *tabwriter.Writer
	rows  int
	err   error
}

func newListPrinter(w io.Writer, asJSON bool, header string) *listPrinter {
	p := &listPrinter{w: w, json: asJSON}
	if !p.json {
		p.table = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(p.table, header)
	}
	return p
}

func (p *listPrinter) row(raw json.RawMessage, cells ...string) {
	p.rows++
	if p.err != nil {
		return
	}
	if p.json {
		var buf bytes.Buffer
		if p.err = json.Compact(&buf, raw); p.err == nil {
			buf.WriteByte('\n')
			_, p.err = buf.WriteTo(p.w)
		}
		return
	}
	for i, c := range cells {
		cells[i] = printable(c)
	}
	_, p.err = fmt.Fprintln(p.table, strings.Join(cells, "\t"))
}

// done flushes the table, or says on stderr that there was nothing to
// list, so that an empty table is not mistaken for a hung command.
func (p *listPrinter) done(stderr io.Writer, none string) error {
	if p.err != nil {
		return p.err
	}
	if p.rows == 0 {
		if !p.json {
			fmt.Fprintln(stderr, none)
		}
		return nil
	}
	if p.table != nil {
		return p.table.Flush()
	}
	return nil
}

// printable keeps a table cell on one line and free of terminal control
// sequences: file names and client strings come from other people.
func printable(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		if r < 0x20 || (r >= 0x7f && r < 0xa0) {
			return '?'
		}
		return r
	}, s)
}
