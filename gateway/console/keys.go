package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/dlgate/dlgate/gateway/admin"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
)

// KeyPages serves the operators' keys' pages: the listing with the form
// that makes one, and a key's revocation.
type KeyPages struct{ *site }

// keysPage is the data of templates/keys.html.
type keysPage struct {
	Keys admin.KeyPageBody
	// Created is the key just made, whose text this page shows once.
	Created *admin.CreatedKeyBody
	// Form and Errors are the creation form's values and refusals.
	Form    url.Values
	Errors  map[string]string
	NextURL string
}

func (keysPage) title() string { return "Keys" }

// List serves GET /console/keys: the keys newest first (never their
// text) and the form that makes one.
func (h *KeyPages) List(w http.ResponseWriter, r *http.Request) {
	h.renderList(w, r, http.StatusOK, keysPage{Form: url.Values{}, Errors: map[string]string{}})
}

func (h *KeyPages) renderList(w http.ResponseWriter, r *http.Request, status int, data keysPage) {
	_, q := listQuery(r.URL.Query(), nil, nil)
	page, err := h.Admin.Keys.KeyList(r.Context(), q)
	if err != nil {
		h.failErr(w, r, err, problem.NotFound)
		return
	}
	data.Keys, data.NextURL = page, nextURL("keys", nil, page.NextCursor)
	h.render(w, r, status, "keys", data)
}

// Create serves POST /console/keys (name, scope…, expires_days): the
// admin core KeyCreate, with the session's key as the one that gives the
// scopes (a key gives only what it holds). The answer is the keys page
// with the new key's text, shown this once and kept by no cache.
func (h *KeyPages) Create(w http.ResponseWriter, r *http.Request) {
	if !h.parseForm(w, r) {
		return
	}
	f := r.PostForm
	data := keysPage{Form: f, Errors: map[string]string{}}
	req := admin.KeyRequest{Name: strings.TrimSpace(f.Get("name")), Scopes: f["scope"]}
	if d := strings.TrimSpace(f.Get("expires_days")); d != "" {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil {
			data.Errors["expires_in"] = "The number of days must be a whole number."
			h.renderList(w, r, http.StatusBadRequest, data)
			return
		}
		secs := n * 86400
		req.ExpiresIn = &secs
	}
	k, err := h.Admin.Keys.KeyCreate(r.Context(), req)
	if ref, ok := admin.RefusalOf(err); ok && ref.Field != "" {
		data.Errors[ref.Field] = ref.Detail
		h.renderList(w, r, ref.Problem.Status, data)
		return
	}
	if err != nil {
		h.failErr(w, r, err, problem.NotFound)
		return
	}
	data.Created, data.Form = &k, url.Values{}
	h.renderList(w, r, http.StatusCreated, data)
}

// keyRevokePage is the data of templates/key_revoke.html.
type keyRevokePage struct {
	Key *ledger.Key
	// Own: the session signed in with this key, and ends with it.
	Own bool
}

func (keyRevokePage) title() string { return "Revoke a key" }

// RevokeConfirm serves GET /console/keys/{id}/revoke: the key (its
// name, scopes, when it was made and last used) and the button that
// revokes it; 404 for a key that is not there (the bootstrap token is
// none).
func (h *KeyPages) RevokeConfirm(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	k, err := h.Admin.Keys.KeyGet(r.Context(), id)
	if err != nil {
		h.failErr(w, r, err, problem.NotFound)
		return
	}
	h.render(w, r, http.StatusOK, "key_revoke", keyRevokePage{Key: k, Own: id == sessionOf(r).Key.ID})
}

// Revoke serves POST /console/keys/{id}/revoke: the admin core
// KeyRevoke, which also ends the key's console sessions (this one, when
// it revokes its own key).
func (h *KeyPages) Revoke(w http.ResponseWriter, r *http.Request) {
	if err := h.Admin.Keys.KeyRevoke(r.Context(), mux.Vars(r)["id"]); err != nil {
		h.failErr(w, r, err, problem.NotFound)
		return
	}
	http.Redirect(w, r, Base+"keys", http.StatusSeeOther)
}
