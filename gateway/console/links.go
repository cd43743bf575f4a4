package console

import (
	"net/http"
	"net/url"
	"strings"
	"time"

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
// filters, the two dates typed as a browser's datetime-local (UTC).
var linkFilters = []string{"state", "object_key", "account", "created_after", "created_before"}

// List serves GET /console/links: the links newest first, filtered as GET
// /v1/links filters them (the admin core LinkList reads the same query),
// a cursor page at a time.
func (h *LinkPages) List(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filter := url.Values{}
	api := url.Values{}
	for _, name := range linkFilters {
		v := strings.TrimSpace(q.Get(name))
		if v == "" {
			continue
		}
		filter.Set(name, v)
		if strings.HasPrefix(name, "created_") {
			v = apiTime(v)
		}
		api.Set(name, v)
	}
	if c := q.Get("cursor"); c != "" {
		api.Set("cursor", c)
	}
	api.Set("limit", "50")
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
	data.Page = page
	if page.NextCursor != "" {
		next := url.Values{}
		for k, v := range filter {
			next[k] = v
		}
		next.Set("cursor", page.NextCursor)
		data.NextURL = Base + "links?" + next.Encode()
	}
	h.render(w, r, http.StatusOK, "links", data)
}

// apiTime turns a browser's datetime-local value (2030-01-02T03:04, or
// with seconds), read as UTC, into the RFC 3339 time the admin API takes;
// anything else goes on as typed, for the API's rule to refuse with its
// own words.
func apiTime(v string) string {
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC().Format(time.RFC3339)
		}
	}
	return v
}
