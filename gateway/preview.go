package gateway

import (
	"net/http"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/pages"
)

// PreviewDetector recognises link previewers and prefetches (SPEC §8); it
// returns a short reason, or "" for a request that may claim.
// preview.Detector is the implementation.
type PreviewDetector interface {
	Check(h http.Header) string
}

// previewOf says why r is a preview or prefetch, or "" when it is not.
func (s *Server) previewOf(r *http.Request) string {
	return s.Previews.Check(r.Header)
}

// previewDetails reports whether a preview may name the file: not when
// the operator turned details off, and never for an account-bound link or
// session, whose file name is for its account only (a previewer carries no
// one's credentials).
func (s *Server) previewDetails(account string) bool {
	return !s.HidePreviewDetails && account == ""
}

// pageFile is what a landing page or preview shows of an object.
func (s *Server) pageFile(filename string, o ledger.Object, expires time.Time) pages.File {
	return pages.File{Name: cleanFilename(firstNonEmpty(filename, o.Key)), Size: o.Size, ExpiresAt: expires, Now: s.now()}
}
