// Command gateway runs the download gateway and administers its links
// through the admin API (SPEC §9).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/dlgate/dlgate/config"
	"github.com/dlgate/dlgate/internal/logbuf"
)

func main() {
	progName = commandName(os.Args[0])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal starts a graceful shutdown; a second one ends the
	// process at once, with the shell's code for death by that signal
	// (130 for Ctrl-C), so scripts can tell it from an error.
	second := make(chan os.Signal, 1)
	go func() {
		<-ctx.Done()
		signal.Notify(second, os.Interrupt, syscall.SIGTERM)
		sig := <-second
		code := 130
		if sig == syscall.SIGTERM {
			code = 143
		}
		if lw := logs.Load(); lw != nil {
			lw.Flush() //nolint:errcheck // stderr is gone
		}
		if jsonLogs.Load() {
			slog.New(slog.NewJSONHandler(os.Stderr, nil)).Warn("second signal, exiting now", "signal", sig.String())
		} else {
			fmt.Fprintf(os.Stderr, "gateway: second %s, exiting now\n", sig)
		}
		os.Exit(code)
	}()
	m := &Main{Stdout: os.Stdout, Stderr: os.Stderr, Env: os.Getenv}
	err := m.Run(ctx, os.Args[1:])
	stop()
	os.Exit(report(os.Stderr, err))
}

// jsonLogs is set once serve runs with GATEWAY_LOG_FORMAT=json, so that
// even the last words of a process killed by a second signal are JSON.
var jsonLogs atomic.Bool

// logs is serve's log writer, which holds info lines for a moment: a
// process ended by a second signal writes them out first.
var logs atomic.Pointer[logbuf.Writer]

// progName is how the person ran this program, for the hints it prints:
// "go run ./cmd/gateway" under go run, else the command as typed.
var progName = "gateway"

// commandName turns os.Args[0] into the command a person would type again.
func commandName(arg0 string) string {
	if strings.Contains(arg0, string(os.PathSeparator)+"go-build") {
		return "go run ./cmd/gateway" // a binary in go run's temporary build directory
	}
	if arg0 == "" {
		return "gateway"
	}
	return arg0
}

// Main is the gateway command with its environment, so that tests run it
// in-process with their own output and variables.
type Main struct {
	Stdout io.Writer
	Stderr io.Writer
	Env    func(string) string // os.Getenv in production
	// IsTerminal says whether a writer is a person's terminal (default:
	// an *os.File that isatty says is one); tests set it.
	IsTerminal func(io.Writer) bool
}

// Run runs the subcommand named by args[0]. It prints nothing on error; the
// caller reports the error. A *usageError or *config.FlagError means the
// command line itself was wrong.
func (m *Main) Run(ctx context.Context, args []string) error {
	if m.Env == nil {
		m.Env = func(string) string { return "" }
	}
	if len(args) == 0 {
		return usagef("missing command; run 'gateway help'")
	}
	name, args := args[0], args[1:]
	switch name {
	case "serve":
		return (&serveCommand{main: m}).Run(ctx, args)
	case "migrate":
		return (&migrateCommand{main: m}).Run(ctx, args)
	case "links":
		return (&linksCommand{main: m}).Run(ctx, args)
	case "objects":
		return (&objectsCommand{main: m}).Run(ctx, args)
	case "keys":
		return (&keysCommand{main: m}).Run(ctx, args)
	case "audit":
		return (&auditCommand{main: m}).Run(ctx, args)
	case "version":
		return (&versionCommand{main: m}).Run(ctx, args)
	case "help", "-h", "-help", "--help":
		return m.help(args)
	default:
		return usagef("unknown command %q; run 'gateway help'", name)
	}
}

func (m *Main) help(args []string) error {
	if len(args) == 0 {
		fmt.Fprint(m.Stdout, mainUsage)
		return nil
	}
	if len(args) > 1 && (args[0] == "links" || args[0] == "objects" || args[0] == "keys") {
		return m.Run(context.Background(), []string{args[0], args[1], "-h"})
	}
	switch args[0] {
	case "serve", "migrate", "links", "objects", "keys", "audit", "version":
		return m.Run(context.Background(), []string{args[0], "-h"})
	}
	return usagef("unknown help topic %q; run 'gateway help'", args[0])
}

const mainUsage = `gateway hands out files through limited-use download links.

Usage:
  gateway serve [flags]        run the gateway
  gateway migrate [flags]      apply database migrations and exit
  gateway links create FILE_OR_KEY --downloads N --expires-in DURATION [flags]
  gateway links show ID
  gateway links list [--account A] [--state S] [--json]
  gateway links grants ID [--json]
  gateway links revoke ID
  gateway links top-up ID N [--reason R]
  gateway objects delete KEY --version V [--force]
  gateway objects digest --all [flags]
  gateway keys create NAME --scope S [--scope S…] [--expires-in D]
  gateway keys list [--json]
  gateway keys revoke ID
  gateway audit [--actor ID] [--action A] [--target ID] [--json]
  gateway version

Run 'gateway help COMMAND' for a command's flags.
`

// serveCommand runs the gateway until ctx is canceled.
type serveCommand struct{ main *Main }

// Run loads the configuration from args and the environment and serves.
func (c *serveCommand) Run(ctx context.Context, args []string) error {
	cfg, err := config.Load(args, c.main.Env)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(c.main.Stdout, "Usage: gateway serve [flags]\n\nRuns the gateway, applying pending migrations first unless --no-migrate.\nFlags (each also an environment variable and a --config file key):\n")
		config.PrintFlags(c.main.Stdout)
		return nil
	}
	if err != nil {
		return err
	}
	jsonLogs.Store(cfg.LogFormat == "json")
	err = serve(ctx, cfg, c.main.Stdout)
	if err != nil && cfg.LogFormat == "json" {
		// Every line is JSON in this format, the last one too.
		slog.New(slog.NewJSONHandler(c.main.Stderr, nil)).Error("gateway stopped", "err", err)
		return &reportedError{err}
	}
	return err
}

// reportedError was already printed; report only sets the exit code.
type reportedError struct{ err error }

func (e *reportedError) Error() string { return e.err.Error() }
func (e *reportedError) Unwrap() error { return e.err }

// migrateCommand applies pending migrations and exits.
type migrateCommand struct{ main *Main }

// Run loads the configuration from args and the environment and migrates.
func (c *migrateCommand) Run(ctx context.Context, args []string) error {
	cfg, err := config.Load(args, c.main.Env)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(c.main.Stdout, "Usage: gateway migrate [flags]\n\nApplies pending database migrations and exits. It takes the flags of 'gateway serve';\nonly the database settings matter:\n")
		config.PrintFlags(c.main.Stdout)
		return nil
	}
	if err != nil {
		return err
	}
	return migrate(ctx, cfg)
}

// usageError is a mistake in the command line, as opposed to a failure
// while running a correct one; the process exits 2 for it.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// report prints err as the single line "gateway: <message>" and returns the
// exit code: 0 without error, 2 for a usage error, 1 otherwise.
func report(stderr io.Writer, err error) int {
	if err == nil {
		return 0
	}
	var done *reportedError
	if errors.As(err, &done) {
		return 1
	}
	fmt.Fprintf(stderr, "gateway: %s\n", strings.Join(strings.Fields(err.Error()), " "))
	var ue *usageError
	var fe *config.FlagError
	if errors.As(err, &ue) || errors.As(err, &fe) {
		return 2
	}
	return 1
}
