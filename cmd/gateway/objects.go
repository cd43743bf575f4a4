package main

import (
	"context"
	"fmt"
)

// Run dispatches to delete or digest.
func (c *objectsCommand) Run(ctx context.Context, args []string) error {
	return c.main.dispatch(ctx, "objects", objectsUsage, commands{{"delete", c.delete}, {"digest", c.digest}}, args)
}

const objectsUsage = `Usage:
  gateway objects delete KEY --version V [--force] [--bucket B]
  gateway objects digest --all [serve's flags]

objects delete is a client of the admin API, found and authenticated like
the links commands: --admin-url, else GATEWAY_ADMIN_URL, else
http:// + GATEWAY_ADMIN_LISTEN; --admin-token, else GATEWAY_ADMIN_TOKEN, else
$GATEWAY_DATA_DIR/admin-token.

objects digest --all computes the SHA-256 of the versions stored before the
gateway computed digests, on the gateway's own database and store
(configured as for serve), with a progress bar; it can be stopped and run
again.

The gateway deletes only versions it stored itself (links create FILE, or
PUT /v1/objects); the sweeper also deletes them GATEWAY_OBJECT_RETENTION
after their last link died.

Run 'gateway help objects SUBCOMMAND' for its flags.
`

func (c *objectsCommand) delete(ctx context.Context, args []string) error {
	sc := c.main.subcommand("objects delete", "Usage: gateway objects delete KEY --version V [--force] [--bucket B]\n\n"+
		"Deletes one version the gateway stored. While a live link or transfer session\n"+
		"pins it the gateway refuses (409), unless --force, which revokes them first.")
	fs := sc.fs
	version := fs.String("version", "", "the `version` id to delete, as links show and uploads print it (required)")
	force := fs.Bool("force", false, "revoke the live links and sessions that pin the version, then delete it")
	bucket := fs.String("bucket", "", "`bucket` of the key (default: the gateway's)")
	key, err := sc.one(args, "KEY")
	if err != nil {
		return err
	}
	if *version == "" {
		return usagef("objects delete: --version is required: the gateway deletes one version at a time")
	}
	cl, err := sc.client()
	if err != nil {
		return err
	}
	if err := cl.DeleteObject(ctx, *bucket, key, *version, *force); err != nil {
		return err
	}
	fmt.Fprintf(c.main.Stdout, "deleted %s version %s\n", key, *version)
	return nil
}
