package public

import (
	"net/http"

	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/token"
)

// Link serves GET, HEAD and POST /d/{token} and its named form
// /d/{token}/{name} (SPEC §3, §5, §8): it reads the request once, sends
// it down one branch, and answers what stopped it in one place. A Range
// goes to the client's session or is refused (rangeOnLink, range.go);
// a GET or POST claims (claimLink, claim.go); a preview or a HEAD claims
// nothing (headLink, head.go). GET claims unless the request is a
// preview, its preconditions decide it, or the link asks for
// confirmation; POST always claims; HEAD never does.
func (h *Handler) Link(w http.ResponseWriter, r *http.Request) {
	c, err := h.read(r, token.Link)
	switch {
	case err != nil:
	// A Range on the link URL would spend a download on a fragment; it is
	// refused before anything is claimed (SPEC §3 step 2), whatever the
	// credential, unless the client may be sent to its session (§5).
	case c.kind == linkRange:
		err = h.rangeOnLink(w, c)
	case c.authErr != nil:
		err = c.authErr
	case c.kind == linkClaim:
		err = h.claimLink(w, r, c)
	default:
		err = h.headLink(w, r, c)
	}
	if err != nil {
		h.fail(w, r, c, err, problem.LinkUnavailable)
	}
}
