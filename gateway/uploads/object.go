package uploads

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/tus/tusd/v2/pkg/handler"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/ledger"
)

// serveObject answers GET {base}{id}: the object the upload became, once
// it is finished; 409 while bytes are missing (with Upload-Offset and
// Upload-Length, as HEAD has them). An upload whose every byte is stored
// but whose finish failed (the store or the database failed then) is
// finished now: tus clients treat an upload whose offset is its length as
// done and send no PATCH that would finish it.
func (h *Handler) serveObject(w *problemWriter, r *http.Request, id string) {
	ctx := r.Context()
	if !validID(id) {
		w.sendError(handler.ErrNotFound)
		return
	}
	row, err := h.cfg.Ledger.UploadGet(ctx, id)
	if err != nil {
		w.sendError(ledgerError(err))
		return
	}
	if row.Expired() {
		w.sendError(errExpired)
		return
	}
	if row.FinishedAt == nil && row.Offset == row.Size {
		if row, err = h.finishLate(r, id); err != nil {
			w.sendError(err)
			return
		}
	}
	if row.FinishedAt == nil {
		w.Header().Set("Upload-Offset", strconv.FormatInt(row.Offset, 10))
		w.Header().Set("Upload-Length", strconv.FormatInt(row.Size, 10))
		w.sendError(errIncomplete)
		return
	}
	o := row.Object
	body, _ := json.Marshal(httpx.ObjectOf(*o))
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	w.Write(append(body, '\n')) //nolint:errcheck // the client is gone
}

// finishLate finishes a complete upload under its lock, and returns it
// as it is then.
func (h *Handler) finishLate(r *http.Request, id string) (*ledger.Upload, error) {
	ctx := r.Context()
	l, _ := h.locker.NewLock(id)
	if err := l.Lock(ctx, func() {}); err != nil {
		return nil, err
	}
	defer l.Unlock() //nolint:errcheck // logs its own failure
	row, err := h.cfg.Ledger.UploadGet(ctx, id)
	if err != nil {
		return nil, ledgerError(err)
	}
	if row.FinishedAt == nil && row.Offset == row.Size {
		u := h.track(ctx, row)
		if err := u.FinishUpload(ctx); err != nil {
			return nil, err
		}
	}
	return row, nil
}
