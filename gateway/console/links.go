package console

import (
	"net/http"
	"net/url"

	"github.com/dlgate/dlgate/gateway/admin"
	"github.com/dlgate/dlgate/gateway/problem"
)

// LinkPages serves the links' pages: the listing (this file), a link's
// page with its controls (link.go), and the new-link form (link_new.go).
type LinkPages struct{ *site }

// linksPage is the data of templates/links.html.
type linksPage struct {
	Filter url.Values // the form's values, as typed
	Page   admin.LinkPageBody
	// Errors are the core's details by field; Error one about none.
	Errors map[string]string
	Error  string
	// NextURL is the next page's URL, "" on the last.
	NextURL string
}

func (linksPage) title() string { return "Links" }

// linkFilters are the form fields of the links page: GET /v1/links's
// filters, the two dates (linkTimes) typed as a browser's datetime-local
// (UTC).
var (
	linkFilters = []string{"state", "object_key", "account", "created_after", "created_before"}
	linkTimes   = []string{"created_after", "created_before"}
)

// List serves GET /console/links: the links newest first, filtered as GET
// /v1/links filters them (the admin core LinkList reads the same query),
// a cursor page at a time.
func (h *LinkPages) List(w http.ResponseWriter, r *http.Request) {
	filter, api := listQuery(r.URL.Query(), linkFilters, linkTimes)
	data := linksPage{Filter: filter, Errors: map[string]string{}}
	page, err := h.Admin.Links.LinkList(r.Context(), api)
	if ref, ok := admin.RefusalOf(err); ok {
		if contains(linkFilters, ref.Field) {
			data.Errors[ref.Field] = ref.Detail // beside its field
		} else {
			data.Error = ref.Detail // the cursor, or no one field
		}
		h.render(w, r, ref.Problem.Status, "links", data)
		return
	}
	if err != nil {
		h.failErr(w, r, err, problem.NotFound)
		return
	}
	data.Page, data.NextURL = page, nextURL("links", filter, page.NextCursor)
	h.render(w, r, http.StatusOK, "links", data)
}
