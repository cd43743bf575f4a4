package public

import (
	"errors"
	"net/http"
	"time"

	"github.com/dlgate/dlgate/gateway/deliver"
	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/pages"
	"github.com/dlgate/dlgate/token"
)

// linkRequest is what a request on a link URL asks for, decided from the
// request alone, before any database access (SPEC §3, §5, §8).
type linkRequest int

const (
	// linkRange is a GET or HEAD with Range: never a claim (§3 step 2),
	// at most a 303 to the client's session (§5).
	linkRange linkRequest = iota
	// linkPreview is a link previewer or a prefetch (§8): a preview page.
	linkPreview
	// linkHead is a HEAD: what a GET would answer, never a claim.
	linkHead
	// linkClaim is a GET or a POST: a claim, unless the link first shows
	// a landing page.
	linkClaim
)

// classifyLink sorts a request on a link URL by its method, whether it
// has a Range, and the previewer or prefetch it is ("" for none). A POST
// is the landing page's form or a plain client's explicit claim: Range
// and previewers play no part in it.
func classifyLink(method string, ranged bool, preview string) linkRequest {
	switch {
	case method == http.MethodPost:
		return linkClaim
	case ranged:
		return linkRange
	case preview != "":
		return linkPreview
	case method == http.MethodHead:
		return linkHead
	}
	return linkClaim
}

// Link serves GET, HEAD and POST /d/{token} and its named form
// /d/{token}/{name} (SPEC §3, §5, §8): it reads the request once, answers
// it in one switch, and answers what stopped it in one place. GET claims
// unless the request is a preview, its preconditions decide it, or the
// link asks for confirmation; POST always claims; HEAD never does.
func (h *Handler) Link(w http.ResponseWriter, r *http.Request) {
	c, err := h.read(r, token.Link)
	if err == nil {
		err = h.link(w, r, c)
	}
	if err != nil {
		h.fail(w, r, err, problem.LinkUnavailable)
	}
}

func (h *Handler) link(w http.ResponseWriter, r *http.Request, c *call) error {
	// A Range on the link URL would spend a download on a fragment; it is
	// refused before anything is claimed (SPEC §3 step 2), and before
	// anything is looked up unless the client may be sent to its session
	// (§5).
	switch {
	case c.kind == linkRange && (c.authErr != nil || !h.mayResume(c)):
		return errRangeOnLink
	case c.authErr != nil:
		return credentialError(c.authErr)
	}
	switch c.kind {
	case linkRange:
		return h.rangeOnLink(w, c)
	case linkClaim:
		return h.claimLink(w, r, c)
	}
	// A preview and HEAD claim nothing; each reports what a claim would
	// do right now, from a fresh row.
	l, err := h.freshLink(c)
	switch {
	case err != nil:
		return err
	case c.kind == linkPreview:
		if err := h.eligible(c, l); err != nil {
			return err
		}
		h.Log.InfoContext(c.ctx, "preview served", "link_id", l.ID, "preview", c.preview)
		h.Metrics.Previews.WithLabelValues("link").Inc()
		pages.WritePreview(w, r, pages.Preview{File: h.pageFile(l.Filename, l.Object, l.ExpiresAt), Details: h.previewDetails(l.AccountID), FormMethod: "post"})
		return nil
	}
	return h.headLink(w, r, c, l)
}

// claimLink answers a GET or POST that claims (SPEC §3 steps 4–8) with one
// ledger call: the claim by token reads the link and decides in one
// transaction, and explains a refusal from the row it read, by the
// database's clock. The row cache saves that call only for a link this
// process knows a GET does not claim at once: a session link mints
// straight away (its mint is the claim), a landing page reads the row it
// shows, a stream link with retries asks for a retry first. A
// conditional request is decided before anything is claimed (SPEC §3
// "Conditional requests").
func (h *Handler) claimLink(w http.ResponseWriter, r *http.Request, c *call) error {
	if c.ctx.Err() != nil {
		return nil // the client left before we spent anything
	}
	if c.conditional {
		if done, err := h.preconditions(w, r, c); done || err != nil {
			return err
		}
	}
	if l, cached := h.links.peek(c.hash); cached && !l.ClaimsAtOnce(c.confirmed, false) {
		if err := admit(c, l); err != nil {
			return err
		}
		return h.unclaimed(w, r, c, l, true)
	}
	return h.claimByToken(w, r, c, false)
}

