package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dlgate/dlgate/client"
)

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
	if err := sc.none(args); err != nil {
		return err
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
	opts := client.ListOptions{Limit: *page.limit, Account: *account, ObjectKey: *objectKey, State: *state}
	now := time.Now()
	return page.list(c.main, "ID\tSTATE\tREMAINING\tEXPIRES\tFILE", func(cursor string, out *listPrinter) (string, error) {
		opts.Cursor = cursor
		p, err := cl.ListLinks(ctx, opts)
		if err != nil {
			return "", err
		}
		for _, l := range p.Links {
			file := l.Filename
			if file == "" {
				file = l.Object.Key
			}
			out.row(l.Raw, l.ID, linkState(l, now), fmt.Sprintf("%d/%d", l.Remaining, l.Downloads),
				l.ExpiresAt.UTC().Format(time.RFC3339), file)
		}
		return p.NextCursor, nil
	})
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
	id, _, err := sc.linkID(args, 1)
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
	opts := client.GrantOptions{Limit: *page.limit, Delivery: *delivery}
	return page.list(c.main, "ID\tSTATUS\tKIND\tDELIVERY\tACCOUNT\tCLIENT\tCREATED", func(cursor string, out *listPrinter) (string, error) {
		opts.Cursor = cursor
		p, err := cl.Grants(ctx, id, opts)
		if err != nil {
			return "", err
		}
		for _, g := range p.Grants {
			account := g.AccountID
			if account == "" {
				account = "-"
			}
			out.row(g.Raw, g.ID, g.Status, g.Kind, deliveryCell(g), account, g.Client, g.CreatedAt.UTC().Format(time.RFC3339))
		}
		return p.NextCursor, nil
	})
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
