package public

import (
	"errors"
	"net/http"

	"github.com/gorilla/mux"

	"github.com/dlgate/dlgate/auth"
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
// /d/{token}/{name} (SPEC §3, §5, §8): it classifies the request, then
// answers it in one switch. GET claims unless the request is a preview,
// its preconditions decide it, or the link asks for confirmation; POST
// always claims; HEAD never does.
func (h *Handler) Link(w http.ResponseWriter, r *http.Request) {
	tok, ok := h.pathToken(w, r, token.Link, problem.LinkUnavailable)
	if !ok {
		return
	}
	c, authErr := h.authenticate(r)
	why := ""
	if r.Method != http.MethodPost {
		why = h.Previews.Check(r.Header)
	}
	kind := classifyLink(r.Method, r.Header.Get("Range") != "", why)
	// A Range on the link URL would spend a download on a fragment; it is
	// refused before anything is claimed (SPEC §3 step 2), and before
	// anything is looked up unless the client may be sent to its session
	// (§5).
	if kind == linkRange && (authErr != nil || !h.mayResume(c)) {
		refuseRange(w, r)
		return
	}
	if authErr != nil {
		h.refuseCredential(w, r, authErr)
		return
	}
	switch kind {
	case linkRange:
		h.rangeOnLink(w, r, tok, c)
	case linkClaim:
		h.claimLink(w, r, tok, c)
	default:
		// A preview and HEAD claim nothing; each reports what a claim
		// would do right now, from a fresh row.
		l, ok := h.lookupLink(w, r, tok, c, false)
		if !ok {
			return
		}
		if kind == linkPreview {
			if h.eligible(w, r, l, c.Account) {
				h.preview(w, r, l, why)
			}
			return
		}
		h.headLink(w, r, l, c)
	}
}

// claimLink answers a GET or POST that claims (SPEC §3 steps 4–8) with one
// ledger call: the claim by token reads the link and decides in one
// transaction, and explains a refusal from the row it read, by the
// database's clock. The row cache saves that call only for a link this
// process knows a GET does not claim at once: a session link mints
// straight away (its mint is the claim), a landing page reads the row it
// shows. A conditional request is decided before anything is claimed
// (SPEC §3 "Conditional requests"), from a fresh row.
func (h *Handler) claimLink(w http.ResponseWriter, r *http.Request, tok string, c auth.Caller) {
	if r.Context().Err() != nil {
		return // the client left before we spent anything
	}
	confirmed := r.Method == http.MethodPost
	if httpx.Conditional(r) && h.preconditionsAnswered(w, r, tok, c, confirmed) {
		return
	}
	hash := token.Hash(tok)
	if l, cached := h.links.peek(hash); cached && !l.ClaimsAtOnce(confirmed) {
		if admit(w, r, l, c) {
			h.answerUnclaimed(w, r, tok, l, c, true)
		}
		return
	}
	o, err := h.Claims.LinkClaim(r.Context(), hash, ledger.ClaimRequest{
		AccountID: c.Account, Kind: ledger.KindStream, Client: clientDescriptor(r, c),
	}, confirmed)
	if o.Link == nil {
		problem.Fail(h.Log, w, r, err, problem.LinkUnavailable)
		return
	}
	h.links.put(hash, o.Link)
	switch {
	case err != nil: // the claim's outcome is unknown
		if o.Grant != nil {
			h.settleUnknown(r.Context(), o.Grant, []any{"link_id", o.Link.ID})
		}
		h.claimed(w, r, o.Link, o.Grant, err)
	case o.Grant != nil:
		h.claimed(w, r, o.Link, o.Grant, nil)
		h.stream(w, r, o.Link, o.Grant)
	case !admit(w, r, o.Link, c):
		// An anonymous caller of an account-bound link: 401 (SPEC §3
		// step 3), not the refusal the claim found.
	case o.Refusal != "":
		h.claimed(w, r, o.Link, nil, ledger.Refused(o.Refusal))
	default:
		h.answerUnclaimed(w, r, tok, o.Link, c, false)
	}
}

// preconditionsAnswered decides a conditional GET or POST of a link URL
// before any claim (RFC 9110 §13.2.2), from a fresh row: a stream link
// that could not be claimed answers what its claim would (the generic
// 404, or 401), a claimable link whose preconditions decide gets its 304
// or 412, and nothing is spent either way. It reports whether it
// answered. A session link that could not be claimed goes on to its mint,
// which sends a client with a usable session to it (SPEC §5); a confirm
// link's GET shows its landing page, which is not the object: neither is
// decided here.
func (h *Handler) preconditionsAnswered(w http.ResponseWriter, r *http.Request, tok string, c auth.Caller, confirmed bool) bool {
	l, ok := h.lookupLink(w, r, tok, c, false)
	switch {
	case !ok:
		return true
	case l.Confirm && !confirmed:
		return false
	case l.Refusal(c.Account, h.dbTime(l.ReadAt)) != "":
		if l.Delivery == ledger.DeliverySession {
			return false
		}
		return !h.eligible(w, r, l, c.Account)
	}
	return h.Pipeline.Preconditions(w, r, deliver.ObjectOf(l.Object, l.Filename, false))
}

// answerUnclaimed answers a GET or POST of a link that a GET does not
// claim at once: a confirm link's GET shows its landing page (from a fresh
// row when l came from the cache), anything else is a session link and
// mints, sending the client to its session when it has one (SPEC §5).
func (h *Handler) answerUnclaimed(w http.ResponseWriter, r *http.Request, tok string, l *ledger.Link, c auth.Caller, cached bool) {
	if r.Method != http.MethodPost && l.Confirm {
		if cached {
			var ok bool
			if l, ok = h.lookupLink(w, r, tok, c, false); !ok {
				return
			}
		}
		if h.eligible(w, r, l, c.Account) {
			pages.WriteLanding(w, r, pages.Landing{File: h.pageFile(l.Filename, l.Object, l.ExpiresAt)})
		}
		return
	}
	h.mintAndAnswer(w, r, l, c, mintOptions{redirect: true, affinity: h.affinityOf(r, l, c)})
}

// eligible answers the generic 404 when l cannot be claimed by account
// right now (SPEC §3: HEAD, previews and landing pages say what a claim
// would), and reports whether l can. It explains a refusal; only the claim
// decides one.
func (h *Handler) eligible(w http.ResponseWriter, r *http.Request, l *ledger.Link, account string) bool {
	if reason := l.Refusal(account, h.dbTime(l.ReadAt)); reason != "" {
		problem.Fail(h.Log, w, r, ledger.Refused(reason), problem.LinkUnavailable, "link_id", l.ID)
		return false
	}
	return true
}

// headLink answers a HEAD: a session link's 303 to the client's usable
// session when it has one (SPEC §5, as its GET would, whatever the link's
// allowance), else, for a link a claim could take now, a confirm link's
// landing page headers or the headers a GET's stream would send, through
// the pipeline (conditional requests included).
func (h *Handler) headLink(w http.ResponseWriter, r *http.Request, l *ledger.Link, c auth.Caller) {
	if !l.Confirm {
		if x, ok := h.affinitySession(w, r, l, c); !ok || x != nil {
			if x != nil {
				h.Log.InfoContext(r.Context(), "affinity session reused", "link_id", l.ID, "session_id", x.ID)
				h.answerSession(w, r, x, http.StatusSeeOther)
			}
			return
		}
	}
	if !h.eligible(w, r, l, c.Account) {
		return
	}
	if l.Confirm {
		pages.WriteLanding(w, r, pages.Landing{File: h.pageFile(l.Filename, l.Object, l.ExpiresAt)})
		return
	}
	h.Pipeline.Serve(w, r, deliver.Request{Object: deliver.ObjectOf(l.Object, l.Filename, false),
		NotFound: problem.LinkUnavailable, Attrs: []any{"link_id", l.ID}})
}

// preview answers a link previewer or a prefetch (SPEC §8): a page that
// claims nothing.
func (h *Handler) preview(w http.ResponseWriter, r *http.Request, l *ledger.Link, why string) {
	h.Log.InfoContext(r.Context(), "preview served", "link_id", l.ID, "preview", why)
	h.Metrics.Previews.WithLabelValues("link").Inc()
	pages.WritePreview(w, r, pages.Preview{File: h.pageFile(l.Filename, l.Object, l.ExpiresAt), Details: h.previewDetails(l.AccountID), FormMethod: "post"})
}

// pathToken returns the {token} of the route when it is a token of kind
// that this gateway minted (token.Keys.Check); otherwise, malformed or
// forged, it answers the generic 404 without any database query (SPEC §2).
func (h *Handler) pathToken(w http.ResponseWriter, r *http.Request, kind token.Kind, notFound problem.Problem) (string, bool) {
	tok := mux.Vars(r)["token"]
	if !h.Keys.Check(kind, tok) {
		h.Log.DebugContext(r.Context(), "refused", "reason", "invalid_token")
		problem.Write(w, r, notFound, "")
		return "", false
	}
	return tok, true
}

// lookupLink reads the link row and answers itself when that fails
// (ok=false): unknown token, database trouble, or an account-bound link
// and an anonymous caller (SPEC §3 step 3). forClaim allows the row this
// process cached (linkcache.go): only its immutable part is used before
// the claim decides.
func (h *Handler) lookupLink(w http.ResponseWriter, r *http.Request, tok string, c auth.Caller, forClaim bool) (*ledger.Link, bool) {
	var (
		l   *ledger.Link
		err error
	)
	if forClaim {
		l, err = h.links.get(r.Context(), h.Claims, token.Hash(tok))
	} else {
		l, err = h.Claims.LinkGetByTokenHash(r.Context(), token.Hash(tok))
	}
	if err != nil {
		problem.Fail(h.Log, w, r, err, problem.LinkUnavailable)
		return nil, false
	}
	return l, admit(w, r, l, c)
}

// admit answers 401 when l is bound to an account and the caller is
// anonymous (SPEC §3 step 3).
func admit(w http.ResponseWriter, r *http.Request, l *ledger.Link, c auth.Caller) bool {
	if l.AccountID != "" && c.Account == "" {
		requireAccount(w, r)
		return false
	}
	return true
}

// mayResume reports whether a Range on a link URL by c could be sent to
// a session (SPEC §5), so that it is worth a lookup.
func (h *Handler) mayResume(c auth.Caller) bool {
	switch h.Affinity {
	case AffinityClient:
		return true
	case AffinityAccount:
		return c.Account != ""
	}
	return false
}

// refuseRange answers a Range on a link URL: 409, not 416, because curl
// -C - and wget -c take a 416 on resume for "already complete" and keep a
// truncated file (SPEC §3 step 2).
func refuseRange(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Accept-Ranges", "none")
	// The detail names the route, not this link's token: raw tokens
	// never appear in error bodies (SPEC §2).
	problem.Write(w, r, problem.RangeRequiresSession,
		"Range requests are served by transfer sessions: POST /d/{token}/sessions with this link's token, then send ranges to the session_url.")
}

// rangeOnLink answers a Range GET or HEAD on a link URL: 303 to the
// client's usable session of it (SPEC §5), so a download manager pointed
// at the link URL splits and resumes through one session; 409 otherwise,
// an unknown link and an anonymous caller of an account-bound one
// included (SPEC §3: step 2 comes before step 3). It never claims. Only
// the link's immutable delivery mode and account are read before the
// affinity lookup, which judges the session and its link itself, so the
// row this process cached serves.
func (h *Handler) rangeOnLink(w http.ResponseWriter, r *http.Request, tok string, c auth.Caller) {
	l, err := h.links.get(r.Context(), h.Claims, token.Hash(tok))
	if errors.Is(err, ledger.ErrNotFound) {
		refuseRange(w, r)
		return
	}
	if err != nil {
		problem.Fail(h.Log, w, r, err, problem.LinkUnavailable)
		return
	}
	x, ok := h.affinitySession(w, r, l, c)
	if !ok {
		return
	}
	if x == nil {
		refuseRange(w, r)
		return
	}
	h.Log.InfoContext(r.Context(), "range sent to the affinity session", "link_id", l.ID, "session_id", x.ID)
	h.answerSession(w, r, x, http.StatusSeeOther)
}

// affinitySession returns the client's usable session of l, nil when it
// has none (or affinity does not apply); ok=false when it answered itself
// (database trouble).
func (h *Handler) affinitySession(w http.ResponseWriter, r *http.Request, l *ledger.Link, c auth.Caller) (*ledger.Session, bool) {
	a := h.affinityOf(r, l, c)
	if !a.on {
		return nil, true
	}
	x, err := h.Claims.SessionGetByAffinity(r.Context(), l.ID, c.Account, a.lookup)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, true
	}
	if err != nil {
		problem.Fail(h.Log, w, r, err, problem.LinkUnavailable, "link_id", l.ID)
		return nil, false
	}
	h.noteAffinity(r, "reused", x)
	return x, true
}

// claimed counts a stream claim's outcome and, when err refused or failed
// it, answers (the grant's id logged when its fate is unknown).
func (h *Handler) claimed(w http.ResponseWriter, r *http.Request, l *ledger.Link, g *ledger.Grant, err error) {
	if err != nil {
		attrs := []any{"link_id", l.ID}
		if g != nil {
			attrs = append(attrs, "grant_id", g.ID)
		}
		h.Metrics.Claims.WithLabelValues(ledger.KindStream, problem.ReasonOf(err)).Inc()
		problem.Fail(h.Log, w, r, err, problem.LinkUnavailable, attrs...)
		return
	}
	h.Metrics.Claims.WithLabelValues(ledger.KindStream, "granted").Inc()
}
