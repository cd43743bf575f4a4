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
	tok, ok := h.pathToken(w, r, token.Session, problem.SessionUnavailable)
	if !ok {
		return
	}
	c, err := h.authenticate(r)
	if err != nil {
		h.refuseCredential(w, r, err)
		return
	}
	x, err := h.Warm.Session(r.Context(), token.Hash(tok))
	if err != nil {
		problem.Fail(h.Log, w, r, err, problem.SessionUnavailable)
		return
	}
	attrs := []any{"session_id", x.ID, "link_id", x.LinkID}
	if reason := x.Refusal(h.dbTime(x.ReadAt)); reason != "" {
		problem.Fail(h.Log, w, r, ledger.Refused(reason), problem.SessionUnavailable, attrs...)
		return
	}
	// An account-bound session demands its link's verified account (SPEC
	// §3); a session of an unbound link is anonymous (§5).
	if x.AccountID != "" && c.Account != x.AccountID {
		if c.Account == "" {
			requireAccount(w, r)
			return
		}
		problem.Fail(h.Log, w, r, ledger.Refused(ledger.ReasonWrongAccount), problem.SessionUnavailable, attrs...)
		return
	}
	if why := h.Previews.Check(r.Header); why != "" {
		// A preview draws no budget and takes no slot (SPEC §8).
		h.Log.InfoContext(r.Context(), "preview served", append(attrs, "preview", why)...)
		h.Metrics.Previews.WithLabelValues("session").Inc()
		pages.WritePreview(w, r, pages.Preview{File: h.pageFile(x.Filename, x.Object, x.ExpiresAt), Details: h.previewDetails(x.AccountID), FormMethod: "get"})
		return
	}
	h.Pipeline.Serve(w, r, deliver.Request{Object: deliver.ObjectOf(x.Object, x.Filename, true),
		Meter: h.Warm.Meter(x, attrs), NotFound: problem.SessionUnavailable, Attrs: attrs})
}
