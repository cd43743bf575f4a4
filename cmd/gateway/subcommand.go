package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/dlgate/dlgate/client"
)

// subcommand is the opening every admin-API subcommand shares (links …,
// objects …): its flag set with the admin flags, its help text, and the
// admin client once the arguments are parsed.
type subcommand struct {
	name  string // "links show"
	usage string // the help text above the flags
	fs    *flag.FlagSet
	admin adminFlags
	main  *Main
}

func (m *Main) subcommand(name, usage string) *subcommand {
	sc := &subcommand{name: name, usage: usage, fs: newFlagSet(name), main: m}
	sc.admin.register(sc.fs)
	return sc
}

// parse parses args after the subcommand's own flags were registered on
// sc.fs. With -h it prints the help and reports helped (the subcommand
// then ends with success); any other error is the caller's to word.
func (sc *subcommand) parse(args []string) (pos []string, helped bool, err error) {
	pos, err = parseArgs(sc.fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(sc.main.Stdout, sc.usage+"\n\nFlags:\n")
		printFlags(sc.main.Stdout, sc.fs)
		return nil, true, nil
	}
	return pos, false, err
}

// client is the admin API client of the flags and environment.
func (sc *subcommand) client() (*client.Client, error) { return sc.admin.client(sc.main.Env) }

// linkArgs parses args for a subcommand that takes a link id and want-1
// more arguments (linkID), and returns them with the admin client; helped
// when it printed its help instead (the subcommand then ends with
// success).
func (sc *subcommand) linkArgs(args []string, want int) (id string, pos []string, cl *client.Client, helped bool, err error) {
	pos, helped, err = sc.parse(args)
	if helped {
		return "", nil, nil, true, nil
	}
	if id, err = linkID(sc.name, pos, err, want); err != nil {
		return "", nil, nil, false, err
	}
	cl, err = sc.client()
	return id, pos, cl, false, err
}

// commands are a command group's subcommands by name.
type commands map[string]func(context.Context, []string) error

// dispatch runs the subcommand of group that args name, from cmds; list
// names them for the error of a missing one, usage is the group's help.
func (m *Main) dispatch(ctx context.Context, group, list, usage string, cmds commands, args []string) error {
	if len(args) == 0 {
		return usagef("%s: missing subcommand (%s); run 'gateway help %s'", group, list, group)
	}
	name, args := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(m.Stdout, usage)
		return nil
	}
	run, ok := cmds[name]
	if !ok {
		return usagef("%s: unknown subcommand %q; run 'gateway help %s'", group, name, group)
	}
	return run(ctx, args)
}
