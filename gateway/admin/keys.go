package admin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gorilla/mux"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
)

// Keys serves the operators' keys (SPEC §6): POST /v1/keys makes one and
// shows its secret once, GET /v1/keys lists them without it, DELETE
// /v1/keys/{id} revokes one. All three need keys:write.
type Keys struct {
	clock
	ledger ledger.Keys
	// auth is told of a key this process must refuse at once.
	auth *Auth
	log  *slog.Logger
}

// KeyRequest is the body of POST /v1/keys.
type KeyRequest struct {
	Name      string   `json:"name"`
	Scopes    []string `json:"scopes"`
	ExpiresIn *int64   `json:"expires_in"`
}

// CreatedKeyBody is the answer of POST /v1/keys: the only one that
// carries the key's text.
type CreatedKeyBody struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Scopes    []string `json:"scopes"`
	Key       string   `json:"key"`
	CreatedAt string   `json:"created_at"`
	ExpiresAt *string  `json:"expires_at"`
}

// KeyBody is a key in GET /v1/keys.
type KeyBody struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Scopes     []string `json:"scopes"`
	CreatedAt  string   `json:"created_at"`
	ExpiresAt  *string  `json:"expires_at"`
	RevokedAt  *string  `json:"revoked_at"`
	LastUsedAt *string  `json:"last_used_at"`
}

// KeyPageBody is the answer of GET /v1/keys.
type KeyPageBody struct {
	Keys       []KeyBody `json:"keys"`
	NextCursor string    `json:"next_cursor,omitempty"`
}

// maxKeyLifetime bounds expires_in, as a link's expiry is bounded.
const maxKeyLifetime = 10 * 366 * 24 * time.Hour

// CreateKey serves POST /v1/keys (KeyCreate).
func (h *Keys) CreateKey(w http.ResponseWriter, r *http.Request) {
	var req KeyRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	k, err := h.KeyCreate(r.Context(), req)
	if err != nil {
		writeError(h.log, w, r, err, problem.NotFound)
		return
	}
	// RFC 9111 §5.2.2.5: the one answer with the key's text is kept by no
	// cache.
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, http.StatusCreated, k)
}

// KeyCreate makes a new key with the scopes asked for and returns it with
// its text, which nothing shows again. A key may only give scopes it
// holds itself (SPEC §6): checked here against the caller's scopes (the
// Principal in ctx) for a clear 403, and again by the ledger under the
// lock of the caller's key row, which also refuses a caller revoked or
// expired meanwhile (401). Errors: *Refusal (400 naming the field, 403
// insufficient-scope, 401), the ledger's.
func (h *Keys) KeyCreate(ctx context.Context, req KeyRequest) (CreatedKeyBody, error) {
	scopes, field, detail := req.validate()
	if detail != "" {
		return CreatedKeyBody{}, badRequest(field, detail)
	}
	caller, _ := PrincipalOf(ctx)
	if missing := caller.Scopes.Missing(scopes); len(missing) > 0 {
		return CreatedKeyBody{}, h.refuseGiving(ctx, missing[0])
	}
	text, hash := apikey.New()
	p := ledger.KeyCreateParams{Name: req.Name, Scopes: scopes, SecretHash: hash}
	if req.ExpiresIn != nil {
		p.ExpiresAt = h.now().Add(time.Duration(*req.ExpiresIn) * time.Second)
	}
	k, err := h.ledger.KeyCreate(ctx, p)
	var se *ledger.ScopeError
	switch {
	case errors.As(err, &se):
		return CreatedKeyBody{}, h.refuseGiving(ctx, se.Missing)
	case errors.Is(err, ledger.ErrRefused):
		// The caller's own key was revoked or expired after this process
		// verified it: refused as it will be on its next request.
		h.auth.Forget(caller.KeyID)
		h.log.InfoContext(ctx, "key creation refused", "reason", ledger.ReasonOf(err), "key_id", caller.KeyID)
		return CreatedKeyBody{}, &Refusal{Problem: problem.AdminUnauthorized, Challenge: `Bearer realm="admin", error="invalid_token"`}
	case errors.Is(err, ledger.ErrConflict):
		// Two random 32-byte secrets alike: never, short of a broken
		// random source. Not the idempotency conflict the table names.
		return CreatedKeyBody{}, errors.New("admin: the hash of a new key is taken")
	case err != nil:
		return CreatedKeyBody{}, err
	}
	h.log.InfoContext(ctx, "key created", "new_key_id", k.ID, "scopes", k.Scopes.String())
	return CreatedKeyBody{ID: k.ID, Name: k.Name, Scopes: k.Scopes.Strings(), Key: text,
		CreatedAt: httpx.RFC3339(k.CreatedAt), ExpiresAt: httpx.RFC3339Ptr(k.ExpiresAt)}, nil
}

