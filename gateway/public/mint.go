package public

import (
	"errors"
	"net/http"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/sessions"
	"github.com/dlgate/dlgate/token"
)

// sessionBody is the JSON of a minted session (SPEC §3). Every field comes
// from the stored session row, so a replay answers the identical body.
type sessionBody struct {
	SessionURL      string        `json:"session_url"`
	NamedSessionURL string        `json:"named_session_url"`
	SessionID       string        `json:"session_id"`
	ExpiresAt       string        `json:"expires_at"`
	ByteBudget      int64         `json:"byte_budget"`
	MaxConcurrency  int           `json:"max_concurrency"`
	Object          sessionObject `json:"object"`
}

type sessionObject struct {
	Size        int64  `json:"size"`
	ETag        string `json:"etag"`
	ContentType string `json:"content_type"`
	Filename    string `json:"filename"`
}

// sessionURL is the URL of x's stored token: an idempotent replay after a
// secret rotation must answer the URL that was minted, not a new one.
func (h *Handler) sessionURL(x *ledger.Session) string {
	tok, _ := h.Keys.Match(token.Session, x.ID, x.TokenHash)
	return h.PublicURL + "/s/" + tok
}

func (h *Handler) sessionBody(x *ledger.Session) sessionBody {
	u := h.sessionURL(x)
	return sessionBody{
		SessionURL: u, NamedSessionURL: u + "/" + httpx.URLName(x.Filename, x.Object.Key), SessionID: x.ID,
		ExpiresAt: httpx.RFC3339(x.ExpiresAt), ByteBudget: x.ByteBudget, MaxConcurrency: x.MaxConcurrency,
		Object: sessionObject{Size: x.Object.Size, ETag: x.Object.ETag, ContentType: x.Object.ContentType,
			Filename: httpx.FileName(x.Filename, x.Object.Key)},
	}
}

// Mint serves POST /d/{token}/sessions: one claim, one session,
// whatever the link's delivery mode.
func (h *Handler) Mint(w http.ResponseWriter, r *http.Request) {
	c, err := h.read(r, token.Link)
	switch {
	case err != nil:
	case c.badKey:
		err = errBadIdempotencyKey
	case c.authErr != nil:
		err = c.authErr
	default:
		var l *ledger.Link
		if l, err = h.links.get(c.ctx, h.Claims, c.hash); err == nil {
			c.linkID = l.ID
			if err = admit(c, l); err == nil {
				err = h.mint(w, c, l, mintOptions{key: c.idempotencyKey})
			}
		}
	}
	if err != nil {
		h.fail(w, r, c, err, problem.LinkUnavailable)
	}
}

// mintOptions say how mint mints and answers.
type mintOptions struct {
	key      string   // Idempotency-Key, "" for none
	redirect bool     // answer 303 to the session (GET of a session-delivery link)
	affinity affinity // reuse the client's usable session of the link (SPEC §5)
}

// mint claims and mints a session for l, then answers 201/200 with its
// JSON, or 303 to it when o.redirect is set.
func (h *Handler) mint(w http.ResponseWriter, c *call, l *ledger.Link, o mintOptions) error {
	attrs := []any{"link_id", l.ID}
	if c.ctx.Err() != nil {
		return nil
	}
	id := uuid.Must(uuid.NewV7()).String()
	now := h.dbTime(l.ReadAt)
	// The link's session settings over the gateway's.
	defaults := sessions.Defaults{TTL: l.Session.TTL, ByteBudget: l.Session.ByteBudget, MaxConcurrency: l.Session.MaxConcurrency}.Or(h.Defaults)
	ttl, budget, slots := defaults.Resolve(l.Object.Size)
	x, created, err := h.Claims.SessionMint(c.ctx, ledger.MintRequest{
		Claim:          ledger.ClaimRequest{LinkID: l.ID, AccountID: c.caller.Account, Client: c.client},
		SessionID:      id,
		TokenHash:      token.Hash(h.Keys.Derive(token.Session, id)),
		ByteBudget:     budget,
		MaxConcurrency: slots,
		ExpiresAt:      sessions.SessionExpiry(now, l.ExpiresAt, ttl),
		IdempotencyKey: o.key,
		Affinity:       o.affinity.on,
		AffinityKeys:   o.affinity.keys,
	})
	if err != nil {
		if errors.Is(err, ledger.ErrAmbiguous) && x != nil {
			h.settler.settleUnknown(c.ctx, unknownClaim{grantID: x.GrantID, sessionID: x.ID}, attrs)
		}
		h.Metrics.Claims.WithLabelValues(ledger.KindSession, problem.ReasonOf(err)).Inc()
		return err
	}
	attrs = append(attrs, "session_id", x.ID, "grant_id", x.GrantID)
	status := http.StatusOK
	switch {
	case created:
		status = http.StatusCreated
		h.Metrics.Claims.WithLabelValues(ledger.KindSession, "granted").Inc()
		h.Metrics.Sessions.WithLabelValues("created").Inc()
		h.Log.InfoContext(c.ctx, "session minted", attrs...)
		if o.affinity.on {
			h.clients.note(c, "minted", x)
			if o.affinity.cookie != "" {
				h.clients.setCookie(w, c, o.affinity.cookie, x.ExpiresAt)
			}
		}
	case o.affinity.on:
		h.clients.note(c, "reused", x)
		h.Log.InfoContext(c.ctx, "affinity session reused", attrs...)
	default:
		h.Metrics.Sessions.WithLabelValues("replayed").Inc()
		h.Log.InfoContext(c.ctx, "session replayed for idempotency key", attrs...)
	}
	if o.redirect {
		status = http.StatusSeeOther
	}
	h.answerSession(w, x, status)
	return nil
}

// answerSession answers x's JSON with status; a 303 points at the named
// session URL (RFC 9110 §15.4.4: every client follows a 303 with a GET),
// so that a browser, wget or aria2c following it saves the file under its
// name (SPEC §3 "Named URLs").
func (h *Handler) answerSession(w http.ResponseWriter, x *ledger.Session, status int) {
	body := h.sessionBody(x)
	if status == http.StatusSeeOther {
		w.Header().Set("Location", body.NamedSessionURL)
	}
	httpx.WriteJSON(w, status, body)
}
