package public

import (
	"net/http"

	"github.com/dlgate/dlgate/gateway/deliver"
	"github.com/dlgate/dlgate/ledger"
)

// claimLink answers a GET or POST that claims (SPEC §3 steps 4–8) with one
// ledger call: the claim by token reads the link and decides in one
// transaction (claim, links.go), and explains a refusal from the row it
// read, by the database's clock. A grant streams (stream.go). A link a GET
// does not claim at once is answered here: a confirm link's GET shows its
// landing page (head.go), a session link mints (its mint is the claim,
// mint.go), and a stream link with retries serves the client's
// interrupted download again (clients.interrupted, affinity.go), or
// claims with the retry asked. The row cache saves the claim call for
// such a link this process knows. A conditional request is decided
// before anything is claimed (SPEC §3 "Conditional requests").
func (h *Handler) claimLink(w http.ResponseWriter, r *http.Request, c *call) error {
	if c.ctx.Err() != nil {
		return nil // the client left before we spent anything
	}
	if c.conditional {
		if done, err := h.preconditions(w, r, c); done || err != nil {
			return err
		}
	}
	var err error
	var g *ledger.Grant
	attempt := 1
	l, cached := h.links.peek(c.hash)
	if cached && !l.ClaimsAtOnce(c.confirmed, false) {
		c.linkID = l.ID
		err = admit(c, l)
	} else {
		l, g, err = h.claim(c, false)
		cached = false
	}
	switch {
	case err != nil || l == nil:
		return err
	case g != nil: // granted: it streams below
	case !c.confirmed && l.Confirm:
		if cached {
			// The landing page reports the link's state: from a fresh row.
			if l, err = h.freshLink(c); err != nil {
				return err
			}
		}
		if err = h.eligible(c, l); err == nil {
			h.page(w, r, c, l)
		}
		return err
	case l.Delivery == ledger.DeliverySession:
		a := h.clients.of(c, l)
		return h.mint(w, c, l, mintOptions{redirect: true, affinity: a})
	default:
		// A stream link with retries (SPEC §1): the client's interrupted
		// download is served again without a claim, or the link is
		// claimed with the retry asked, which a GET then claims at once.
		if g, err = h.clients.interrupted(c, l); g != nil {
			attempt = g.Delivery.Attempts
		} else if err == nil {
			l, g, err = h.claim(c, true)
		}
		if g == nil {
			return err
		}
	}
	h.stream(w, r, c, l, g, attempt)
	return nil
}

// preconditions decides a conditional GET or POST of a link URL before
// any claim (RFC 9110 §13.2.2), from a fresh row; done reports that it
// answered (304 or 412). A stream link that could not be claimed is the
// answer its claim would get (the generic 404, or 401). A session link
// that could not be claimed goes on to its mint, which sends a client
// with a usable session to it (SPEC §5); a confirm link's GET shows its
// landing page, which is not the object: neither is decided here.
func (h *Handler) preconditions(w http.ResponseWriter, r *http.Request, c *call) (done bool, err error) {
	l, err := h.freshLink(c)
	switch {
	case err != nil:
		return false, err
	case l.Confirm && !c.confirmed:
		return false, nil
	}
	if err := h.eligible(c, l); err != nil {
		if l.Delivery == ledger.DeliverySession {
			return false, nil
		}
		return false, err
	}
	return h.Pipeline.Preconditions(w, r, deliver.ObjectOf(l.Object, l.Filename, false)), nil
}
