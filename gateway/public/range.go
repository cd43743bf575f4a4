package public

import (
	"errors"
	"net/http"

	"github.com/dlgate/dlgate/ledger"
)

// rangeOnLink answers a Range GET or HEAD on a link URL: 303 to the
// client's usable session of it (SPEC §5), so a download manager pointed
// at the link URL splits and resumes through one session; 409 otherwise,
// a refused credential, an unknown link and an anonymous caller of an
// account-bound one included (SPEC §3: step 2 comes before step 3). It
// never claims. Only the link's immutable delivery mode and account are
// read before the affinity lookup, which judges the session and its link
// itself, so the row this process cached serves.
func (h *Handler) rangeOnLink(w http.ResponseWriter, c *call) error {
	if c.authErr != nil || !mayResume(h.Affinity, c) {
		return errRangeOnLink
	}
	l, err := h.links.get(c.ctx, h.Claims, c.hash)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return errRangeOnLink
	case err != nil:
		return err
	}
	c.linkID = l.ID
	sent, err := h.toSession(w, c, l, "range sent to the affinity session")
	if err == nil && !sent {
		return errRangeOnLink
	}
	return err
}

// toSession answers 303 to c's usable session of l when it has one (SPEC
// §5), and logs why; sent is false when it has none, or affinity does
// not apply.
func (h *Handler) toSession(w http.ResponseWriter, c *call, l *ledger.Link, why string) (sent bool, err error) {
	x, err := h.clients.session(c, l)
	if err != nil || x == nil {
		return false, err
	}
	h.Log.InfoContext(c.ctx, why, "link_id", l.ID, "session_id", x.ID)
	h.answerSession(w, x, http.StatusSeeOther)
	return true, nil
}

// mayResume reports whether a Range on a link URL by c could be sent to
// a session under the affinity mode (SPEC §5), so that it is worth a
// lookup.
func mayResume(mode string, c *call) bool {
	switch mode {
	case AffinityClient:
		return true
	case AffinityAccount:
		return c.caller.Account != ""
	}
	return false
}
