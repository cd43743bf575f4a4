package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/client"
	"github.com/dlgate/dlgate/config"
)

// linksCommand administers links through the admin API.
type linksCommand struct{ main *Main }

// Run dispatches to create, show, list, grants, revoke or top-up.
func (c *linksCommand) Run(ctx context.Context, args []string) error {
	return c.main.dispatch(ctx, "links", "create, show, list, grants, revoke, top-up", linksUsage, commands{
		"create": c.create, "show": c.show, "revoke": c.revoke, "top-up": c.topUp, "list": c.list, "grants": c.grants,
	}, args)
}

const linksUsage = `Usage:
  gateway links create FILE_OR_KEY --downloads N --expires-in DURATION [flags]
  gateway links show ID
  gateway links list [--account A] [--state S] [--object-key K] [--limit N] [--all] [--json]
  gateway links grants ID [--delivery S] [--limit N] [--all] [--json]
  gateway links revoke ID [--json]
  gateway links top-up ID N [--reason R] [--json]

Every links command is a client of the admin API. It finds it with --admin-url,
else GATEWAY_ADMIN_URL, else http:// + GATEWAY_ADMIN_LISTEN (127.0.0.1:8081; https:// when
GATEWAY_TLS_CERT, GATEWAY_ADMIN_TLS_CERT or GATEWAY_ACME_DOMAINS is set), trusts
the system roots (SSL_CERT_FILE, SSL_CERT_DIR) plus --admin-ca or GATEWAY_ADMIN_CA,
and authenticates with --admin-token, else GATEWAY_ADMIN_TOKEN, else the token
the embedded default saved in $GATEWAY_DATA_DIR/admin-token (./gateway-data).

Run 'gateway help links SUBCOMMAND' for its flags.
`

