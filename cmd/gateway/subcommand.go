package main

import (
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
