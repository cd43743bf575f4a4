package main

import (
	"bytes"
	"encoding/json"
	"io"
	"strconv"
	"strings"

	"github.com/dlgate/dlgate/client"
)

// printRaw prints an answer as the server sent it, indented, so that
// fields this client does not know are shown too; v when there is none.
func printRaw(w io.Writer, raw json.RawMessage, v any) error {
	var buf bytes.Buffer
	if len(raw) > 0 {
		if err := json.Indent(&buf, raw, "", "  "); err != nil {
			return err
		}
	} else {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return err
		}
		buf.Write(b)
	}
	buf.WriteByte('\n')
	_, err := buf.WriteTo(w)
	return err
}

// printJSON prints a link as the server sent it, indented.
func printJSON(w io.Writer, l client.Link) error { return printRaw(w, l.Raw, l) }

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

// plural writes "1 download", "3 downloads".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// orNone is s, or "none" for a value the gateway does not know.
func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