// adminFlags are the flags every links subcommand takes.
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
	base := a.url
	if base == "" {
		base = env("GATEWAY_ADMIN_URL")
	}
	if base == "" {
		listen := env("GATEWAY_ADMIN_LISTEN")
		if listen == "" {
			listen = config.DefaultAdminListen
		}
		base = adminScheme(env) + config.DialableAddr(listen)
	}
	token := a.token
	if token == "" {
		token = env("GATEWAY_ADMIN_TOKEN")
	}
	if token == "" {
		dir := env("GATEWAY_DATA_DIR")
		if dir == "" {
			dir = config.DefaultDataDir
		}
		path := filepath.Join(dir, config.AdminTokenFile)
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

// createFlags are the flags of links create.
type createFlags struct {
	downloads, retries                                      *int
	expiresIn, account, delivery, filename, bucket, idemKey *string
	confirm, asJSON                                         *bool
}

const createUsage = `Usage: gateway links create FILE_OR_KEY --downloads N --expires-in DURATION [flags]

FILE_OR_KEY naming a local regular file uploads it first (key: its base name) and pins
the link to the uploaded version; anything else is the key of an existing object.
The upload is resumable: interrupted (Ctrl-C, a dropped connection), the same command
run again continues where the gateway stopped receiving. Prints the link URL.`

func registerCreateFlags(fs *flag.FlagSet) createFlags {
	return createFlags{
		downloads: fs.Int("downloads", 0, "allow `N` downloads, at least 1 (required)"),
		retries:   fs.Int("retries", 0, "let the client of an interrupted stream download fetch it again, whole, without spending a download, up to `N` times (0 to 10)"),
		expiresIn: fs.String("expires-in", "", "lifetime, a Go `duration` (90m, 36h) or days (7d) (required)"),
		account:   fs.String("account", "", "bind the link to this verified `account`"),
		delivery:  fs.String("delivery", "stream", "`mode`: stream (the whole file per download) or session (resumable, Range-capable)"),
		filename:  fs.String("filename", "", "download file `name` (default: a local file's base name)"),
		bucket:    fs.String("bucket", "", "`bucket` of an existing object key (default: the gateway's)"),
		idemKey:   fs.String("idempotency-key", "", "retrying with the same `key` returns the same link"),
		confirm:   fs.Bool("confirm", false, "claim only when a person presses the landing page's button"),
		asJSON:    fs.Bool("json", false, "print the whole link as JSON instead of its URL"),
	}
}

// create is links create in its steps: the flags, the request they make
// (refused here when the server would refuse it after an upload), the
// upload of a local file, the link, and what is printed.
func (c *linksCommand) create(ctx context.Context, args []string) error {
	sc := c.main.subcommand("links create", createUsage)
	f := registerCreateFlags(sc.fs)
	pos, helped, err := sc.parse(args)
	if helped {
		return nil
	}
	if err != nil {
		return usagef("links create: %v", err)
	}
	req, local, err := f.request(sc.fs, pos)
	if err != nil {
		return err
	}
	cl, err := sc.client()
	if err != nil {
		return err
	}
	l, err := c.createLink(ctx, cl, req, local)
	if err != nil {
		return err
	}
	return c.printCreated(l, *f.asJSON)
}

// request checks the flags and the argument and returns the link request,
// with whether the argument is a local file to upload first. It refuses
// here what the server would refuse after the upload, so that a bad flag
// never leaves an orphan object behind.
func (f createFlags) request(fs *flag.FlagSet, pos []string) (client.CreateLinkRequest, bool, error) {
	var none client.CreateLinkRequest
	if len(pos) != 1 {
		return none, false, usagef("links create: want one FILE_OR_KEY argument, got %d", len(pos))
	}
	if !isSet(fs, "downloads") {
		return none, false, usagef("links create: --downloads is required")
	}
	if *f.downloads < 1 {
		return none, false, usagef("links create: --downloads must be at least 1, got %d", *f.downloads)
	}
	if *f.expiresIn == "" {
		return none, false, usagef("links create: --expires-in is required")
	}
	lifetime, err := parseLifetime(*f.expiresIn)
	if err != nil {
		return none, false, usagef("links create: --expires-in: %v", err)
	}
	if *f.delivery != "stream" && *f.delivery != "session" {
		return none, false, usagef(`links create: --delivery must be "stream" or "session", got %q`, *f.delivery)
	}
	if *f.retries < 0 || *f.retries > 10 {
		return none, false, usagef("links create: --retries must be between 0 and 10, got %d", *f.retries)
	}
	if *f.retries > 0 && *f.delivery != "stream" {
		// A session resumes within its budget; retries are of stream
		// downloads (SPEC §1).
		return none, false, usagef("links create: --retries applies to stream links; a session link resumes within its session")
	}
	if lifetime > 10*366*24*time.Hour {
		return none, false, usagef("links create: --expires-in must be at most 10 years")
	}
	// As the server counts them (docs/api.md, "Decision: lengths").
	if len(*f.account) > 255 || strings.ContainsFunc(*f.account, unicode.IsControl) {
		return none, false, usagef("links create: --account must be at most 255 bytes (of UTF-8, not characters) without control characters")
	}
	if utf8.RuneCountInString(*f.filename) > 1024 {
		return none, false, usagef("links create: --filename must be at most 1024 characters")
	}
	arg := pos[0]
	local, err := localFile(arg)
	if err != nil {
		return none, false, err
	}
	if !local && looksLikePath(arg) {
		// ./x, ../x and /x can never be object keys: the person meant a
		// file, and it is not there.
		if fi, err := os.Stat(arg); err == nil && fi.IsDir() {
			return none, false, fmt.Errorf("links create: %s: is a directory, not a file", arg)
		}
		return none, false, fmt.Errorf("links create: %s: no such file", arg)
	}
	if local && *f.bucket != "" {
		return none, false, usagef("links create: --bucket applies to existing object keys; uploads go to the gateway's default bucket")
	}
	return client.CreateLinkRequest{
		Object:         client.ObjectRef{Key: arg, Bucket: *f.bucket},
		Downloads:      *f.downloads,
		ExpiresIn:      int64((lifetime + time.Second - 1) / time.Second),
		AccountID:      *f.account,
		Filename:       *f.filename,
		Delivery:       *f.delivery,
		Confirm:        *f.confirm,
		Retries:        *f.retries,
		IdempotencyKey: *f.idemKey,
	}, local, nil
}

// createLink uploads the local file first when there is one, pinning the
// version just uploaded (not whatever is current when the link is
// created), and creates the link; when the server refuses the link, the
// upload that was only for it is taken back.
func (c *linksCommand) createLink(ctx context.Context, cl *client.Client, req client.CreateLinkRequest, local bool) (client.Link, error) {
	if !local {
		return cl.CreateLink(ctx, req)
	}
	path := req.Object.Key
	obj, err := c.uploadFile(ctx, cl, path)
	if err != nil {
		return client.Link{}, err
	}
	req.Object = client.ObjectRef{Key: obj.Key, Bucket: obj.Bucket, VersionID: obj.VersionID}
	if req.Filename == "" {
		req.Filename = filepath.Base(path)
	}
	l, err := cl.CreateLink(ctx, req)
	if err == nil {
		return l, nil
	}
	if derr := cl.DeleteObject(context.WithoutCancel(ctx), req.Object.Bucket, req.Object.Key, req.Object.VersionID, false); derr != nil {
		return client.Link{}, fmt.Errorf("%w (and removing the uploaded %s version %s failed: %v)", err, req.Object.Key, req.Object.VersionID, derr)
	}
	fmt.Fprintf(c.main.Stderr, "removed the uploaded %s version %s again\n", req.Object.Key, req.Object.VersionID)
	return client.Link{}, err
}

// printCreated prints the created link: its named URL on stdout (stdout
// stays just the URL for scripts, and the named URL makes `wget URL` and
// `aria2c URL` save the file under its name, SPEC §9), its id on stderr
// (for links show, revoke, top-up); or the whole link as JSON.
func (c *linksCommand) printCreated(l client.Link, asJSON bool) error {
	if asJSON {
		return printJSON(c.main.Stdout, l)
	}
	fmt.Fprintf(c.main.Stderr, "link %s: %s, expires %s\n", l.ID, plural(l.Downloads, "download"), l.ExpiresAt.UTC().Format(time.RFC3339))
	url := l.NamedURL
	if url == "" { // a gateway from before named URLs
		url = l.URL
	}
	fmt.Fprintln(c.main.Stdout, url)
	return nil
}

// looksLikePath reports whether arg is written as a path of this machine
// rather than an object key (keys never start with "/", "." or "~").
func looksLikePath(arg string) bool {
	return strings.HasPrefix(arg, "/") || strings.HasPrefix(arg, "./") || strings.HasPrefix(arg, "../") ||
		strings.HasPrefix(arg, "~") || arg == "." || arg == ".."
}

// localFile reports whether arg names an existing local regular file. A
// name that does not exist is an object key; one that exists but cannot be
// inspected is an error, not silently a key.
func localFile(arg string) (bool, error) {
	fi, err := os.Stat(arg)
	switch {
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, syscall.ENOTDIR):
		return false, nil
	case err != nil:
		return false, err
	}
	return fi.Mode().IsRegular(), nil
}

