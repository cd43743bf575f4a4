package public

import (
	"context"
	"sync"
	"time"

	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
)

// How the public routes get a link's row: the claim reads it as it claims
// (claim); what comes before a claim needs only its immutable part, which
// this process caches (linkCache); an answer that reports the link's
// state without claiming (HEAD, previews, landing pages, preconditions)
// reads it afresh (freshLink) and judges it by the database's clock
// (eligible, dbTime).

// claim claims the link of c's token (LinkClaim, one ledger call) and
// returns what the claim decided: a grant, the refusal's error (the
// generic 404, or 401), or neither for a link a GET does not claim at
// once (Link.ClaimsAtOnce), for the caller to answer; l is the link the
// claim read, nil when it found none. retriesChecked says a retry was
// asked for and there was none (ClaimRequest.RetriesChecked).
func (h *Handler) claim(c *call, retriesChecked bool) (l *ledger.Link, g *ledger.Grant, err error) {
	o, err := h.Claims.LinkClaim(c.ctx, c.hash, ledger.ClaimRequest{AccountID: c.caller.Account, Kind: ledger.KindStream, Client: c.client,
		RetriesChecked: retriesChecked}, c.confirmed)
	if o.Link == nil {
		return nil, nil, err
	}
	c.linkID = o.Link.ID
	h.links.put(c.hash, o.Link)
	anonymous := admit(c, o.Link)
	switch {
	case err != nil: // the claim's outcome is unknown
		if o.Grant != nil {
			h.settler.settleUnknown(c.ctx, unknownClaim{grantID: o.Grant.ID}, []any{"link_id", o.Link.ID})
		}
		h.Metrics.Claims.WithLabelValues(ledger.KindStream, problem.ReasonOf(err)).Inc()
		return o.Link, nil, err
	case anonymous != nil:
		// An anonymous caller of an account-bound link: 401 (SPEC §3
		// step 3), not the refusal the claim found (it grants such a
		// caller nothing: Link.Refusal).
		return o.Link, nil, anonymous
	case o.Grant != nil:
		h.Metrics.Claims.WithLabelValues(ledger.KindStream, "granted").Inc()
		return o.Link, o.Grant, nil
	case o.Refusal != "":
		h.Metrics.Claims.WithLabelValues(ledger.KindStream, string(o.Refusal)).Inc()
		return o.Link, nil, ledger.Refused(o.Refusal)
	}
	return o.Link, nil, nil
}

// freshLink reads the link row of c's token afresh, refusing an anonymous
// caller of an account-bound link (SPEC §3 step 3).
func (h *Handler) freshLink(c *call) (*ledger.Link, error) {
	l, err := h.Claims.LinkGetByTokenHash(c.ctx, c.hash)
	if err != nil {
		return nil, err
	}
	c.linkID = l.ID
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

// eligible is the generic 404 when l cannot be claimed by c's caller
// right now (SPEC §3: HEAD, previews and landing pages say what a claim
// would). It explains a refusal; only the claim decides one.
func (h *Handler) eligible(c *call, l *ledger.Link) error {
	now := h.dbTime(l.ReadAt)
	if reason := l.Refusal(c.caller.Account, now); reason != "" {
		return ledger.Refused(reason)
	}
	return nil
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

// linkCache keeps, by token hash, the link rows this process read. A GET
// or POST that claims needs only a link's immutable part (its object,
// file name, account, delivery, confirm flag, session settings): whether
// it may be claimed is decided by the claim itself, in the database. So a
// claim of a link this process has seen costs no lookup. Every answer that
// reports a link's state without claiming (HEAD, previews, landing pages)
// reads the row afresh.
type linkCache struct {
	mu sync.Mutex
	m  map[string]cachedLink
}

type cachedLink struct {
	l  *ledger.Link
	at time.Time // monotonic: when l was read
}

// linkCacheSize bounds the cache: about 1 KiB a link, so a few MiB.
const linkCacheSize = 4096

// get returns the immutable part of the link with token hash, reading it
// from the ledger on a miss. Its ReadAt is the database's clock now, as
// far as the copy can tell.
func (c *linkCache) get(ctx context.Context, lg ledger.Claims, hash []byte) (*ledger.Link, error) {
	if l, ok := c.peek(hash); ok {
		return l, nil
	}
	l, err := lg.LinkGetByTokenHash(ctx, hash)
	if err != nil {
		return nil, err
	}
	c.put(hash, l)
	return l, nil
}

// peek returns the cached copy of the link with token hash, if any, with
// its ReadAt moved on by the time since it was read.
func (c *linkCache) peek(hash []byte) (*ledger.Link, bool) {
	c.mu.Lock()
	e, ok := c.m[string(hash)]
	c.mu.Unlock()
	if !ok {
		return nil, false
	}
	l := *e.l
	if !l.ReadAt.IsZero() {
		l.ReadAt = l.ReadAt.Add(time.Since(e.at))
	}
	return &l, true
}

// put caches a copy of l, just read, under its token hash.
func (c *linkCache) put(hash []byte, l *ledger.Link) {
	cp := *l
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[string]cachedLink)
	}
	if len(c.m) >= linkCacheSize {
		for k := range c.m { // drop any one: a map's order is random enough
			delete(c.m, k)
			break
		}
	}
	c.m[string(hash)] = cachedLink{l: &cp, at: time.Now()}
}
