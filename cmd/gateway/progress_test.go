package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
)

func TestUploadShowsProgressOnlyOnATerminal(t *testing.T) {
	data := strings.Repeat("x", 3<<20)
	for _, term := range []bool{true, false} {
		var stderr bytes.Buffer
		m := &Main{Stderr: &stderr, IsTerminal: func(io.Writer) bool { return term }}
		body, done := m.withProgress(strings.NewReader(data), int64(len(data)), "uploading big.iso")
		got, err := io.ReadAll(body)
		done()
		if err != nil || len(got) != len(data) {
			t.Fatalf("terminal=%v: read %d bytes (%v), want all %d", term, len(got), err, len(data))
		}
		out := stderr.String()
		if term && (!strings.Contains(out, "uploading big.iso") || !strings.Contains(out, "MB") || !strings.Contains(out, "100%")) {
			t.Errorf("on a terminal the upload printed %q, want a bar with the name, bytes and 100%%", out)
		}
		if !term && out != "" {
			t.Errorf("off a terminal the upload printed %q, want nothing", out)
		}
	}
}
