package console

import (
	"errors"
	"net/http"
	"net/url"

	"github.com/dlgate/dlgate/gateway/admin"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
)

// ObjectPages serves the pages of the versions the gateway stored: the
// listing and a version's deletion.
type ObjectPages struct{ *site }

// objectsPage is the data of templates/objects.html.
type objectsPage struct {
	State   string
	Page    ledger.ObjectPage
	NextURL string
	Error   string
}

func (objectsPage) title() string { return "Objects" }

// List serves GET /console/objects: the versions the gateway stored,
// newest first (state stored unless the form asks for another, or all),
// each with its key, size, SHA-256, when it was stored and the links that
// pin it.
func (h *ObjectPages) List(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	data := objectsPage{State: q.Get("state")}
	if _, set := q["state"]; !set {
		data.State = string(ledger.ObjectStored)
	}
	page, err := h.Views.ObjectList(r.Context(), ledger.ObjectQuery{Cursor: q.Get("cursor"), Limit: pageLimit, State: ledger.ObjectState(data.State)})
	if errors.Is(err, ledger.ErrInvalid) {
		data.Error = "The state must be stored, deleting or deleted, and the cursor one this page wrote."
		h.render(w, r, http.StatusBadRequest, "objects", data)
		return
	}
	if err != nil {
		h.failErr(w, r, err, problem.NotFound)
		return
	}
	data.Page, data.NextURL = page, nextURL("objects", url.Values{"state": {data.State}}, page.Next)
	h.render(w, r, http.StatusOK, "objects", data)
}

// objectDeletePage is the data of templates/object_delete.html.
type objectDeletePage struct {
	Object ledger.ObjectListing
	Error  string
}

func (objectDeletePage) title() string { return "Delete an object version" }

// DeleteConfirm serves GET /console/objects/delete?bucket=&key=&
// version_id=: the version, the live links and sessions that pin it,
// which deleting it with force revokes, and the button.
func (h *ObjectPages) DeleteConfirm(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	o, ok := h.findObject(w, r, q.Get("bucket"), q.Get("key"), q.Get("version_id"))
	if !ok {
		return
	}
	h.render(w, r, http.StatusOK, "object_delete", objectDeletePage{Object: o})
}

// findObject reads the listing entry of one stored version, with its
// links.
func (h *ObjectPages) findObject(w http.ResponseWriter, r *http.Request, bucket, key, vid string) (ledger.ObjectListing, bool) {
	if key == "" || vid == "" {
		h.fail(w, r, problem.BadRequest, "key and version_id name the version to delete.")
		return ledger.ObjectListing{}, false
	}
	p, err := h.Views.ObjectList(r.Context(), ledger.ObjectQuery{Bucket: bucket, Key: key, VersionID: vid})
	if err != nil {
		h.failErr(w, r, err, problem.NotFound)
		return ledger.ObjectListing{}, false
	}
	if len(p.Objects) == 0 {
		h.fail(w, r, problem.VersionNotStored, "")
		return ledger.ObjectListing{}, false
	}
	return p.Objects[0], true
}

// Delete serves POST /console/objects/delete (bucket, key,
// version_id, force): the admin core ObjectDelete, audited as the
// session's key; a version still pinned without force is shown again
// with the core's words.
func (h *ObjectPages) Delete(w http.ResponseWriter, r *http.Request) {
	if !h.parseForm(w, r) {
		return
	}
	f := r.PostForm
	req := admin.ObjectDeleteRequest{Bucket: f.Get("bucket"), Key: f.Get("key"), VersionID: f.Get("version_id"), Force: f.Get("force") != ""}
	err := h.Admin.Objects.ObjectDelete(r.Context(), req)
	if ref, ok := admin.RefusalOf(err); ok && ref.Problem.Type == problem.ObjectPinned.Type {
		o, found := h.findObject(w, r, req.Bucket, req.Key, req.VersionID)
		if !found {
			return
		}
		h.render(w, r, ref.Problem.Status, "object_delete", objectDeletePage{Object: o, Error: ref.Detail})
		return
	}
	if err != nil {
		h.failErr(w, r, err, problem.VersionNotStored)
		return
	}
	http.Redirect(w, r, Base+"objects", http.StatusSeeOther)
}
