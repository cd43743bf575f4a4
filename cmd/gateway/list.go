package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// listsTables reports whether stdout is a person's terminal, where
// listings are tables; anywhere else they are JSON lines for scripts.
func (m *Main) listsTables() bool { return m.terminal(m.Stdout) }

// pageFlags are the paging flags of the listings (links list, links
// grants, keys list, audit).
type pageFlags struct {
	what   string // the rows' noun ("links")
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
		what:   what,
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

// list prints the rows of the pages fetch reads, from the --cursor flag
// on: the first page, or every one with --all, as a table on a terminal
// and otherwise JSON lines (listPrinter). fetch prints the rows of the
// page at cursor on out and returns the next page's cursor, "" after the
// last; without --all, a next page is named on stderr.
func (p pageFlags) list(m *Main, header string, fetch func(cursor string, out *listPrinter) (string, error)) error {
	out := newListPrinter(m.Stdout, *p.json || !m.listsTables(), header)
	cursor := *p.cursor
	for {
		next, err := fetch(cursor, out)
		if err != nil {
			return err
		}
		if cursor = next; cursor == "" {
			break
		}
		if !*p.all {
			fmt.Fprintf(m.Stderr, "more %s: run again with --cursor %s, or with --all\n", p.what, cursor)
			break
		}
	}
	return out.done(m.Stderr, "no "+p.what)
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