// upload streams the local file at path to the store under its base
// name, in one PUT /v1/objects: for a gateway without resumable uploads
// (uploadFile).
func (c *linksCommand) upload(ctx context.Context, cl *client.Client, path string) (client.Object, error) {
	f, fi, key, ctype, err := openUpload(path)
	if err != nil {
		return client.Object{}, err
	}
	defer f.Close()
	body, done := c.main.withProgress(f, fi.Size(), "uploading "+key)
	obj, err := cl.PutObject(ctx, key, body, fi.Size(), ctype)
	done()
	if err != nil {
		return client.Object{}, fmt.Errorf("uploading %s: %w", path, err)
	}
	fmt.Fprintf(c.main.Stderr, "uploaded %s as %q (%d bytes, version %s, sha256 %s)\n", path, obj.Key, obj.Size, obj.VersionID, orNone(obj.SHA256))
	return obj, nil
}

func (c *linksCommand) show(ctx context.Context, args []string) error {
	sc := c.main.subcommand("links show", "Usage: gateway links show ID\n\nPrints the link as JSON: remaining downloads, revocation, grants by status,\nactive sessions, and its object with the version's sha256 (null when unknown).")
	id, _, cl, helped, err := sc.linkArgs(args, 1)
	if helped || err != nil {
		return err
	}
	l, err := cl.GetLink(ctx, id)
	if err != nil {
		return err
	}
	return printJSON(c.main.Stdout, l)
}

