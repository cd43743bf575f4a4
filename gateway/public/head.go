package public

import (
	"net/http"
	"time"

	"github.com/dlgate/dlgate/gateway/deliver"
	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/pages"
)

// headLink answers a preview or a HEAD of a link URL, which claim
// nothing: each reports what a claim would do right now, from a fresh
// row. A preview is the preview page (SPEC §8), a confirm link's HEAD its
// landing page's headers. Another HEAD is a session link's 303 to the
// client's usable session when it has one (SPEC §5, as its GET would,
// whatever the link's allowance), else, for a link a claim could take
// now, the headers a GET's stream would send, through the pipeline
// (conditional requests included).
func (h *Handler) headLink(w http.ResponseWriter, r *http.Request, c *call) error {
	l, err := h.freshLink(c)
	if err != nil {
		return err
	}
	refusal := h.eligible(c, l)
	if c.kind == linkPreview || l.Confirm {
		if refusal == nil {
			h.page(w, r, c, l)
		}
		return refusal
	}
	if sent, err := h.toSession(w, c, l, "affinity session reused"); sent || err != nil {
		return err
	}
	if refusal != nil {
		return refusal
	}
	h.Pipeline.Serve(w, r, deliver.Request{Object: deliver.ObjectOf(l.Object, l.Filename, false),
		NotFound: problem.LinkUnavailable, Attrs: []any{"link_id", l.ID}})
	return nil
}

// page shows the page of l that c asks for: a previewer's preview page
// (SPEC §8), or a confirm link's landing page, whose form POSTs the claim
// (SPEC §3).
func (h *Handler) page(w http.ResponseWriter, r *http.Request, c *call, l *ledger.Link) {
	f := h.pageFile(l.Filename, l.Object, l.ExpiresAt)
	if c.kind != linkPreview {
		pages.WriteLanding(w, r, pages.Landing{File: f})
		return
	}
	h.Log.InfoContext(c.ctx, "preview served", "link_id", l.ID, "preview", c.preview)
	h.Metrics.Previews.WithLabelValues("link").Inc()
	pages.WritePreview(w, r, pages.Preview{File: f, Details: h.previewDetails(l.AccountID), FormMethod: "post"})
}

// previewDetails reports whether a preview may name the file: not when
// the operator turned details off, and never for an account-bound link or
// session, whose file name is for its account only (a previewer carries no
// one's credentials).
func (h *Handler) previewDetails(account string) bool {
	return !h.HidePreviewDetails && account == ""
}

// pageFile is what a landing page or preview shows of an object.
func (h *Handler) pageFile(filename string, o ledger.Object, expires time.Time) pages.File {
	return pages.File{Name: httpx.FileName(filename, o.Key), Size: o.Size, ExpiresAt: expires, Now: h.now()}
}
