package uploads

import (
	"bufio"
	"context"
	"errors"
	"io"
	"time"

	"github.com/tus/tusd/v2/pkg/handler"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/storage"
)

var (
	_ handler.DataStore           = (*dataStore)(nil)
	_ handler.TerminaterDataStore = (*dataStore)(nil)
	_ handler.Upload              = (*upload)(nil)
	_ handler.TerminatableUpload  = (*upload)(nil)
)

// deleteTimeout bounds the deletion of a version that could not be
// recorded, which runs even when the request's context is over.
const deleteTimeout = 30 * time.Second

// dataStore is tusd's data store over the store's resumable uploads and
// the ledger: the ledger row is the upload, the store holds its bytes.
type dataStore struct{ h *Handler }

// NewUpload begins the upload in the store and records it in the ledger.
// A store upload the ledger could not record is aborted again.
func (d *dataStore) NewUpload(ctx context.Context, info handler.FileInfo) (handler.Upload, error) {
	h := d.h
	key, filename, ctype := info.MetaData[metaKey], info.MetaData[metaFilename], info.MetaData[metaContentType]
	if ctype == "" {
		ctype = DefaultContentType
	}
	su, err := h.up.UploadBegin(ctx, h.cfg.Bucket, key, info.Size, ctype)
	if err != nil {
		h.log.WarnContext(ctx, "upload not begun in the store", "key", key, "err", err)
		return nil, storeError(err)
	}
	row, err := h.cfg.Ledger.UploadCreate(ctx, ledger.Upload{ID: info.ID, Bucket: su.Bucket, Key: su.Key, Filename: filename,
		ContentType: su.ContentType, Size: su.Size, PartSize: su.PartSize, SHA256State: su.SHA256, StoreState: su.State}, h.cfg.Expiry)
	if err != nil {
		if aerr := h.up.UploadAbort(context.WithoutCancel(ctx), su); aerr != nil {
			h.log.ErrorContext(ctx, "unrecorded upload left in the store", "key", key, "err", aerr)
		}
		h.log.WarnContext(ctx, "upload not recorded", "key", key, "err", err)
		return nil, ledgerError(err)
	}
	h.log.InfoContext(ctx, "upload created", "upload_id", row.ID, "key", row.Key, "bytes", row.Size)
	return h.track(ctx, row), nil
}

// GetUpload reads the upload from the ledger: 404 for an id that cannot
// be one (no query) or is unknown, 410 once it expired.
func (d *dataStore) GetUpload(ctx context.Context, id string) (handler.Upload, error) {
	if !validID(id) {
		return nil, handler.ErrNotFound
	}
	row, err := d.h.cfg.Ledger.UploadGet(ctx, id)
	if err != nil {
		return nil, ledgerError(err)
	}
	if row.Expired() {
		d.h.log.DebugContext(ctx, "upload refused", "upload_id", id, "reason", "expired")
		return nil, errExpired
	}
	return d.h.track(ctx, row), nil
}

// AsTerminatableUpload: every upload can be terminated.
func (d *dataStore) AsTerminatableUpload(u handler.Upload) handler.TerminatableUpload {
	return u.(*upload)
}

// track makes row the request's upload (its Upload-Expires) and returns
// it as tusd's.
func (h *Handler) track(ctx context.Context, row *ledger.Upload) *upload {
	st := stateOf(ctx)
	st.upload, st.read = row, time.Now()
	return &upload{h: h, row: row, st: st}
}

// upload is one upload within one request.
type upload struct {
	h   *Handler
	row *ledger.Upload
	st  *requestState
}

func (u *upload) GetInfo(context.Context) (handler.FileInfo, error) {
	meta := handler.MetaData{metaKey: u.row.Key, metaContentType: u.row.ContentType}
	if u.row.Filename != "" {
		meta[metaFilename] = u.row.Filename
	}
	return handler.FileInfo{ID: u.row.ID, Size: u.row.Size, Offset: u.row.Offset, MetaData: meta}, nil
}

// GetReader: uploads are not read back through tus (GET answers the
// stored object's JSON instead).
func (u *upload) GetReader(context.Context) (io.ReadCloser, error) {
	return nil, handler.ErrNotImplemented
}

// WriteChunk appends src to the store from offset in pieces that end on
// multiples of the checkpoint (a multiple of the store's part size, so
// that S3 sends whole parts), and records each piece in the ledger before
// the next: a gateway that dies during a PATCH loses at most one piece,
// and whatever it kept in the store past the recorded offset is written
// over by the next append. tusd's body reader ends at EOF when the client
// goes away, so what arrived before a cut is appended and recorded too.
// It returns how many bytes the ledger recorded.
func (u *upload) WriteChunk(ctx context.Context, offset int64, src io.Reader) (int64, error) {
	if u.st.holder == "" || offset != u.row.Offset {
		// tusd locks before it writes and checks the offset; this is
		// what keeps a second writer out if that ever changed.
		return 0, handler.ErrMismatchOffset
	}
	every := u.h.cfg.Checkpoint
	if p := u.row.PartSize; p > 0 {
		every = (every + p - 1) / p * p
	}
	body := bufio.NewReaderSize(src, 1)
	start := u.row.Offset
	for u.row.Offset < u.row.Size {
		if _, err := body.Peek(1); err != nil {
			break // nothing more arrived: nothing to append
		}
		end := min(u.row.Size, (u.row.Offset/every+1)*every)
		if err := u.append(ctx, io.LimitReader(body, end-u.row.Offset)); err != nil {
			return u.row.Offset - start, err
		}
		if u.row.Offset < end {
			break // the body ended before the checkpoint
		}
	}
	return u.row.Offset - start, nil
}

