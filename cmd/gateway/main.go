// Command gateway runs the download gateway and administers its links
// through the admin API (SPEC §9).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/dlgate/dlgate/config"
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

// Run runs the subcommand named by args[0]. It prints nothing on error; the
// caller reports the error. A *usageError or *config.FlagError means the
// command line itself was wrong. A subcommand that printed its help for
// -h ends with success.
func (m *Main) Run(ctx context.Context, args []string) error {
	if err := m.run(ctx, args); !errors.Is(err, errHelped) {
		return err
	}
	return nil
}

func (m *Main) run(ctx context.Context, args []string) error {
	if m.Env == nil {
		m.Env = func(string) string { return "" }
	}
	if len(args) == 0 {
		return usagef("missing command; run 'gateway help'")
	}
	name, args := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		return m.help(args)
	}
	run := m.commands().find(name)
	if run == nil {
		return usagef("unknown command %q; run 'gateway help'", name)
	}
	return run(ctx, args)
}

// commands are the gateway's commands, in the order mainUsage lists them.
func (m *Main) commands() commands {
	return commands{
		{"serve", (&serveCommand{main: m}).Run},
		{"migrate", (&migrateCommand{main: m}).Run},
		{"links", (&linksCommand{main: m}).Run},
		{"objects", (&objectsCommand{main: m}).Run},
		{"keys", (&keysCommand{main: m}).Run},
		{"audit", (&auditCommand{main: m}).Run},
		{"version", (&versionCommand{main: m}).Run},
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
	if m.commands().find(args[0]) != nil {
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
