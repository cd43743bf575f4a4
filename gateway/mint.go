package gateway

import (
	"encoding/json"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/auth"
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
func (s *Server) sessionURL(x *ledger.Session) string {
	tok, _ := s.keys.Match(token.Session, x.ID, x.TokenHash)
	return s.PublicURL + "/s/" + tok
}

func (s *Server) sessionBody(x *ledger.Session) sessionBody {
	return sessionBody{
		SessionURL: s.sessionURL(x), NamedSessionURL: s.sessionURL(x) + "/" + urlName(x.Filename, x.Object.Key), SessionID: x.ID,
		ExpiresAt: rfc3339(x.ExpiresAt), ByteBudget: x.ByteBudget, MaxConcurrency: x.MaxConcurrency,
		Object: sessionObject{Size: x.Object.Size, ETag: x.Object.ETag, ContentType: x.Object.ContentType,
			Filename: cleanFilename(firstNonEmpty(x.Filename, x.Object.Key))},
	}
}

// handleMint serves POST /d/{token}/sessions: one claim, one session,
// whatever the link's delivery mode.
func (s *Server) handleMint(w http.ResponseWriter, r *http.Request) {
	tok, ok := s.pathToken(w, r, token.Link, probLinkUnavailable)
	if !ok {
		return
	}
	key := r.Header.Get("Idempotency-Key")
	if _, present := r.Header["Idempotency-Key"]; present && !validIdempotencyKey(key) {
		writeProblem(w, r, probBadRequest, "Idempotency-Key must be 1 to 255 visible ASCII characters.")
		return
	}
	c, err := s.authenticate(r)
	if err != nil {
		s.refuseCredential(w, r, err)
		return
	}
	l, ok := s.lookupLink(w, r, tok, c, true)
	if !ok {
		return
	}
	s.mintAndAnswer(w, r, l, c, mintOptions{key: key})
}

// mintOptions say how mintAndAnswer mints and answers.
type mintOptions struct {
	key      string   // Idempotency-Key, "" for none
	redirect bool     // answer 303 to the session (GET of a session-delivery link)
	affinity affinity // reuse the client's usable session of the link (SPEC §5)
}

// mintAndAnswer claims and mints a session for l, then answers 201/200
// with its JSON, or 303 to it when o.redirect is set.
func (s *Server) mintAndAnswer(w http.ResponseWriter, r *http.Request, l *ledger.Link, c auth.Caller, o mintOptions) {
	attrs := []any{"link_id", l.ID}
	if r.Context().Err() != nil {
		return
	}
	id := uuid.Must(uuid.NewV7()).String()
	ttl, budget, slots := sessionsDefaults(l, s).Resolve(l.Object.Size)
	x, created, err := s.claims.SessionMint(r.Context(), ledger.MintRequest{
		Claim:          ledger.ClaimRequest{LinkID: l.ID, AccountID: c.Account, Client: clientDescriptor(r, c)},
		SessionID:      id,
		TokenHash:      token.Hash(s.keys.Derive(token.Session, id)),
		ByteBudget:     budget,
		MaxConcurrency: slots,
		ExpiresAt:      sessions.SessionExpiry(s.dbTime(l.ReadAt), l.ExpiresAt, ttl),
		IdempotencyKey: o.key,
		Affinity:       o.affinity.on,
		AffinityKeys:   o.affinity.keys,
	})
	if err != nil {
		s.metrics.claims.WithLabelValues(ledger.KindSession, reasonOf(err)).Inc()
		s.fail(w, r, err, probLinkUnavailable, attrs...)
		return
	}
	attrs = append(attrs, "session_id", x.ID, "grant_id", x.GrantID)
	status := http.StatusOK
	switch {
	case created:
		status = http.StatusCreated
		s.metrics.claims.WithLabelValues(ledger.KindSession, "granted").Inc()
		s.metrics.sessions.WithLabelValues("created").Inc()
		s.log.InfoContext(r.Context(), "session minted", attrs...)
		if o.affinity.on {
			s.noteAffinity(r, "minted", x)
			if o.affinity.cookie != "" {
				s.setAffinityCookie(w, r, o.affinity.cookie, x)
			}
		}
	case o.affinity.on:
		s.noteAffinity(r, "reused", x)
		s.log.InfoContext(r.Context(), "affinity session reused", attrs...)
	default:
		s.metrics.sessions.WithLabelValues("replayed").Inc()
		s.log.InfoContext(r.Context(), "session replayed for idempotency key", attrs...)
	}
	if o.redirect {
		status = http.StatusSeeOther
	}
	s.answerSession(w, r, x, status)
}

// answerSession answers x's JSON with status; a 303 points at the named
// session URL (RFC 9110 §15.4.4: every client follows a 303 with a GET),
// so that a browser, wget or aria2c following it saves the file under its
// name (SPEC §3 "Named URLs").
func (s *Server) answerSession(w http.ResponseWriter, r *http.Request, x *ledger.Session, status int) {
	body := s.sessionBody(x)
	if status == http.StatusSeeOther {
		w.Header().Set("Location", body.NamedSessionURL)
	}
	writeJSON(w, status, body)
}

// validIdempotencyKey: 1–255 visible ASCII characters (SPEC §3).
func validIdempotencyKey(k string) bool {
	if len(k) < 1 || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x21 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.Encode(v) //nolint:errcheck // the client is gone
}

// urlName is the last segment of a named URL: the cleaned file name,
// escaped as one path segment. The gateway ignores it when serving.
func urlName(filename, key string) string {
	return url.PathEscape(cleanFilename(firstNonEmpty(filename, key)))
}

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// sessionsDefaults layers the link's session settings over the gateway's.
func sessionsDefaults(l *ledger.Link, s *Server) sessions.Defaults {
	return sessions.Defaults{TTL: l.Session.TTL, ByteBudget: l.Session.ByteBudget, MaxConcurrency: l.Session.MaxConcurrency}.Or(s.Defaults)
}
