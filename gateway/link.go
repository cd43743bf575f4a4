package gateway

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dlgate/dlgate/auth"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/pages"
	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/token"
)

// pathToken returns the {token} of the route when it is a token of kind
// that this gateway minted (token.Keys.Check); otherwise, malformed or
// forged, it answers the generic 404 without any database query (SPEC §2).
func (s *Server) pathToken(w http.ResponseWriter, r *http.Request, kind token.Kind, notFound problem) (string, bool) {
	tok := pathVar(r, "token")
	if !s.keys.Check(kind, tok) {
		s.log.DebugContext(r.Context(), "refused", "reason", "invalid_token")
		writeProblem(w, r, notFound, "")
		return "", false
	}
	return tok, true
}

// lookupLink reads the link row and answers itself when that fails
// (ok=false): unknown token, database trouble, or an account-bound link
// and an anonymous caller (SPEC §3 step 3). forClaim allows the row this
// process cached (linkcache.go): only its immutable part is used before
// the claim decides.
func (s *Server) lookupLink(w http.ResponseWriter, r *http.Request, tok string, c auth.Caller, forClaim bool) (*ledger.Link, bool) {
	var (
		l   *ledger.Link
		err error
	)
	if forClaim {
		l, err = s.links.get(r.Context(), s.claims, token.Hash(tok))
	} else {
		l, err = s.claims.LinkGetByTokenHash(r.Context(), token.Hash(tok))
	}
	if err != nil {
		s.fail(w, r, err, probLinkUnavailable)
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

// handleLink serves GET, HEAD and POST /d/{token} and its named form
// /d/{token}/{name} (SPEC §3, §5, §8): it classifies the request, then
// answers it in one switch. GET claims unless the request is a preview or
// the link asks for confirmation; POST always claims; HEAD never does.
func (s *Server) handleLink(w http.ResponseWriter, r *http.Request) {
	tok, ok := s.pathToken(w, r, token.Link, probLinkUnavailable)
	if !ok {
		return
	}
	c, authErr := s.authenticate(r)
	why := ""
	if r.Method != http.MethodPost {
		why = s.previewOf(r)
	}
	kind := classifyLink(r.Method, r.Header.Get("Range") != "", why)
	// A Range on the link URL would spend a download on a fragment; it is
	// refused before anything is claimed (SPEC §3 step 2), and before
	// anything is looked up unless the client may be sent to its session
	// (§5).
	if kind == linkRange && (authErr != nil || !s.mayResume(c)) {
		refuseRange(w, r)
		return
	}
	if authErr != nil {
		s.refuseCredential(w, r, authErr)
		return
	}
	switch kind {
	case linkRange:
		s.rangeOnLink(w, r, tok, c)
	case linkClaim:
		s.claimLink(w, r, tok, c)
	default:
		// A preview and HEAD claim nothing; each reports what a claim
		// would do right now, from a fresh row.
		l, ok := s.lookupLink(w, r, tok, c, false)
		if !ok {
			return
		}
		if kind == linkHead && !l.Confirm && s.headToSession(w, r, l, c) {
			return
		}
		s.answerWithoutClaim(w, r, l, c.Account, why)
	}
}

// claimLink answers a GET or POST that claims (SPEC §3 steps 4–8) with one
// ledger call: the claim by token reads the link and decides in one
// transaction, and explains a refusal from the row it read, by the
// database's clock. The row cache saves that call only for a link this
// process knows a GET does not claim at once: a session link mints
// straight away (its mint is the claim), a landing page reads the row it
// shows.
func (s *Server) claimLink(w http.ResponseWriter, r *http.Request, tok string, c auth.Caller) {
	if r.Context().Err() != nil {
		return // the client left before we spent anything
	}
	confirmed := r.Method == http.MethodPost
	hash := token.Hash(tok)
	if l, cached := s.links.peek(hash); cached && !l.ClaimsAtOnce(confirmed) {
		if admit(w, r, l, c) {
			s.answerUnclaimed(w, r, tok, l, c, true)
		}
		return
	}
	o, err := s.claims.LinkClaim(r.Context(), hash, ledger.ClaimRequest{
		AccountID: c.Account, Kind: ledger.KindStream, Client: clientDescriptor(r, c),
	}, confirmed)
	if o.Link == nil {
		s.fail(w, r, err, probLinkUnavailable)
		return
	}
	s.links.put(hash, o.Link)
	switch {
	case err != nil: // the claim's outcome is unknown
		s.claimed(w, r, o.Link, o.Grant, err)
	case o.Grant != nil:
		s.claimed(w, r, o.Link, o.Grant, nil)
		s.serveStream(w, r, o.Link, o.Grant)
	case !admit(w, r, o.Link, c):
		// An anonymous caller of an account-bound link: 401 (SPEC §3
		// step 3), not the refusal the claim found.
	case o.Refusal != "":
		s.claimed(w, r, o.Link, nil, ledger.Refused(o.Refusal))
	default:
		s.answerUnclaimed(w, r, tok, o.Link, c, false)
	}
}

// answerUnclaimed answers a GET or POST of a link that a GET does not
// claim at once: a confirm link's GET shows its landing page (from a fresh
// row when l came from the cache), anything else is a session link and
// mints, sending the client to its session when it has one (SPEC §5).
func (s *Server) answerUnclaimed(w http.ResponseWriter, r *http.Request, tok string, l *ledger.Link, c auth.Caller, cached bool) {
	if r.Method != http.MethodPost && l.Confirm {
		if cached {
			var ok bool
			if l, ok = s.lookupLink(w, r, tok, c, false); !ok {
				return
			}
		}
		s.answerWithoutClaim(w, r, l, c.Account, "")
		return
	}
	s.mintAndAnswer(w, r, l, c, mintOptions{redirect: true, affinity: s.affinityOf(r, l, c)})
}

// mayResume reports whether a Range on a link URL by c could be sent to
// a session (SPEC §5), so that it is worth a lookup.
func (s *Server) mayResume(c auth.Caller) bool {
	switch s.affinityMode() {
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
	writeProblem(w, r, probRangeRequiresSession,
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
func (s *Server) rangeOnLink(w http.ResponseWriter, r *http.Request, tok string, c auth.Caller) {
	l, err := s.links.get(r.Context(), s.claims, token.Hash(tok))
	if errors.Is(err, ledger.ErrNotFound) {
		refuseRange(w, r)
		return
	}
	if err != nil {
		s.fail(w, r, err, probLinkUnavailable)
		return
	}
	x, ok := s.affinitySession(w, r, l, c)
	if !ok {
		return
	}
	if x == nil {
		refuseRange(w, r)
		return
	}
	s.log.InfoContext(r.Context(), "range sent to the affinity session", "link_id", l.ID, "session_id", x.ID)
	s.answerSession(w, r, x, http.StatusSeeOther)
}

// headToSession answers a HEAD of a session-delivery link URL with 303 to
// the client's usable session, as its GET would (SPEC §5); it reports
// whether it answered. Without such a session HEAD goes on to the
// headers a GET's claim would give.
func (s *Server) headToSession(w http.ResponseWriter, r *http.Request, l *ledger.Link, c auth.Caller) bool {
	x, ok := s.affinitySession(w, r, l, c)
	if !ok || x == nil {
		return !ok
	}
	s.log.InfoContext(r.Context(), "affinity session reused", "link_id", l.ID, "session_id", x.ID)
	s.answerSession(w, r, x, http.StatusSeeOther)
	return true
}

// affinitySession returns the client's usable session of l, nil when it
// has none (or affinity does not apply); ok=false when it answered itself
// (database trouble).
func (s *Server) affinitySession(w http.ResponseWriter, r *http.Request, l *ledger.Link, c auth.Caller) (*ledger.Session, bool) {
	a := s.affinityOf(r, l, c)
	if !a.on {
		return nil, true
	}
	// need 1: today's rule for a Range and a HEAD (budget left, or a
	// request of the session still streaming).
	x, err := s.claims.SessionGetByAffinity(r.Context(), l.ID, c.Account, a.lookup, 1)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, true
	}
	if err != nil {
		s.fail(w, r, err, probLinkUnavailable, "link_id", l.ID)
		return nil, false
	}
	s.noteAffinity(r, "reused", x)
	return x, true
}

// answerWithoutClaim answers the GET or HEAD of /d/{token} that claims nothing: a
// preview (why names it), a confirm link's landing page, or the headers
// a GET would send.
func (s *Server) answerWithoutClaim(w http.ResponseWriter, r *http.Request, l *ledger.Link, account, why string) {
	attrs := []any{"link_id", l.ID}
	if reason := l.Refusal(account, s.dbTime(l.ReadAt)); reason != "" {
		s.fail(w, r, ledger.Refused(reason), probLinkUnavailable, attrs...)
		return
	}
	switch {
	case why != "":
		s.log.InfoContext(r.Context(), "preview served", append(attrs, "preview", why)...)
		s.metrics.previews.WithLabelValues("link").Inc()
		pages.WritePreview(w, r, pages.Preview{File: s.pageFile(l.Filename, l.Object, l.ExpiresAt), Details: s.previewDetails(l.AccountID), FormMethod: "post"})
	case l.Confirm:
		pages.WriteLanding(w, r, pages.Landing{File: s.pageFile(l.Filename, l.Object, l.ExpiresAt)})
	default:
		s.objectHeaders(w, r, l.Object, l.Filename)
		w.Header().Set("Accept-Ranges", "none")
		w.WriteHeader(http.StatusOK)
	}
}

// claimed counts a stream claim's outcome and, when err refused or failed
// it, answers (the grant's id logged when its fate is unknown).
func (s *Server) claimed(w http.ResponseWriter, r *http.Request, l *ledger.Link, g *ledger.Grant, err error) bool {
	if err != nil {
		attrs := []any{"link_id", l.ID}
		if g != nil {
			attrs = append(attrs, "grant_id", g.ID)
		}
		s.metrics.claims.WithLabelValues(ledger.KindStream, reasonOf(err)).Inc()
		s.fail(w, r, err, probLinkUnavailable, attrs...)
		return false
	}
	s.metrics.claims.WithLabelValues(ledger.KindStream, "granted").Inc()
	return true
}

// serveStream sends the whole object of l under the grant g.
func (s *Server) serveStream(w http.ResponseWriter, r *http.Request, l *ledger.Link, g *ledger.Grant) {
	attrs := []any{"link_id", l.ID, "grant_id", g.ID}
	v := versionOf(l.Object)
	// The store has GATEWAY_STORE_OPEN_TIMEOUT to send its first bytes,
	// and GATEWAY_STORE_IDLE_TIMEOUT for each next ones (stall.go).
	watch := s.watchStore(r.Context())
	defer watch.stop()
	body, first, err := watch.openFirst(s.Store, v, 0, v.Size, true)
	if err != nil && r.Context().Err() != nil {
		// The client hung up before a byte left: refunded as SPEC §1
		// says, and a client disconnect, not a server error (499, as
		// nginx logs it; nobody reads the answer).
		if s.refundFor(r, g, "client_disconnect", attrs) {
			s.log.InfoContext(r.Context(), "client left before the first byte; claim refunded", attrs...)
		}
		w.WriteHeader(statusClientClosed)
		return
	}
	if err != nil {
		if s.refundFor(r, g, "storage_error", attrs) {
			s.log.WarnContext(r.Context(), "storage failed before the first byte; claim refunded", append(attrs, "err", err)...)
		}
		s.fail(w, r, err, probLinkUnavailable, attrs...)
		return
	}
	body = s.checkWhole(r.Context(), body, l.Object, attrs)
	defer body.Close()
	defer putBuf(first)
	s.objectHeaders(w, r, l.Object, l.Filename)
	w.Header().Set("Accept-Ranges", "none")
	w.WriteHeader(http.StatusOK)
	s.metrics.streaming.Inc()
	defer s.metrics.streaming.Dec()
	sent, err := s.copyBody(w, body, first, v.Size)
	if err != nil {
		// The claim stands: we cannot prove what the client kept.
		s.log.InfoContext(r.Context(), "stream ended early", append(attrs, "bytes", sent, "err", err)...)
		return
	}
	s.log.InfoContext(r.Context(), "streamed", append(attrs, "bytes", sent)...)
}

// statusClientClosed is nginx's 499: the client closed the request before
// the answer. It only ever reaches the access log and metrics.
const statusClientClosed = 499

// refundFor gives back g's allowance; cause labels the refund metric. It
// reports whether the refund took place (a failed one is logged).
func (s *Server) refundFor(r *http.Request, g *ledger.Grant, cause string, attrs []any) bool {
	if err := s.claims.GrantRefund(context.WithoutCancel(r.Context()), g.ID); err != nil {
		s.log.ErrorContext(r.Context(), "refund failed", append(attrs, "cause", cause, "err", err)...)
		return false
	}
	s.metrics.refunds.WithLabelValues(cause).Inc()
	return true
}

// objectHeaders sets the representation headers of o (SPEC §3 step 5),
// its digests among them as r accepts them (digest.go).
func (s *Server) objectHeaders(w http.ResponseWriter, r *http.Request, o ledger.Object, filename string) {
	h := w.Header()
	ct := o.ContentType
	if ct == "" || strings.ContainsAny(ct, "\r\n") {
		ct = "application/octet-stream"
	}
	h.Set("Content-Type", ct)
	h.Set("Content-Length", strconv.FormatInt(o.Size, 10))
	if o.ETag != "" && !strings.ContainsAny(o.ETag, "\r\n") {
		h.Set("ETag", o.ETag)
	}
	if !o.LastModified.IsZero() {
		h.Set("Last-Modified", o.LastModified.UTC().Format(http.TimeFormat))
	}
	if filename == "" {
		filename = o.Key
	}
	h.Set("Content-Disposition", ContentDisposition(filename))
	setDigests(h, r, o.SHA256)
}

func versionOf(o ledger.Object) storage.Version {
	return storage.Version{Bucket: o.Bucket, Key: o.Key, VersionID: o.VersionID, Size: o.Size,
		ETag: o.ETag, ContentType: o.ContentType, LastModified: o.LastModified, SHA256: o.SHA256}
}

// errShortBody is a store breaking its promise of the pinned size: a
// storage failure (502), not an internal error.
var errShortBody = fmt.Errorf("gateway: object shorter than its recorded size: %w", storage.ErrChanged)

// now is the server clock in the ledger's precision.
func (s *Server) now() time.Time { return ledger.Micro(s.Now()) }

// dbTime is the database's clock as a lookup read it (t), or the server's
// clock when the ledger gave none: judging a row by the clock that made
// the decisions about it keeps a gateway with a skewed clock in step.
func (s *Server) dbTime(t time.Time) time.Time {
	if t.IsZero() {
		return s.now()
	}
	return t
}
