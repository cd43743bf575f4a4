package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"path"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/gateway/warm"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/sessions"
	"github.com/dlgate/dlgate/storage"
	"github.com/dlgate/dlgate/token"
)

// Links serves the link routes (SPEC §6): create, list, show, revoke, top
// up, and the grants and allowance changes of one link. Its cores are
// here (core.go says what a core is), their JSON handlers in links.go.
type Links struct {
	clock
	ledger    ledger.Admin
	store     storage.Store
	tokens    *token.Keys
	warm      *warm.Sessions
	log       *slog.Logger
	publicURL string
	// defaults are the gateway-wide session defaults (SPEC §4), shown
	// resolved on each link.
	defaults sessions.Defaults
}

// LinkRequest is the body of POST /v1/links (SPEC §6).
type LinkRequest = createLinkRequest

// SessionRequest is the "session" object of a link: its session settings.
type SessionRequest = sessionRequest

// LinkBody is a link as the admin API shows it.
type LinkBody = linkBody

// LinkPageBody is the answer of GET /v1/links: each link without its
// token.
type LinkPageBody struct {
	Links      []linkListItem `json:"links"`
	NextCursor string         `json:"next_cursor,omitempty"`
}

// LinkCreate pins the object version req names (the current one without
// a version id) and creates the link; with an idempotency key already
// used it returns that link and created false. Errors: *Refusal (400
// naming the field, 422 object-not-found), the ledger's and the store's.
func (h *Links) LinkCreate(ctx context.Context, req LinkRequest, idempotencyKey string, keyGiven bool) (LinkBody, bool, error) {
	if req.Object.Key != "" && storage.ValidateKey(req.Object.Key) != nil {
		return LinkBody{}, false, refuse(problem.InvalidKey, "object.key", "object.key must be at most 1024 bytes of UTF-8 without control characters or backslashes, must not start with \"/\", and must have no \".\" or \"..\" segment.")
	}
	if field, msg := req.validate(h.now()); msg != "" {
		return LinkBody{}, false, badRequest(field, msg)
	}
	if keyGiven && !httpx.ValidIdempotencyKey(idempotencyKey) {
		return LinkBody{}, false, badRequest("Idempotency-Key", "Idempotency-Key must be 1 to 255 visible ASCII characters.")
	}
	v, err := h.store.Stat(ctx, storage.Ref{Bucket: req.Object.Bucket, Key: req.Object.Key, VersionID: req.Object.VersionID})
	if errors.Is(err, storage.ErrNotFound) {
		return LinkBody{}, false, refuse(problem.ObjectNotFound, "object.key", "No object (or no such version) at that key.")
	}
	if err != nil {
		return LinkBody{}, false, err
	}
	expires := h.now()
	if req.ExpiresIn != nil {
		expires = expires.Add(time.Duration(*req.ExpiresIn) * time.Second)
	} else {
		expires = ledger.Micro(*req.ExpiresAt)
	}
	if req.Delivery == "" {
		req.Delivery = ledger.DeliveryStream
	}
	filename := req.Filename
	if filename == "" {
		filename = path.Base(v.Key)
	}
	id := uuid.Must(uuid.NewV7()).String()
	l := &ledger.Link{
		ID: id, TokenHash: token.Hash(h.tokens.Derive(token.Link, id)),
		Object:   v,
		Filename: httpx.CleanFilename(filename), AccountID: req.AccountID, Allowance: req.Downloads, Remaining: req.Downloads,
		ExpiresAt: expires, Delivery: req.Delivery, Confirm: req.Confirm, Retries: req.Retries, IdempotencyKey: idempotencyKey,
	}
	if req.Session != nil {
		l.Session = ledger.SessionSettings{TTL: time.Duration(req.Session.TTL) * time.Second,
			ByteBudget: req.Session.ByteBudget, MaxConcurrency: req.Session.MaxConcurrency}
	}
	out, created, err := h.ledger.LinkCreate(ctx, l)
	if err != nil {
		return LinkBody{}, false, err
	}
	h.log.InfoContext(ctx, "link created", "link_id", out.ID, "created", created, "downloads", out.Allowance)
	return h.linkBody(out), created, nil
}

// LinkShow returns the link id with its counts. Errors: the ledger's
// (ErrNotFound).
func (h *Links) LinkShow(ctx context.Context, id string) (LinkBody, error) {
	st, err := h.ledger.LinkGet(ctx, id)
	if err != nil {
		return LinkBody{}, err
	}
	b := h.linkBody(&st.Link)
	b.Grants, b.Deliveries, b.ActiveSessions = &st.Grants, &st.Deliveries, &st.ActiveSessions
	return b, nil
}

// LinkList returns a page of links, newest first; q is GET /v1/links's
// query. Errors: *Refusal (400), the ledger's.
func (h *Links) LinkList(ctx context.Context, v url.Values) (LinkPageBody, error) {
	q, ref := parseListQuery(v)
	if ref != nil {
		return LinkPageBody{}, ref
	}
	page, err := h.ledger.LinkList(ctx, q)
	if err != nil {
		return LinkPageBody{}, pageErr(err)
	}
	out := LinkPageBody{Links: make([]linkListItem, 0, len(page.Links)), NextCursor: page.Next}
	for i := range page.Links {
		st := &page.Links[i]
		item := linkListItem{linkBody: h.linkBody(&st.Link)}
		item.Grants, item.Deliveries, item.ActiveSessions = &st.Grants, &st.Deliveries, &st.ActiveSessions
		out.Links = append(out.Links, item)
	}
	return out, nil
}

