package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/client"
	"github.com/dlgate/dlgate/config"
)

// subcommand is the opening every admin-API subcommand shares (links …,
// objects …): its flag set with the admin flags, its help text, the
// check of its positional arguments, and the admin client once they are
// parsed.
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
// sc.fs, its flags wherever they stand among its positional arguments
// (parseArgs), and returns the positional ones. With -h it prints the
// help and returns errHelped; a flag it cannot parse is a usage error.
func (sc *subcommand) parse(args []string) ([]string, error) {
	pos, err := parseArgs(sc.fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(sc.main.Stdout, sc.usage+"\n\nFlags:\n")
		printFlags(sc.main.Stdout, sc.fs)
		return nil, errHelped
	case err != nil:
		return nil, usagef("%s: %v", sc.name, err)
	}
	return pos, nil
}

// none parses args for a subcommand that takes no positional argument.
func (sc *subcommand) none(args []string) error {
	pos, err := sc.parse(args)
	if err == nil && len(pos) != 0 {
		err = usagef("%s: unexpected argument %q", sc.name, pos[0])
	}
	return err
}

// one parses args for a subcommand that takes one positional argument,
// which what names (NAME, KEY).
func (sc *subcommand) one(args []string, what string) (string, error) {
	pos, err := sc.parse(args)
	switch {
	case err != nil:
		return "", err
	case len(pos) != 1:
		return "", usagef("%s: want one %s argument, got %d", sc.name, what, len(pos))
	}
	return pos[0], nil
}

// id parses args for a subcommand that takes an id and want-1 more
// arguments (top-up's N), and returns the id and them all. Ids are UUIDs
// (SPEC §6): checking here turns a typo into a usage error instead of a
// request; kind names the id ("link") in its error, followed by hint.
func (sc *subcommand) id(args []string, want int, kind, hint string) (string, []string, error) {
	pos, err := sc.parse(args)
	if err != nil {
		return "", nil, err
	}
	if len(pos) != want {
		what := "ID"
		if want == 2 {
			what = "ID and N"
		}
		return "", nil, usagef("%s: want %s, got %d argument(s)", sc.name, what, len(pos))
	}
	id, err := uuid.Parse(pos[0])
	if err != nil {
		return "", nil, usagef("%s: invalid %s id %q: want a UUID%s", sc.name, kind, pos[0], hint)
	}
	return id.String(), pos, nil
}

// linkID is id for a subcommand that takes a link id.
func (sc *subcommand) linkID(args []string, want int) (string, []string, error) {
	return sc.id(args, want, "link", "")
}

// client is the admin API client of the flags and environment.
func (sc *subcommand) client() (*client.Client, error) { return sc.admin.client(sc.main.Env) }

// linkArgs is linkID, and the admin client, for a subcommand that has no
// other check to make before its request.
func (sc *subcommand) linkArgs(args []string, want int) (id string, pos []string, cl *client.Client, err error) {
	if id, pos, err = sc.linkID(args, want); err == nil {
		cl, err = sc.client()
	}
	return id, pos, cl, err
}

// adminFlags are the flags every admin-API subcommand takes.
type adminFlags struct {
	url, token, ca string
}

func (a *adminFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.url, "admin-url", "", "admin API base `URL` (env GATEWAY_ADMIN_URL)")
	fs.StringVar(&a.token, "admin-token", "", "admin bearer `token`: the admin token or an API key (env GATEWAY_ADMIN_TOKEN)")
	fs.StringVar(&a.ca, "admin-ca", "", "PEM `file` of CA certificates trusted, besides the system's, for an https admin URL (env GATEWAY_ADMIN_CA)")
}

// client returns an admin API client, resolving the URL and token from the
// flags, then the environment, then the embedded default's values.
func (a *adminFlags) client(env func(string) string) (*client.Client, error) {
	base := cmp.Or(a.url, env("GATEWAY_ADMIN_URL"))
	if base == "" {
		base = adminScheme(env) + config.DialableAddr(cmp.Or(env("GATEWAY_ADMIN_LISTEN"), config.DefaultAdminListen))
	}
	token := cmp.Or(a.token, env("GATEWAY_ADMIN_TOKEN"))
	if token == "" {
		path := filepath.Join(cmp.Or(env("GATEWAY_DATA_DIR"), config.DefaultDataDir), config.AdminTokenFile)
		t, err := config.ReadSecretFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("no admin token: pass --admin-token, set GATEWAY_ADMIN_TOKEN, or run where %s exists", path)
		}
		if err != nil {
			return nil, err
		}
		token = t
	}
	// No overall timeout: an upload may rightly take hours. The context,
	// canceled on SIGINT/SIGTERM, bounds every call.
	hc, err := adminHTTPClient(a.ca, env)
	if err != nil {
		return nil, err
	}
	return client.New(base, token, hc), nil
}

// dispatch runs the subcommand of group that args name, from cmds;
// usage is the group's help.
func (m *Main) dispatch(ctx context.Context, group, usage string, cmds commands, args []string) error {
	if len(args) == 0 {
		return usagef("%s: missing subcommand (%s); run 'gateway help %s'", group, cmds.names(), group)
	}
	name, args := args[0], args[1:]
	switch name {
	case "help", "-h", "-help", "--help":
		fmt.Fprint(m.Stdout, usage)
		return nil
	}
	run := cmds.find(name)
	if run == nil {
		return usagef("%s: unknown subcommand %q; run 'gateway help %s'", group, name, group)
	}
	return run(ctx, args)
}
