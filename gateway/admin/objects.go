package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/gorilla/mux"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/storage"
)

// Objects serves the object routes (SPEC §6): a version's upload (PUT;
// resumable uploads are the uploads package's) and its deletion.
type Objects struct {
	ledger ledger.ObjectLedger
	store  storage.Store
	log    *slog.Logger
}

// StoreDeleteTimeout bounds one store deletion. It answers in a round
// trip or two; one that hangs is retried later, not waited for.
const StoreDeleteTimeout = 30 * time.Second

// recordStored records v, just stored by PUT /v1/objects, in the ledger:
// only recorded versions are ever deleted by the gateway (SPEC §6). When
// the ledger cannot record it, the upload fails and the version is
// deleted again at once, so that nothing stays in the store that no
// retention would ever remove. It reports whether the upload may answer.
func (h *Objects) recordStored(w http.ResponseWriter, r *http.Request, v storage.Version) bool {
	err := h.ledger.ObjectRecord(r.Context(), v)
	if err == nil {
		return true
	}
	if d, ok := h.store.(storage.Deleter); ok {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), StoreDeleteTimeout)
		defer cancel()
		if derr := d.Delete(ctx, v); derr != nil {
			h.log.ErrorContext(ctx, "unrecorded upload left in the store", "key", v.Key, "version_id", v.VersionID, "err", derr)
		}
	}
	problem.Fail(h.log, w, r, err, problem.NotFound, "key", v.Key, "version_id", v.VersionID)
	return false
}

// pathKeyRules is the detail of a 400 invalid-key for the key in the path
// of PUT and DELETE /v1/objects/{key}.
const pathKeyRules = `The key (the path after /v1/objects/, percent-decoded) must be at most 1024 bytes of UTF-8 ` +
	`without control characters, backslashes or empty segments ("//", a trailing "/"), must not start with "/", ` +
	`and must have no "." or ".." segment.`

// pathKey returns the object key of PUT and DELETE /v1/objects/{key}, the
// route variable percent-decoded, and whether it is a valid key: storage's
// rules (storage.ValidateKey), and no empty segment, as the client
// package's checkKey has it. A "//" in a URL path does not reliably reach
// the gateway as written (proxies merge it, nginx by default, and clients
// clean it), so a key with one is refused, raw or percent-encoded
// (%2F%2F) alike: one key, one answer. The router hands this route
// unclean paths (checksOwnPath) for this check to refuse.
func pathKey(r *http.Request) (string, bool) {
	key, err := url.PathUnescape(mux.Vars(r)["key"])
	if err != nil || !validPathKey(key) {
		return "", false
	}
	return key, true
}

// validPathKey is pathKey's rule for a decoded key.
func validPathKey(key string) bool {
	return storage.ValidateKey(key) == nil && !strings.Contains(key, "//") && !strings.HasSuffix(key, "/")
}