// append appends piece and records the new offset, digest state and
// store state, from the offset the ledger has, by the lock this request
// holds.
func (u *upload) append(ctx context.Context, piece io.Reader) error {
	h, row := u.h, u.row
	su, err := h.up.UploadAppend(ctx, storageUpload(row), piece)
	if err != nil {
		h.log.WarnContext(ctx, "upload append failed", "upload_id", row.ID, "offset", row.Offset, "err", err)
		return storeError(err)
	}
	if su.Offset == row.Offset {
		return nil
	}
	// The new expiry, by the database's clock as read with the row and
	// this process's since: never later than what the ledger records.
	expires := row.ReadAt.Add(time.Since(u.st.read)).Add(h.cfg.Expiry)
	err = h.cfg.Ledger.UploadAdvance(ctx, ledger.UploadAdvanceParams{ID: row.ID, Holder: u.st.holder, From: row.Offset,
		Offset: su.Offset, SHA256State: su.SHA256, StoreState: su.State, Expiry: h.cfg.Expiry})
	if err != nil {
		h.log.WarnContext(ctx, "upload offset not recorded", "upload_id", row.ID, "offset", su.Offset, "err", err)
		return ledgerError(err)
	}
	row.Offset, row.SHA256State, row.StoreState, row.ExpiresAt = su.Offset, su.SHA256, su.State, expires
	return nil
}

// FinishUpload makes the complete upload a version, as PUT /v1/objects
// does: the store finishes it, Record records it (the version, its
// SHA-256, the audit entry), and then the ledger marks the upload
// finished with it. A version that Record could not record is deleted
// again, as PUT does.
func (u *upload) FinishUpload(ctx context.Context) error {
	h, row := u.h, u.row
	if row.FinishedAt != nil {
		return nil
	}
	if u.st.holder == "" {
		// tusd finishes an empty upload at its creation without a lock.
		l, _ := h.locker.NewLock(row.ID)
		if err := l.Lock(ctx, func() {}); err != nil {
			return err
		}
		defer l.Unlock() //nolint:errcheck // logs its own failure
	}
	v, err := h.up.UploadFinish(ctx, storageUpload(row))
	if err != nil {
		h.log.WarnContext(ctx, "upload not finished in the store", "upload_id", row.ID, "err", err)
		return storeError(err)
	}
	if err := h.cfg.Record(ctx, v); err != nil {
		if d, ok := h.cfg.Store.(storage.Deleter); ok {
			dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
			defer cancel()
			if derr := d.Delete(dctx, v); derr != nil {
				h.log.ErrorContext(ctx, "unrecorded upload left in the store", "key", v.Key, "version_id", v.VersionID, "err", derr)
			}
		}
		h.log.WarnContext(ctx, "uploaded object not recorded", "upload_id", row.ID, "key", v.Key, "err", err)
		return ledgerError(err)
	}
	if err := h.cfg.Ledger.UploadFinish(ctx, row.ID, u.st.holder, v, h.cfg.Expiry); err != nil {
		// The version is stored and recorded, and retention looks after
		// it; only this upload does not know it.
		h.log.ErrorContext(ctx, "finished upload not marked finished", "upload_id", row.ID, "key", v.Key, "version_id", v.VersionID, "err", err)
		return ledgerError(err)
	}
	now := time.Now()
	row.FinishedAt, row.Object, row.SHA256State, row.StoreState = &now, &v, nil, nil
	h.log.InfoContext(ctx, "object stored", "upload_id", row.ID, "key", v.Key, "version_id", v.VersionID, "bytes", v.Size, "sha256", v.SHA256)
	return nil
}

// Terminate removes the upload (tus termination): its bytes from the
// store, unless it is a version already (which stays: deleting a version
// is DELETE /v1/objects), and its row.
func (u *upload) Terminate(ctx context.Context) error {
	h, row := u.h, u.row
	if row.FinishedAt == nil {
		if err := h.up.UploadAbort(ctx, storageUpload(row)); err != nil {
			h.log.WarnContext(ctx, "upload not aborted in the store", "upload_id", row.ID, "err", err)
			return storeError(err)
		}
	}
	if err := h.cfg.Ledger.UploadDelete(ctx, row.ID, u.st.holder); err != nil && !errors.Is(err, ledger.ErrNotFound) {
		return ledgerError(err)
	}
	h.log.InfoContext(ctx, "upload terminated", "upload_id", row.ID, "key", row.Key, "offset", row.Offset)
	return nil
}
