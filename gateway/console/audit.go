package console

import (
	"net/http"
	"net/url"

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

// auditFilters are GET /v1/audit's filters, the two times (auditTimes)
// typed as a browser's datetime-local (UTC).
var (
	auditFilters = []string{"actor", "action", "target_id", "after", "before"}
	auditTimes   = []string{"after", "before"}
)

// List serves GET /console/audit: the audit trail newest first, filtered
// as GET /v1/audit filters it (the admin core AuditList reads the same
// query).
func (h *AuditPages) List(w http.ResponseWriter, r *http.Request) {
	filter, api := listQuery(r.URL.Query(), auditFilters, auditTimes)
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
	data.Page, data.NextURL = page, nextURL("audit", filter, page.NextCursor)
	h.render(w, r, http.StatusOK, "audit", data)
}
