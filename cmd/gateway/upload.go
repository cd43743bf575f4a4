package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/dlgate/dlgate/client"
)

// uploadRetries is how often one run sends the rest of an upload again
// after a failure the gateway may get over (a dropped connection, a 5xx,
// another request holding the upload), asking it for its offset first.
const uploadRetries = 3

// openUpload opens the local file at path for an upload: its info (the
// size is the open file's, which is what will be sent), the object key
// (its base name) and the content type its extension names.
func openUpload(path string) (f *os.File, fi os.FileInfo, key, ctype string, err error) {
	if f, err = os.Open(path); err != nil {
		return nil, nil, "", "", err
	}
	if fi, err = f.Stat(); err != nil {
		f.Close()
		return nil, nil, "", "", err
	}
	key = filepath.Base(path)
	if ctype = mime.TypeByExtension(filepath.Ext(key)); ctype == "" {
		ctype = "application/octet-stream"
	}
	return f, fi, key, ctype, nil
}

// uploadFile uploads the local file at path through the gateway's
// resumable uploads (tus, SPEC §11) under its base name, resuming the
// upload a run before left unfinished: its URL is kept in a state file of
// the user's cache directory (uploadState) until the upload is done, so
// that running the same command again after Ctrl-C or a dropped
// connection continues from the gateway's offset. A gateway without
// resumable uploads (404 or 405 to their creation) gets the file with one
// PUT /v1/objects instead.
func (c *linksCommand) uploadFile(ctx context.Context, cl *client.Client, path string) (client.Object, error) {
	up := client.NewUploads(cl)
	f, fi, key, ctype, err := openUpload(path)
	if err != nil {
		return client.Object{}, err
	}
	defer f.Close()
	st, err := c.uploadState(path, fi, up.BaseURL())
	if err != nil {
		return client.Object{}, err
	}
	url, offset, err := c.resumeOrCreate(ctx, up, st, key, fi.Size(), ctype)
	var e *client.Error
	if errors.As(err, &e) && (e.Status == http.StatusNotFound || e.Status == http.StatusMethodNotAllowed) && url == "" {
		return c.upload(ctx, cl, path)
	}
	if err != nil {
		return client.Object{}, fmt.Errorf("uploading %s: %w", path, err)
	}
	if err := c.send(ctx, up, f, url, offset, fi.Size(), key); err != nil {
		if ctx.Err() != nil {
			return client.Object{}, fmt.Errorf("uploading %s: interrupted; run the same command again to resume", path)
		}
		return client.Object{}, fmt.Errorf("uploading %s: %w (run the same command again to resume)", path, err)
	}
	obj, err := up.UploadObject(ctx, url)
	if err != nil {
		return client.Object{}, fmt.Errorf("uploading %s: %w", path, err)
	}
	st.remove()
	fmt.Fprintf(c.main.Stderr, "uploaded %s as %q (%d bytes, version %s, sha256 %s)\n", path, obj.Key, obj.Size, obj.VersionID, orNone(obj.SHA256))
	return obj, nil
}

// resumeOrCreate returns the upload to send the file to and the offset to
// send from: the one st names, when the gateway still has it, else a new
// one, which st then keeps.
func (c *linksCommand) resumeOrCreate(ctx context.Context, cl *client.Uploads, st *uploadState, key string, size int64, ctype string) (string, int64, error) {
	url, stale := st.load()
	if stale != "" {
		// An upload of the file as it was before it changed.
		_ = cl.UploadTerminate(ctx, stale)
	}
	if url != "" {
		offset, length, err := cl.UploadOffset(ctx, url)
		var e *client.Error
		switch {
		case err == nil && length == size:
			fmt.Fprintf(c.main.Stderr, "resuming the upload of %s at byte %d of %d\n", st.file, offset, size)
			return url, offset, nil
		case err == nil || errors.As(err, &e) && (e.Status == http.StatusNotFound || e.Status == http.StatusGone):
			fmt.Fprintf(c.main.Stderr, "the earlier upload of %s is gone from the gateway; starting again\n", st.file)
			_ = cl.UploadTerminate(ctx, url)
		default:
			return "", 0, err
		}
	}
	url, err := cl.UploadCreate(ctx, key, size, key, ctype)
	if err != nil {
		return "", 0, err
	}
	if err := st.save(url); err != nil {
		// The upload works without it; only a resumption would not.
		fmt.Fprintf(c.main.Stderr, "warning: the upload of %s cannot be resumed after an interruption: %v\n", st.file, err)
	}
	return url, 0, nil
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

// send sends the file from offset to its end, behind a progress bar of
// the bytes left, asking the gateway for its offset and sending again
// after a failure it may get over.
func (c *linksCommand) send(ctx context.Context, cl *client.Uploads, f *os.File, url string, offset, size int64, key string) error {
	for attempt := 0; ; attempt++ {
		if offset == size {
			return nil
		}
		what := "uploading " + key
		if offset > 0 {
			what += fmt.Sprintf(" from byte %d", offset)
		}
		body, done := c.main.withProgress(io.NewSectionReader(f, offset, size-offset), size-offset, what)
		got, err := cl.UploadPatch(ctx, url, offset, body, size-offset)
		done()
		if err == nil {
			offset = got
			continue
		}
		if ctx.Err() != nil || attempt == uploadRetries || !retryable(err) {
			return err
		}
		pause := time.Duration(1<<attempt) * time.Second
		fmt.Fprintf(c.main.Stderr, "upload of %s interrupted (%v); resuming in %v\n", key, err, pause)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pause):
		}
		if offset, _, err = cl.UploadOffset(ctx, url); err != nil {
			return err
		}
	}
}

// retryable reports whether err, from a PATCH, is one the gateway may get
// over: no answer, a 5xx, another request holding the upload (423), or
// an offset the gateway moved (409).
func retryable(err error) bool {
	var e *client.Error
	if !errors.As(err, &e) {
		return true // the connection failed
	}
	return e.Status >= 500 || e.Status == http.StatusLocked || e.Status == http.StatusConflict
}
