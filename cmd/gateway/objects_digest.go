package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/storage"
)

const objectsDigestUsage = `Usage: gateway objects digest --all [serve's flags]

Computes the SHA-256 of every version the gateway stored before it computed
digests (SPEC §10), reading each one whole from the store, and records it
with the version and on the links and sessions that pin it: their downloads
then carry Repr-Digest and Digest. Unlike the other objects commands it
works on the gateway's own database and store, configured as for
'gateway serve' (flags, environment, --config file), and applies pending
migrations first unless --no-migrate.

It can be stopped at any time and run again: each version's digest is
committed as soon as it is computed, and a new run takes up the versions
still without one (a version cut off in the middle is read again from its
start). A version whose bytes cannot be read is reported and left for the
next run; the command then exits 1. A version whose bytes no longer hash to
a digest recorded meanwhile is reported as damaged.
`

// digest is 'objects digest --all': the backfill of SHA-256s.
func (c *objectsCommand) digest(ctx context.Context, args []string) error {
	all := false
	var rest []string
	for _, a := range args {
		switch a {
		case "--all", "-all":
			all = true
		default:
			rest = append(rest, a)
		}
	}
	cfg, err := c.main.loadConfig(rest, objectsDigestUsage+"\nFlags of 'gateway serve':\n")
	if err != nil {
		return err
	}
	if !all {
		return usagef("objects digest: --all is required: it digests every stored version that has no SHA-256 yet")
	}
	db, err := openLedger(ctx, cfg, cfg.NoMigrate)
	if err != nil {
		return err
	}
	defer db.Close()
	st, err := openStore(ctx, cfg)
	if err != nil {
		return err
	}
	return c.backfill(ctx, db, st)
}

// backfillPage is how many versions one ledger call hands out.
const backfillPage = 100

// backfill digests every stored version without a SHA-256, streaming each
// through the hash, with one progress bar over all their bytes.
func (c *objectsCommand) backfill(ctx context.Context, d ledger.Digests, st storage.Store) error {
	count, total, err := d.DigestCountMissing(ctx)
	if err != nil {
		return err
	}
	if count == 0 {
		fmt.Fprintln(c.main.Stdout, "every stored version has its SHA-256")
		return nil
	}
	fmt.Fprintf(c.main.Stderr, "%d stored versions without a SHA-256, %d bytes to read\n", count, total)
	bar, done := c.main.progressBar(total, "digesting")
	defer done()
	var progress io.Writer // a nil *ProgressBar is no writer
	if bar != nil {
		progress = bar
	}
	var (
		cursor     string
		ok, failed int
		read       int64
	)
	for {
		page, next, err := d.ObjectListWithoutDigest(ctx, cursor, backfillPage)
		if err != nil {
			return err
		}
		if len(page) == 0 {
			break
		}
		for _, so := range page {
			sum, n, err := digestVersion(ctx, st, so.Object, progress)
			read += n
			if err == nil {
				err = d.DigestRecord(ctx, so.Object, sum)
			}
			switch {
			case err == nil:
				ok++
			case ctx.Err() != nil:
				return fmt.Errorf("stopped after %d versions (%d bytes); run it again to go on: %w", ok, read, ctx.Err())
			case errors.Is(err, ledger.ErrNotFound):
				// Deleted or written over meanwhile: nothing to record.
			default:
				failed++
				what := "could not digest"
				if errors.Is(err, ledger.ErrConflict) {
					what = "DAMAGED (its bytes no longer match its recorded SHA-256)"
				}
				fmt.Fprintf(c.main.Stderr, "%s %s version %s: %v\n", what, so.Key, so.VersionID, err)
			}
		}
		cursor = next
	}
	done()
	fmt.Fprintf(c.main.Stdout, "digested %d versions (%d bytes)\n", ok, read)
	if failed > 0 {
		return fmt.Errorf("%d versions could not be digested; see above, and run it again once the store can read them", failed)
	}
	return nil
}

// digestVersion reads o whole from st through the hash (and the progress
// bar, when there is one) and returns its hex SHA-256 and the bytes read.
func digestVersion(ctx context.Context, st storage.Store, o ledger.Object, progress io.Writer) (string, int64, error) {
	rc, err := st.Open(ctx, o, 0, o.Size)
	if err != nil {
		return "", 0, err
	}
	defer rc.Close()
	h := sha256.New()
	var w io.Writer = h
	if progress != nil {
		w = io.MultiWriter(h, progress)
	}
	n, err := io.Copy(w, rc)
	if err == nil && n != o.Size {
		err = fmt.Errorf("read %d bytes of %d: %w", n, o.Size, storage.ErrChanged)
	}
	if err != nil {
		return "", n, err
	}
	return hex.EncodeToString(h.Sum(nil)), n, nil
}
