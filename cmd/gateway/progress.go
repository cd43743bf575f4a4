package main

import (
	"io"
	"os"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
	"github.com/schollz/progressbar/v3"
)

// isTerminal reports whether w is a terminal, where progress bars and
// tables are for a person; anywhere else (a pipe, a file, a CI log) the
// commands print only what scripts parse.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// terminal reports whether w is a person's terminal, through
// Main.IsTerminal when a test set it.
func (m *Main) terminal(w io.Writer) bool {
	if m.IsTerminal != nil {
		return m.IsTerminal(w)
	}
	return isTerminal(w)
}

// withProgress wraps an upload's body in a progress bar on stderr (bytes,
// rate, ETA) when stderr is a terminal; otherwise it returns body as is,
// which keeps the *os.File the transport can sendfile from.
func (m *Main) withProgress(body io.Reader, size int64, what string) (io.Reader, func()) {
	bar, done := m.progressBar(size, what)
	if bar == nil {
		return body, done
	}
	r := progressbar.NewReader(body, bar)
	return &r, done
}

// progressBar is a progress bar of size bytes on stderr (bytes, rate,
// ETA), or nil when stderr is not a terminal; done finishes it (once).
func (m *Main) progressBar(size int64, what string) (*progressbar.ProgressBar, func()) {
	if !m.terminal(m.Stderr) {
		return nil, func() {}
	}
	bar := progressbar.NewOptions64(size,
		progressbar.OptionSetWriter(m.Stderr),
		progressbar.OptionSetDescription(what),
		progressbar.OptionShowBytes(true),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionFullWidth(),
		progressbar.OptionOnCompletion(func() { io.WriteString(m.Stderr, "\n") }), //nolint:errcheck // a terminal
	)
	var once sync.Once
	return bar, func() { once.Do(func() { bar.Finish() }) } //nolint:errcheck // a terminal
}
