package public

import (
	"net/http"

	"github.com/dlgate/dlgate/gateway/deliver"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/pages"
	"github.com/dlgate/dlgate/token"
)

// Session serves GET and HEAD /s/{token} and /s/{token}/{name}: the
// session's pinned object version, whole or in ranges, through the
// pipeline, under the session's byte budget and concurrency cap (SPEC
// §3), which the session's meter spends (gateway/warm). Conditional
// requests and HEAD draw no budget and take no slot.
func (h *Handler) Session(w http.ResponseWriter, r *http.Request) {
	c, err := h.read(r, token.Session)
	if err == nil {
		err = h.session(w, r, c)
	}
	if err != nil {
		h.fail(w, r, c, err, problem.SessionUnavailable)
	}
}

func (h *Handler) session(w http.ResponseWriter, r *http.Request, c *call) error {
	if c.authErr != nil {
		return c.authErr
	}
	x, err := h.Warm.Session(c.ctx, c.hash)
	if err != nil {
		return err
	}
	c.sessionID, c.linkID = x.ID, x.LinkID
	attrs := []any{"session_id", x.ID, "link_id", x.LinkID}
	switch reason := x.Refusal(h.dbTime(x.ReadAt)); {
	case reason != "":
		return ledger.Refused(reason)
	// An account-bound session demands its link's verified account (SPEC
	// §3); a session of an unbound link is anonymous (§5).
	case x.AccountID != "" && c.caller.Account == "":
		return errAccountRequired
	case x.AccountID != "" && c.caller.Account != x.AccountID:
		return ledger.Refused(ledger.ReasonWrongAccount)
	case c.preview != "":
		// A preview draws no budget and takes no slot (SPEC §8).
		h.Log.InfoContext(c.ctx, "preview served", append(attrs, "preview", c.preview)...)
		h.Metrics.Previews.WithLabelValues("session").Inc()
		pages.WritePreview(w, r, pages.Preview{File: h.pageFile(x.Filename, x.Object, x.ExpiresAt), Details: h.previewDetails(x.AccountID), FormMethod: "get"})
		return nil
	}
	h.Pipeline.Serve(w, r, deliver.Request{Object: deliver.ObjectOf(x.Object, x.Filename, true),
		Meter: h.Warm.Meter(x, attrs), NotFound: problem.SessionUnavailable, Attrs: attrs})
	return nil
}