// LinkRevoke revokes the link id, which ends its sessions (idempotent),
// and returns it. Errors: the ledger's (ErrNotFound).
func (h *Links) LinkRevoke(ctx context.Context, id string) (LinkBody, error) {
	if err := h.ledger.LinkRevoke(ctx, id); err != nil {
		return LinkBody{}, err
	}
	h.log.InfoContext(ctx, "link revoked", "link_id", id)
	// Its sessions die at once on this process; elsewhere within WarmRowTTL.
	h.warm.ForgetLink(id)
	return h.LinkShow(ctx, id)
}

// AllowanceRequest is the body of POST /v1/links/{id}/allowance.
type AllowanceRequest struct {
	Add    int    `json:"add"`
	Reason string `json:"reason"`
}

// AllowanceAdd adds req.Add downloads to the link id with its reason
// (audited) and returns the link. Errors: *Refusal (400), the ledger's
// (ErrNotFound, ErrRevoked).
func (h *Links) AllowanceAdd(ctx context.Context, id string, req AllowanceRequest) (LinkBody, error) {
	switch {
	case req.Add < 1 || req.Add > maxDownloads:
		return LinkBody{}, badRequest("add", fmt.Sprintf("add must be between 1 and %d; reason at most 1024 bytes.", maxDownloads))
	case len(req.Reason) > 1024:
		return LinkBody{}, badRequest("reason", fmt.Sprintf("add must be between 1 and %d; reason at most 1024 bytes.", maxDownloads))
	}
	if err := h.ledger.AllowanceAdd(ctx, id, req.Add, req.Reason); err != nil {
		return LinkBody{}, err
	}
	h.log.InfoContext(ctx, "allowance added", "link_id", id, "added", req.Add)
	return h.LinkShow(ctx, id)
}

// GrantBody is a grant as GET /v1/links/{id}/grants shows it.
type GrantBody = grantBody

// GrantPageBody is the answer of GET /v1/links/{id}/grants.
type GrantPageBody struct {
	Grants     []GrantBody `json:"grants"`
	NextCursor string      `json:"next_cursor,omitempty"`
}

// GrantList returns a page of the link's grants, newest first, each with
// its delivery; q is GET /v1/links/{id}/grants's query (cursor, limit,
// delivery: none, partial or complete). Errors: *Refusal (400), the
// ledger's (ErrNotFound).
func (h *Links) GrantList(ctx context.Context, id string, q url.Values) (GrantPageBody, error) {
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			return GrantPageBody{}, badRequest("limit", "limit must be between 1 and 500.")
		}
		limit = n
	}
	var delivery ledger.DeliveryStatus
	if v, present := q["delivery"]; present {
		d, err := ledger.ParseDeliveryStatus(q.Get("delivery"))
		if err != nil || len(v) > 1 {
			return GrantPageBody{}, badRequest("delivery", "delivery must be one of none, partial, complete, given once.")
		}
		delivery = d
	}
	p, err := h.ledger.GrantList(ctx, ledger.GrantQuery{LinkID: id, Cursor: q.Get("cursor"), Limit: limit, Delivery: delivery})
	if err != nil {
		return GrantPageBody{}, err
	}
	out := GrantPageBody{Grants: []GrantBody{}, NextCursor: p.Next}
	for _, g := range p.Grants {
		b := grantBody{ID: g.ID, Kind: g.Kind, Status: g.Status, Client: g.Client, CreatedAt: httpx.RFC3339(g.CreatedAt),
			AffinityReuses: g.AffinityReuses, Delivery: deliveryOf(g.Delivery), RefundedAt: rfc3339OrNull(g.RefundedAt)}
		if g.AccountID != "" {
			b.AccountID = &g.AccountID
		}
		if g.SessionID != "" {
			b.SessionID = &g.SessionID
		}
		out.Grants = append(out.Grants, b)
	}
	return out, nil
}

func (h *Links) linkBody(l *ledger.Link) linkBody {
	// The stored hash names the secret the link was made under, so after a
	// rotation `links show` still answers the URL that works.
	tok, _ := h.tokens.Match(token.Link, l.ID, l.TokenHash)
	b := linkBody{
		ID: l.ID, URL: h.publicURL + "/d/" + tok, NamedURL: h.publicURL + "/d/" + tok + "/" + httpx.URLName(l.Filename, l.Object.Key), Token: tok, Downloads: l.Allowance, Remaining: l.Remaining,
		ExpiresAt: httpx.RFC3339(l.ExpiresAt), CreatedAt: httpx.RFC3339(l.CreatedAt), Delivery: l.Delivery, Confirm: l.Confirm,
		Retries: l.Retries, Filename: l.Filename,
		Object: httpx.ObjectOf(l.Object),
	}
	if l.AccountID != "" {
		b.AccountID = &l.AccountID
	}
	if l.RevokedAt != nil {
		t := httpx.RFC3339(*l.RevokedAt)
		b.RevokedAt = &t
	}
	// Show the effective session settings, defaults resolved.
	d := h.sessionDefaults(l)
	ttl, budget, slots := d.Resolve(l.Object.Size)
	b.Session = sessionRequest{TTL: int64(ttl / time.Second), ByteBudget: budget, MaxConcurrency: slots}
	return b
}

// sessionDefaults layers the link's session settings over the gateway's.
func (h *Links) sessionDefaults(l *ledger.Link) sessions.Defaults {
	return sessions.Defaults{TTL: l.Session.TTL, ByteBudget: l.Session.ByteBudget, MaxConcurrency: l.Session.MaxConcurrency}.Or(h.defaults)
}