// claimByToken claims the link of c's token (LinkClaim) and answers what
// the claim decided: the stream of a grant, the generic 404 of a refusal,
// or, for a link a GET does not claim at once, what unclaimed answers.
// retriesChecked says a retry was asked for and there was none
// (ClaimRequest.RetriesChecked).
func (h *Handler) claimByToken(w http.ResponseWriter, r *http.Request, c *call, retriesChecked bool) error {
	o, err := h.Claims.LinkClaim(c.ctx, c.hash, ledger.ClaimRequest{AccountID: c.caller.Account, Kind: ledger.KindStream, Client: c.client,
		RetriesChecked: retriesChecked}, c.confirmed)
	if o.Link == nil {
		return err
	}
	h.links.put(c.hash, o.Link)
	attrs := []any{"link_id", o.Link.ID}
	switch {
	case err != nil: // the claim's outcome is unknown
		if o.Grant != nil {
			h.settleUnknown(c.ctx, unknownClaim{grantID: o.Grant.ID}, attrs)
		}
		h.Metrics.Claims.WithLabelValues(ledger.KindStream, problem.ReasonOf(err)).Inc()
		return about(err, attrs...)
	case o.Grant != nil:
		h.Metrics.Claims.WithLabelValues(ledger.KindStream, "granted").Inc()
		h.stream(w, r, c, o.Link, o.Grant, 1, h.retrier(c, o.Link))
		return nil
	case admit(c, o.Link) != nil:
		// An anonymous caller of an account-bound link: 401 (SPEC §3
		// step 3), not the refusal the claim found.
		return errAccountRequired
	case o.Refusal != "":
		h.Metrics.Claims.WithLabelValues(ledger.KindStream, string(o.Refusal)).Inc()
		return about(ledger.Refused(o.Refusal), attrs...)
	}
	return h.unclaimed(w, r, c, o.Link, false)
}

// retry answers a GET or POST of a stream link with retries (SPEC §1,
// "Retries of an interrupted download"): the client of an interrupted
// download of the link (SPEC §5's identity, clientOf) is served the whole
// object again under that grant, without a claim, while the link lives
// and retries are left; GrantRetryBegin decides, by one conditional
// UPDATE, so of two concurrent retries of one grant one is served and the
// other is refused (409 retry-in-progress, errRetryInFlight), as is a
// retry while the grant's retry streams: a claim would spend a download
// of a link whose download this client has under way. Anyone else claims
// as usual, the retry asked.
func (h *Handler) retry(w http.ResponseWriter, r *http.Request, c *call, l *ledger.Link) error {
	who := h.retrier(c, l)
	if who.on {
		g, err := h.Deliveries.GrantRetryBegin(c.ctx, ledger.RetryRequest{LinkID: l.ID, AccountID: c.caller.Account, ClientKeys: who.lookup,
			Lease: h.RetryLease})
		var busy *ledger.RetryInFlightError
		switch {
		case err == nil:
			h.Log.InfoContext(c.ctx, "interrupted download served again", "link_id", l.ID, "grant_id", g.ID, "attempt", g.Delivery.Attempts)
			h.stream(w, r, c, l, g, g.Delivery.Attempts, who)
			return nil
		case errors.As(err, &busy):
			h.Log.InfoContext(c.ctx, "retry refused: another retry of the grant is in flight", "link_id", l.ID, "grant_id", busy.GrantID)
			return about(errRetryInFlight(busy), "link_id", l.ID, "grant_id", busy.GrantID)
		case !errors.Is(err, ledger.ErrNotFound):
			return about(err, "link_id", l.ID)
		}
	}
	return h.claimByToken(w, r, c, true)
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
	case l.Refusal(c.caller.Account, h.dbTime(l.ReadAt)) != "":
		if l.Delivery == ledger.DeliverySession {
			return false, nil
		}
		return false, h.eligible(c, l)
	}
	return h.Pipeline.Preconditions(w, r, deliver.ObjectOf(l.Object, l.Filename, false)), nil
}

// unclaimed answers a GET or POST of a link that a GET does not claim at
// once: a confirm link's GET shows its landing page (from a fresh row
// when l came from the cache), a session link mints, sending the client
// to its session when it has one (SPEC §5), and a stream link with
// retries serves the client's interrupted download again or claims
// (retry).
func (h *Handler) unclaimed(w http.ResponseWriter, r *http.Request, c *call, l *ledger.Link, cached bool) error {
	if !c.confirmed && l.Confirm {
		var err error
		if cached {
			if l, err = h.freshLink(c); err != nil {
				return err
			}
		}
		if err := h.eligible(c, l); err != nil {
			return err
		}
		pages.WriteLanding(w, r, pages.Landing{File: h.pageFile(l.Filename, l.Object, l.ExpiresAt)})
		return nil
	}
	if l.Delivery == ledger.DeliveryStream {
		return h.retry(w, r, c, l)
	}
	return h.mint(w, c, l, mintOptions{redirect: true, affinity: h.affinityOf(c, l)})
}

