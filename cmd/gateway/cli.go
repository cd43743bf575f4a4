package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
)

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

// The commands, each a group of subcommands (or one) run against the Main
// that runs it: Main.Run picks one by name, and its Run takes the rest of
// the arguments. A group's subcommands are methods of its type, in the
// files named after them (links.go, links_list.go, upload.go, …).
type (
	serveCommand   struct{ main *Main }
	migrateCommand struct{ main *Main }
	linksCommand   struct{ main *Main }
	objectsCommand struct{ main *Main }
	keysCommand    struct{ main *Main }
	auditCommand   struct{ main *Main }
	versionCommand struct{ main *Main }
)

// commands are the commands, or a group's subcommands, each by name, in
// the order their help and errors list them.
type commands []struct {
	name string
	run  func(ctx context.Context, args []string) error
}

// find is the command called name, nil when there is none.
func (cs commands) find(name string) func(context.Context, []string) error {
	for _, c := range cs {
		if c.name == name {
			return c.run
		}
	}
	return nil
}

// names lists the commands' names: "create, list, revoke".
func (cs commands) names() string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

// errHelped ends a subcommand that printed its help for -h: the command
// then succeeds (Main.Run).
var errHelped = errors.New("help printed")

// usageError is a mistake in the command line, as opposed to a failure
// while running a correct one; the process exits 2 for it.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// reportedError was already printed; report only sets the exit code.
type reportedError struct{ err error }

func (e *reportedError) Error() string { return e.err.Error() }
func (e *reportedError) Unwrap() error { return e.err }