// refuseGiving is the 403 of a key asked to give a scope it lacks.
func (h *Keys) refuseGiving(ctx context.Context, missing apikey.Scope) *Refusal {
	h.log.InfoContext(ctx, "key creation refused", "reason", "insufficient_scope", "scope", string(missing))
	return &Refusal{Problem: problem.InsufficientScope, Field: "scopes",
		Detail:    "This key does not hold the scope " + string(missing) + "; a key can only give the scopes it holds.",
		Challenge: `Bearer realm="admin", error="insufficient_scope", scope="` + string(missing) + `"`}
}

// validate returns the scopes asked for, or the field and one-line
// detail of a 400. The rules are the ledger's
// (ledger.KeyCreateParams.Validate), worded for the caller.
func (req *KeyRequest) validate() (apikey.Scopes, string, string) {
	switch {
	case !validKeyName(req.Name):
		return 0, "name", fmt.Sprintf("name must be 1 to %d characters, without control characters or spaces at either end.", ledger.MaxKeyName)
	case len(req.Scopes) == 0:
		return 0, "scopes", "scopes must name at least one scope: " + strings.Join(apikey.All().Strings(), ", ") + "."
	case req.ExpiresIn != nil && (*req.ExpiresIn < 1 || *req.ExpiresIn > int64(maxKeyLifetime/time.Second)):
		return 0, "expires_in", "expires_in must be between 1 second and 10 years."
	}
	var scopes apikey.Scopes
	for _, name := range req.Scopes {
		sc, err := apikey.ParseScope(name)
		if err != nil {
			return 0, "scopes", fmt.Sprintf("Unknown scope %s; the scopes are %s.", quoteShort(name), strings.Join(apikey.All().Strings(), ", "))
		}
		scopes |= apikey.Of(sc)
	}
	return scopes, "", ""
}

// validKeyName is ledger's rule for a key's name.
func validKeyName(s string) bool {
	if s == "" || strings.TrimSpace(s) != s || !utf8.ValidString(s) || utf8.RuneCountInString(s) > ledger.MaxKeyName {
		return false
	}
	return !strings.ContainsFunc(s, unicode.IsControl)
}

// keyListParams are the query parameters of GET /v1/keys.
var keyListParams = []string{"cursor", "limit"}

// ListKeys serves GET /v1/keys (KeyList).
func (h *Keys) ListKeys(w http.ResponseWriter, r *http.Request) {
	writeOK(h.log, w, r)(h.KeyList(r.Context(), r.URL.Query()))
}

// KeyList returns a page of keys newest first, revoked and expired ones
// included, never their text; q is GET /v1/keys's query (cursor, limit).
// Errors: *Refusal (400), the ledger's.
func (h *Keys) KeyList(ctx context.Context, q url.Values) (KeyPageBody, error) {
	cursor, limit, detail := parsePage(q, keyListParams)
	if detail != "" {
		return KeyPageBody{}, badRequest("", detail)
	}
	page, err := h.ledger.KeyList(ctx, cursor, limit)
	if err != nil {
		return KeyPageBody{}, pageErr(err)
	}
	out := KeyPageBody{Keys: make([]KeyBody, 0, len(page.Keys)), NextCursor: page.Next}
	for _, k := range page.Keys {
		out.Keys = append(out.Keys, KeyBody{ID: k.ID, Name: k.Name, Scopes: k.Scopes.Strings(), CreatedAt: httpx.RFC3339(k.CreatedAt),
			ExpiresAt: httpx.RFC3339Ptr(k.ExpiresAt), RevokedAt: httpx.RFC3339Ptr(k.RevokedAt), LastUsedAt: httpx.RFC3339Ptr(k.LastUsedAt)})
	}
	return out, nil
}

// KeyGet returns the key id as the ledger keeps it (never its text, which
// the ledger does not keep), for the console's page that revokes it: the
// API has no route of one key. Errors: the ledger's (ErrNotFound; the
// bootstrap token is no key).
func (h *Keys) KeyGet(ctx context.Context, id string) (*ledger.Key, error) {
	return h.ledger.KeyGet(ctx, id)
}

// RevokeKey serves DELETE /v1/keys/{id} (KeyRevoke).
func (h *Keys) RevokeKey(w http.ResponseWriter, r *http.Request) {
	writeDone(h.log, w, r, h.KeyRevoke(r.Context(), mux.Vars(r)["id"]))
}

// KeyRevoke revokes the key id: it is refused from now on, by this
// process at once and by every other within KeyCacheTTL, and its console
// sessions end. Revoking a revoked key succeeds again. Errors: *Refusal
// (404), the ledger's.
func (h *Keys) KeyRevoke(ctx context.Context, id string) error {
	err := h.ledger.KeyRevoke(ctx, id)
	if errors.Is(err, ledger.ErrNotFound) {
		detail := ""
		if id == ledger.BootstrapKeyID {
			detail = "The bootstrap admin token is not a key: replace GATEWAY_ADMIN_TOKEN to retire it."
		}
		return refuse(problem.NotFound, "", detail)
	}
	if err != nil {
		return err
	}
	h.auth.Forget(id)
	h.log.InfoContext(ctx, "key revoked", "revoked_key_id", id)
	return nil
}