// headLink answers a HEAD: a session link's 303 to the client's usable
// session when it has one (SPEC §5, as its GET would, whatever the link's
// allowance), else, for a link a claim could take now, a confirm link's
// landing page headers or the headers a GET's stream would send, through
// the pipeline (conditional requests included).
func (h *Handler) headLink(w http.ResponseWriter, r *http.Request, c *call, l *ledger.Link) error {
	if !l.Confirm {
		x, err := h.affinitySession(c, l)
		if err != nil || x != nil {
			if x != nil {
				h.Log.InfoContext(c.ctx, "affinity session reused", "link_id", l.ID, "session_id", x.ID)
				h.answerSession(w, x, http.StatusSeeOther)
			}
			return err
		}
	}
	if err := h.eligible(c, l); err != nil {
		return err
	}
	if l.Confirm {
		pages.WriteLanding(w, r, pages.Landing{File: h.pageFile(l.Filename, l.Object, l.ExpiresAt)})
		return nil
	}
	h.Pipeline.Serve(w, r, deliver.Request{Object: deliver.ObjectOf(l.Object, l.Filename, false),
		NotFound: problem.LinkUnavailable, Attrs: []any{"link_id", l.ID}})
	return nil
}

// rangeOnLink answers a Range GET or HEAD on a link URL: 303 to the
// client's usable session of it (SPEC §5), so a download manager pointed
// at the link URL splits and resumes through one session; 409 otherwise,
// an unknown link and an anonymous caller of an account-bound one
// included (SPEC §3: step 2 comes before step 3). It never claims. Only
// the link's immutable delivery mode and account are read before the
// affinity lookup, which judges the session and its link itself, so the
// row this process cached serves.
func (h *Handler) rangeOnLink(w http.ResponseWriter, c *call) error {
	l, err := h.links.get(c.ctx, h.Claims, c.hash)
	if errors.Is(err, ledger.ErrNotFound) {
		return errRangeOnLink
	}
	if err != nil {
		return err
	}
	x, err := h.affinitySession(c, l)
	switch {
	case err != nil:
		return err
	case x == nil:
		return errRangeOnLink
	}
	h.Log.InfoContext(c.ctx, "range sent to the affinity session", "link_id", l.ID, "session_id", x.ID)
	h.answerSession(w, x, http.StatusSeeOther)
	return nil
}

// freshLink reads the link row afresh (what HEAD, previews, landing pages
// and preconditions report: the row as it is now), refusing an anonymous
// caller of an account-bound link (SPEC §3 step 3).
func (h *Handler) freshLink(c *call) (*ledger.Link, error) {
	l, err := h.Claims.LinkGetByTokenHash(c.ctx, c.hash)
	if err != nil {
		return nil, err
	}
	return l, admit(c, l)
}

// admit refuses an anonymous caller of a link bound to an account (SPEC
// §3 step 3: 401).
func admit(c *call, l *ledger.Link) error {
	if l.AccountID != "" && c.caller.Account == "" {
		return errAccountRequired
	}
	return nil
}

// eligible is the generic 404 when l cannot be claimed by the caller right
// now (SPEC §3: HEAD, previews and landing pages say what a claim would).
// It explains a refusal; only the claim decides one.
func (h *Handler) eligible(c *call, l *ledger.Link) error {
	if reason := l.Refusal(c.caller.Account, h.dbTime(l.ReadAt)); reason != "" {
		return about(ledger.Refused(reason), "link_id", l.ID)
	}
	return nil
}

// mayResume reports whether a Range on a link URL by c could be sent to
// a session (SPEC §5), so that it is worth a lookup.
func (h *Handler) mayResume(c *call) bool {
	switch h.Affinity {
	case AffinityClient:
		return true
	case AffinityAccount:
		return c.caller.Account != ""
	}
	return false
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

// now is the server clock in the ledger's precision.
func (h *Handler) now() time.Time { return ledger.Micro(h.Now()) }

// dbTime is the database's clock as a lookup read it (t), or the server's
// clock when the ledger gave none: judging a row by the clock that made
// the decisions about it keeps a gateway with a skewed clock in step.
func (h *Handler) dbTime(t time.Time) time.Time {
	if t.IsZero() {
		return h.now()
	}
	return t
}
