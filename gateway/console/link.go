package console

import (
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/gorilla/mux"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/gateway/admin"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
)

// linkPage is the data of templates/link.html.
type linkPage struct {
	Link admin.LinkBody
	// QR and NamedQR are the QR codes of its URL and named URL.
	QR, NamedQR template.URL
	Grants      admin.GrantPageBody
	Sessions    []ledger.SessionUse
	// Audit is nil when the key may not read the audit trail.
	Audit  *admin.AuditPageBody
	Events []ledger.EventRecord
	// Created: the page follows the link's creation.
	Created bool
	// State is where the link stands (active, exhausted, expired,
	// revoked).
	State string
}

func (p linkPage) title() string { return "Link " + p.Link.Filename }

// Show serves GET /console/links/{id}: the link (allowance, expiry,
// delivery, its URLs with their QR codes), its grants with their delivery
// status and client, its live sessions with budget and slots, its audit
// entries and its webhook events with their delivery.
func (h *LinkPages) Show(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	ctx := r.Context()
	l, err := h.Admin.Links.LinkShow(ctx, id)
	if err != nil {
		h.failErr(w, r, err, problem.NotFound)
		return
	}
	data := linkPage{Link: l, Created: r.URL.Query().Get("created") == "1", State: h.linkState(l)}
	if data.QR, err = qrDataURL(l.URL); err == nil {
		data.NamedQR, err = qrDataURL(l.NamedURL)
	}
	if err != nil {
		h.failErr(w, r, err, problem.NotFound)
		return
	}
	lim := url.Values{"limit": {strconv.Itoa(pageLimit)}}
	if data.Grants, err = h.Admin.Links.GrantList(ctx, id, lim); err != nil {
		h.failErr(w, r, err, problem.NotFound)
		return
	}
	if data.Sessions, err = h.Views.SessionListByLink(ctx, id, pageLimit); err != nil {
		h.failErr(w, r, err, problem.NotFound)
		return
	}
	if data.Events, err = h.Views.EventListByLink(ctx, id, pageLimit); err != nil {
		h.failErr(w, r, err, problem.NotFound)
		return
	}
	if sessionOf(r).Key.Scopes.Has(apikey.AuditRead) {
		a, err := h.Admin.Audit.AuditList(ctx, url.Values{"target_id": {id}, "limit": {strconv.Itoa(pageLimit)}})
		if err != nil {
			h.failErr(w, r, err, problem.NotFound)
			return
		}
		data.Audit = &a
	}
	h.render(w, r, http.StatusOK, "link", data)
}

// linkState names where l stands, as the links listing's state filter
// does; the admin API's JSON carries the facts it follows from.
func (h *LinkPages) linkState(l admin.LinkBody) string {
	switch {
	case l.RevokedAt != nil:
		return string(ledger.StateRevoked)
	case !parseTime(l.ExpiresAt).After(h.Now()):
		return string(ledger.StateExpired)
	case l.Remaining <= 0:
		return string(ledger.StateExhausted)
	}
	return string(ledger.StateActive)
}

// linkActionPage is the data of the confirmation pages of a link's
// revocation and top-up.
type linkActionPage struct {
	Link   admin.LinkBody
	Add    string
	Reason string
	Errors map[string]string
}

func (p linkActionPage) title() string { return "Link " + p.Link.Filename }

// RevokeConfirm serves GET /console/links/{id}/revoke: what revoking
// does, and the button that does it.
func (h *LinkPages) RevokeConfirm(w http.ResponseWriter, r *http.Request) {
	h.linkAction(w, r, "link_revoke", linkActionPage{})
}

// Revoke serves POST /console/links/{id}/revoke: the admin core
// LinkRevoke, audited as the session's key; then the link's page.
func (h *LinkPages) Revoke(w http.ResponseWriter, r *http.Request) {
	id := mux.Vars(r)["id"]
	if _, err := h.Admin.Links.LinkRevoke(r.Context(), id); err != nil {
		h.failErr(w, r, err, problem.NotFound)
		return
	}
	http.Redirect(w, r, Base+"links/"+url.PathEscape(id), http.StatusSeeOther)
}

// AllowanceConfirm serves GET /console/links/{id}/allowance: the top-up
// form (how many more downloads, why).
func (h *LinkPages) AllowanceConfirm(w http.ResponseWriter, r *http.Request) {
	h.linkAction(w, r, "link_allowance", linkActionPage{Add: "1"})
}

// AllowanceAdd serves POST /console/links/{id}/allowance (add, reason):
// the admin core AllowanceAdd; a refusal is shown beside its field.
func (h *LinkPages) AllowanceAdd(w http.ResponseWriter, r *http.Request) {
	if !h.parseForm(w, r) {
		return
	}
	id := mux.Vars(r)["id"]
	data := linkActionPage{Add: r.PostForm.Get("add"), Reason: r.PostForm.Get("reason"), Errors: map[string]string{}}
	n, err := strconv.Atoi(strings.TrimSpace(data.Add))
	if err != nil {
		data.Errors["add"] = "add must be a whole number."
		h.linkActionStatus(w, r, "link_allowance", data, http.StatusBadRequest)
		return
	}
	_, err = h.Admin.Links.AllowanceAdd(r.Context(), id, admin.AllowanceRequest{Add: n, Reason: data.Reason})
	if ref, ok := admin.RefusalOf(err); ok && ref.Field != "" {
		data.Errors[ref.Field] = ref.Detail
		h.linkActionStatus(w, r, "link_allowance", data, ref.Problem.Status)
		return
	}
	if err != nil {
		h.failErr(w, r, err, problem.NotFound)
		return
	}
	http.Redirect(w, r, Base+"links/"+url.PathEscape(id), http.StatusSeeOther)
}

func (h *LinkPages) linkAction(w http.ResponseWriter, r *http.Request, page string, data linkActionPage) {
	h.linkActionStatus(w, r, page, data, http.StatusOK)
}

func (h *LinkPages) linkActionStatus(w http.ResponseWriter, r *http.Request, page string, data linkActionPage, status int) {
	l, err := h.Admin.Links.LinkShow(r.Context(), mux.Vars(r)["id"])
	if err != nil {
		h.failErr(w, r, err, problem.NotFound)
		return
	}
	data.Link = l
	h.render(w, r, status, page, data)
}

// SessionRevoke serves POST /console/sessions/{id}/revoke (form field
// link, the page to go back to): the admin core SessionRevoke.
func (h *LinkPages) SessionRevoke(w http.ResponseWriter, r *http.Request) {
	if !h.parseForm(w, r) {
		return
	}
	if err := h.Admin.Sessions.SessionRevoke(r.Context(), mux.Vars(r)["id"]); err != nil {
		h.failErr(w, r, err, problem.NotFound)
		return
	}
	back := Base + "links"
	if link := r.PostForm.Get("link"); link != "" {
		back = Base + "links/" + url.PathEscape(link)
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}