// DeleteObject serves DELETE /v1/objects/{key}?version_id=…[&force=…]
// [&bucket=…] (ObjectDelete).
func (h *Objects) DeleteObject(w http.ResponseWriter, r *http.Request) {
	key, ok := pathKey(r)
	if !ok {
		problem.Write(w, r, problem.InvalidKey, pathKeyRules)
		return
	}
	q := r.URL.Query()
	req := ObjectDeleteRequest{Bucket: q.Get("bucket"), Key: key, VersionID: q.Get("version_id")}
	if f := q.Get("force"); f != "" {
		var err error
		if req.Force, err = strconv.ParseBool(f); err != nil {
			problem.Write(w, r, problem.BadRequest, "force must be true or false.")
			return
		}
	}
	if err := h.ObjectDelete(r.Context(), req); err != nil {
		writeError(h.log, w, r, err, problem.VersionNotStored, "key", key, "version_id", req.VersionID)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// ObjectDeleteRequest names the version DELETE /v1/objects deletes.
type ObjectDeleteRequest struct {
	Bucket    string // "" is the store's default
	Key       string // decoded
	VersionID string
	// Force revokes the live links and sessions that pin the version
	// first.
	Force bool
}

// ObjectDelete deletes one version the gateway stored (SPEC §6): refused
// for a version it did not store or already deleted (404), and while a
// live link or session pins it (409 naming how many) unless req.Force,
// which revokes them first. The ledger decides and marks the version
// deleting before the store is asked, so no link can pin it meanwhile; a
// store failure is returned (502/504) and leaves the deletion to the
// sweeper, which retries it. Errors: *Refusal, the ledger's and the
// store's.
func (h *Objects) ObjectDelete(ctx context.Context, req ObjectDeleteRequest) error {
	key, vid := req.Key, req.VersionID
	if !validPathKey(key) {
		return refuse(problem.InvalidKey, "key", pathKeyRules)
	}
	if vid == "" {
		return badRequest("version_id", "version_id is required: the gateway deletes one version at a time.")
	}
	deleter, ok := h.store.(storage.Deleter)
	if !ok {
		return refuse(problem.DeleteUnsupported, "", "")
	}
	// The store names the bucket that "" stands for; the ledger records
	// versions by their real bucket.
	v, err := h.store.Stat(ctx, storage.Ref{Bucket: req.Bucket, Key: key, VersionID: vid})
	if errors.Is(err, storage.ErrNotFound) {
		h.log.InfoContext(ctx, "object deletion refused", "key", key, "version_id", vid, "reason", "not in the store")
		return refuse(problem.VersionNotStored, "", "")
	}
	if err != nil {
		return err
	}
	d, err := h.ledger.DeletionBegin(ctx, v.Bucket, v.Key, v.VersionID, req.Force)
	var pinned *ledger.PinnedError
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		h.log.InfoContext(ctx, "object deletion refused", "key", key, "version_id", vid, "reason", "not stored by the gateway")
		return refuse(problem.VersionNotStored, "", "")
	case errors.As(err, &pinned):
		h.log.InfoContext(ctx, "object deletion refused", "key", key, "version_id", vid, "reason", "pinned",
			"live_links", pinned.Links, "live_sessions", pinned.Sessions)
		return refuse(problem.ObjectPinned, "force", fmt.Sprintf("%s and %s pin this version; revoke them first or pass force=true.",
			count(pinned.Links, "live link"), count(pinned.Sessions, "live session")))
	case err != nil:
		return err
	}
	dctx, cancel := context.WithTimeout(ctx, StoreDeleteTimeout)
	defer cancel()
	if err := h.DeleteVersion(dctx, deleter, *d); err != nil {
		h.log.WarnContext(ctx, "object deletion left to the sweeper", "key", key, "version_id", vid, "err", err)
		return err
	}
	h.log.InfoContext(ctx, "object deleted", "key", v.Key, "version_id", v.VersionID, "forced", req.Force)
	return nil
}

// DeleteVersion deletes d's version from the store and reports the outcome
// to the ledger. A version the store no longer has, or an S3 "null"
// version that another object replaced, is gone: that is success, not a
// failure to retry.
func (h *Objects) DeleteVersion(ctx context.Context, deleter storage.Deleter, d ledger.Deletion) error {
	o := d.Object
	err := deleter.Delete(ctx, o)
	if errors.Is(err, storage.ErrNotFound) || errors.Is(err, storage.ErrChanged) {
		h.log.InfoContext(ctx, "object version already gone from the store", "key", o.Key, "version_id", o.VersionID, "err", err)
		err = nil
	}
	// The report outlives a canceled request: the store's answer is
	// known and must not be lost.
	if ferr := h.ledger.DeletionFinish(context.WithoutCancel(ctx), d, err); ferr != nil {
		if err == nil {
			return ferr
		}
		h.log.WarnContext(ctx, "object deletion outcome not recorded", "key", o.Key, "version_id", o.VersionID, "err", ferr)
	}
	return err
}

// count writes "1 live link", "2 live links".
func count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// PutObject streams the request body into the store (SPEC §6).
func (h *Objects) PutObject(w http.ResponseWriter, r *http.Request) {
	key, ok := pathKey(r)
	if !ok {
		problem.Write(w, r, problem.InvalidKey, pathKeyRules)
		return
	}
	size := r.ContentLength // -1 when chunked
	ct := r.Header.Get("Content-Type")
	if ct == "" || strings.ContainsAny(ct, "\r\n") || len(ct) > 255 {
		ct = "application/octet-stream"
	}
	v, err := h.store.Put(r.Context(), r.URL.Query().Get("bucket"), key, r.Body, size, ct)
	if err != nil {
		if _, known := problem.For(err); !known {
			// Not a storage failure: the upload body itself was short,
			// too long or broke off. Nothing was stored.
			h.log.InfoContext(r.Context(), "upload refused", "key", key, "err", err)
			problem.Write(w, r, problem.BadRequest, "The upload body did not match its declared length or broke off; nothing was stored.")
			return
		}
		problem.Fail(h.log, w, r, err, problem.NotFound)
		return
	}
	if !h.recordStored(w, r, v) {
		return
	}
	h.log.InfoContext(r.Context(), "object stored", "key", v.Key, "version_id", v.VersionID, "bytes", v.Size, "sha256", v.SHA256)
	httpx.WriteJSON(w, http.StatusCreated, httpx.ObjectOf(v))
}
