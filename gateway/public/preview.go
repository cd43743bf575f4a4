package public

import (
	"time"

	"github.com/dlgate/dlgate/gateway/httpx"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/pages"
)

// previewDetails reports whether a preview may name the file: not when
// the operator turned details off, and never for an account-bound link or
// session, whose file name is for its account only (a previewer carries no
// one's credentials).
func (h *Handler) previewDetails(account string) bool {
	return !h.HidePreviewDetails && account == ""
}

// pageFile is what a landing page or preview shows of an object.
func (h *Handler) pageFile(filename string, o ledger.Object, expires time.Time) pages.File {
	return pages.File{Name: httpx.CleanFilename(firstNonEmpty(filename, o.Key)), Size: o.Size, ExpiresAt: expires, Now: h.now()}
}
