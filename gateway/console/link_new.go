package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/dlgate/dlgate/apikey"
	"github.com/dlgate/dlgate/gateway/admin"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
)

// newLinkPage is the data of templates/link_new.html.
type newLinkPage struct {
	// Form holds the fields as typed, by name.
	Form url.Values
	// Errors are the admin API's details by field (its JSON names:
	// "downloads", "session.ttl", …).
	Errors map[string]string
	// Objects are recent stored versions to choose from (when the key
	// may read objects).
	Objects []ledger.ObjectListing
	// IdempotencyKey makes a form submitted twice one link.
	IdempotencyKey string
}

func (newLinkPage) title() string { return "New link" }

// Get returns the form's value of name.
func (p newLinkPage) Get(name string) string { return p.Form.Get(name) }

// newLinkFields are the fields of the new-link form that show their
// error beside them, by the admin API's names.
var newLinkFields = []string{"object.key", "downloads", "expires_in", "expires_at", "delivery", "retries", "account_id",
	"filename", "session.ttl", "session.byte_budget", "session.max_concurrency"}

// expiryUnits are the units of the form's expires_in, in seconds.
var expiryUnits = map[string]int64{"minutes": 60, "hours": 3600, "days": 86400}

// New serves GET /console/links/new: upload a file or choose an
// object, and every option of POST /v1/links.
func (h *LinkPages) New(w http.ResponseWriter, r *http.Request) {
	form := url.Values{"downloads": {"1"}, "expires_value": {"7"}, "expires_unit": {"days"}, "delivery": {ledger.DeliveryStream}}
	if k := r.URL.Query().Get("object_key"); k != "" {
		form.Set("object_key", k)
		form.Set("object_version_id", r.URL.Query().Get("object_version_id"))
	}
	h.renderNewLink(w, r, http.StatusOK, newLinkPage{Form: form, Errors: map[string]string{}})
}

func (h *LinkPages) renderNewLink(w http.ResponseWriter, r *http.Request, status int, data newLinkPage) {
	if data.IdempotencyKey == "" {
		data.IdempotencyKey = "console-" + uuid.NewString()
	}
	if sessionOf(r).Key.Scopes.Has(apikey.ObjectsRead) {
		p, err := h.Views.ObjectList(r.Context(), ledger.ObjectQuery{State: ledger.ObjectStored, Limit: 100})
		if err != nil {
			h.failErr(w, r, err, problem.NotFound)
			return
		}
		data.Objects = p.Objects
	}
	h.render(w, r, status, "link_new", data)
}

// Create serves POST /console/links/new: the form becomes the body of
// POST /v1/links and goes to the admin core LinkCreate, audited as the
// session's key; a refusal is shown beside its field, in the API's words.
// The form's idempotency key makes a second submission of the same form
// the same link.
func (h *LinkPages) Create(w http.ResponseWriter, r *http.Request) {
	if !h.parseForm(w, r) {
		return
	}
	f := r.PostForm
	data := newLinkPage{Form: f, Errors: map[string]string{}, IdempotencyKey: f.Get("idempotency_key")}
	req, idem := linkRequest(f, data.Errors)
	if len(data.Errors) > 0 {
		h.renderNewLink(w, r, http.StatusBadRequest, data)
		return
	}
	l, _, err := h.Admin.Links.LinkCreate(r.Context(), req, idem, idem != "")
	if ref, ok := admin.RefusalOf(err); ok {
		field := ref.Field
		if !contains(newLinkFields, field) {
			field = "form" // about no field of the form: above it
		}
		data.Errors[field] = ref.Detail
		h.renderNewLink(w, r, ref.Problem.Status, data)
		return
	}
	if err != nil {
		h.failErr(w, r, err, problem.NotFound)
		return
	}
	http.Redirect(w, r, Base+"links/"+url.PathEscape(l.ID)+"?created=1", http.StatusSeeOther)
}

// linkRequest reads the form into POST /v1/links's body. What the form
// itself cannot say (a number that is not one) goes to errs by the field
// the API would name; every rule about the values is the core's.
func linkRequest(f url.Values, errs map[string]string) (admin.LinkRequest, string) {
	var req admin.LinkRequest
	req.Object.Key = strings.TrimSpace(f.Get("object_key"))
	req.Object.Bucket = strings.TrimSpace(f.Get("object_bucket"))
	req.Object.VersionID = strings.TrimSpace(f.Get("object_version_id"))
	num := func(name, field string) int64 {
		s := strings.TrimSpace(f.Get(name))
		if s == "" {
			return 0
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			errs[field] = field + " must be a whole number."
		}
		return n
	}
	req.Downloads = int(num("downloads", "downloads"))
	if strings.TrimSpace(f.Get("expires_value")) != "" {
		n := num("expires_value", "expires_in")
		unit, ok := expiryUnits[f.Get("expires_unit")]
		if !ok {
			errs["expires_in"] = "Choose minutes, hours or days."
		}
		secs := n * unit
		req.ExpiresIn = &secs
	}
	if at := strings.TrimSpace(f.Get("expires_at")); at != "" {
		t, err := time.Parse(time.RFC3339, apiTime(at))
		if err != nil {
			errs["expires_at"] = "expires_at must be a date and time, like 2030-01-02T03:04 (UTC)."
		}
		req.ExpiresAt = &t
	}
	req.AccountID = strings.TrimSpace(f.Get("account_id"))
	req.Filename = strings.TrimSpace(f.Get("filename"))
	req.Delivery = f.Get("delivery")
	req.Confirm = f.Get("confirm") != ""
	req.Retries = int(num("retries", "retries"))
	ttl, budget, slots := num("session_ttl", "session.ttl"), num("session_byte_budget", "session.byte_budget"),
		num("session_max_concurrency", "session.max_concurrency")
	if ttl != 0 || budget != 0 || slots != 0 {
		req.Session = &admin.SessionRequest{TTL: ttl, ByteBudget: budget, MaxConcurrency: int(slots)}
	}
	return req, f.Get("idempotency_key")
}
