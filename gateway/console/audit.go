package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/dlgate/dlgate/gateway/admin"
	"github.com/dlgate/dlgate/gateway/problem"
)

// AuditPages serves the audit trail's page.
type AuditPages struct{ *site }

// auditPage is the data of templates/audit.html.
type auditPage struct {
	Filter  url.Values
	Page    admin.AuditPageBody
	Error   string
	NextURL string
}

func (auditPage) title() string { return "Audit" }

// auditFilters are GET /v1/audit's filters, the two times typed as a
// browser's datetime-local (UTC).
var auditFilters = []string{"actor", "action", "target_id", "after", "before"}

// List serves GET /console/audit: the audit trail newest first, filtered
// as GET /v1/audit filters it (the admin core AuditList reads the same
// query).
func (h *AuditPages) List(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	filter, api := url.Values{}, url.Values{"limit": {strconv.Itoa(pageLimit)}}
	for _, name := range auditFilters {
		v := strings.TrimSpace(q.Get(name))
		if v == "" {
			continue
		}
		filter.Set(name, v)
		if name == "after" || name == "before" {
			v = apiTime(v)
		}
		api.Set(name, v)
	}
	if c := q.Get("cursor"); c != "" {
		api.Set("cursor", c)
	}
	data := auditPage{Filter: filter}
	page, err := h.Admin.Audit.AuditList(r.Context(), api)
	if ref, ok := admin.RefusalOf(err); ok {
		data.Error = ref.Detail
		h.render(w, r, ref.Problem.Status, "audit", data)
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
		data.NextURL = Base + "audit?" + next.Encode()
	}
	h.render(w, r, http.StatusOK, "audit", data)
}