func (c *linksCommand) revoke(ctx context.Context, args []string) error {
	sc := c.main.subcommand("links revoke", "Usage: gateway links revoke ID\n\nRevokes the link and ends its transfer sessions. Revoking twice is harmless.")
	asJSON := sc.fs.Bool("json", false, "print the revoked link as JSON")
	id, _, cl, helped, err := sc.linkArgs(args, 1)
	if helped || err != nil {
		return err
	}
	l, err := cl.RevokeLink(ctx, id)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.main.Stdout, l)
	}
	fmt.Fprintf(c.main.Stdout, "link %s revoked\n", id)
	return nil
}

func (c *linksCommand) topUp(ctx context.Context, args []string) error {
	sc := c.main.subcommand("links top-up", "Usage: gateway links top-up ID N [--reason R]\n\nAllows N more downloads through the link.")
	reason := sc.fs.String("reason", "", "why, for the audit trail")
	asJSON := sc.fs.Bool("json", false, "print the updated link as JSON")
	id, pos, cl, helped, err := sc.linkArgs(args, 2)
	if helped || err != nil {
		return err
	}
	n, err := strconv.Atoi(pos[1])
	if err != nil || n < 1 {
		return usagef("links top-up: N must be a whole number of at least 1, got %q", pos[1])
	}
	l, err := cl.AddAllowance(ctx, id, n, *reason)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(c.main.Stdout, l)
	}
	if len(l.Raw) == 0 {
		fmt.Fprintf(c.main.Stdout, "link %s: %s added\n", id, plural(n, "download"))
		return nil
	}
	fmt.Fprintf(c.main.Stdout, "link %s: %s added, %d remaining\n", id, plural(n, "download"), l.Remaining)
	return nil
}

// linkID checks the outcome of parseArgs for a subcommand that takes a link
// id followed by want-1 more arguments. Ids are UUIDs (SPEC §6); checking
// here turns a typo into a usage error instead of a request.
func linkID(cmd string, pos []string, parseErr error, want int) (string, error) {
	if parseErr != nil {
		return "", usagef("%s: %v", cmd, parseErr)
	}
	if len(pos) != want {
		args := "ID"
		if want == 2 {
			args = "ID and N"
		}
		return "", usagef("%s: want %s, got %d argument(s)", cmd, args, len(pos))
	}
	id, err := uuid.Parse(pos[0])
	if err != nil {
		return "", usagef("%s: invalid link id %q: want a UUID", cmd, pos[0])
	}
	return id.String(), nil
}

// parseLifetime accepts a Go duration or a whole number of days ("7d"),
// which time.ParseDuration lacks and link lifetimes usually are.
func parseLifetime(s string) (time.Duration, error) {
	var d time.Duration
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.ParseInt(days, 10, 64)
		if err != nil || n > int64(1<<63-1)/int64(24*time.Hour) {
			return 0, fmt.Errorf("invalid duration %q (want 90m, 36h or 7d)", s)
		}
		d = time.Duration(n) * 24 * time.Hour
	} else {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			return 0, fmt.Errorf("invalid duration %q (want 90m, 36h or 7d)", s)
		}
	}
	if d <= 0 {
		return 0, fmt.Errorf("must be positive, got %q", s)
	}
	return d, nil
}

func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// Errors come back to Run and are printed once, as one line.
	fs.SetOutput(io.Discard)
	return fs
}

// parseArgs parses flags wherever they appear among the positional
// arguments, since `links create FILE --downloads 3` is as natural as the
// reverse and Go's flag package stops at the first non-flag. "--" ends the
// flags.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, config.DoubleDash(err)
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			return append(pos, rest...), nil
		}
		if len(rest) == 0 {
			return pos, nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) {
		if f.Name == name {
			set = true
		}
	})
	return set
}

// printFlags lists fs's flags in the --name form the help text uses.
func printFlags(w io.Writer, fs *flag.FlagSet) {
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		name := f.Name
		if arg != "" {
			name += " " + arg
		}
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			usage += fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "  --%-26s %s\n", name, usage)
	})
}

// printJSON prints a link as the server sent it, indented.
func printJSON(w io.Writer, l client.Link) error { return printRaw(w, l.Raw, l) }

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
