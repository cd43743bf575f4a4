package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dlgate/dlgate/client"
)

// Run dispatches to create, show, list, grants, revoke or top-up.
func (c *linksCommand) Run(ctx context.Context, args []string) error {
	return c.main.dispatch(ctx, "links", linksUsage, commands{
		{"create", c.create}, {"show", c.show}, {"list", c.list}, {"grants", c.grants}, {"revoke", c.revoke}, {"top-up", c.topUp},
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
	arg, err := sc.one(args, "FILE_OR_KEY")
	if err != nil {
		return err
	}
	req, local, err := f.request(sc.fs, arg)
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
func (f createFlags) request(fs *flag.FlagSet, arg string) (client.CreateLinkRequest, bool, error) {
	var none client.CreateLinkRequest
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

func (c *linksCommand) show(ctx context.Context, args []string) error {
	sc := c.main.subcommand("links show", "Usage: gateway links show ID\n\nPrints the link as JSON: remaining downloads, revocation, grants by status,\nactive sessions, and its object with the version's sha256 (null when unknown).")
	id, _, cl, err := sc.linkArgs(args, 1)
	if err != nil {
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
	id, _, cl, err := sc.linkArgs(args, 1)
	if err != nil {
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
	id, pos, cl, err := sc.linkArgs(args, 2)
	if err != nil {
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
