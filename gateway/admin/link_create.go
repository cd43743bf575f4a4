package admin

import (
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/token"
)

// createLinkRequest is the body of POST /v1/links (SPEC §6).
type createLinkRequest struct {
	Object struct {
		Key       string `json:"key"`
		Bucket    string `json:"bucket"`
		VersionID string `json:"version_id"`
	} `json:"object"`
	Downloads int             `json:"downloads"`
	ExpiresIn *int64          `json:"expires_in"`
	ExpiresAt *time.Time      `json:"expires_at"`
	AccountID string          `json:"account_id"`
	Filename  string          `json:"filename"`
	Delivery  string          `json:"delivery"`
	Confirm   bool            `json:"confirm"`
	Session   *sessionRequest `json:"session"`
	// Retries is how many times the client of an interrupted stream
	// download may fetch it again under the same grant (SPEC §1).
	Retries int `json:"retries"`
}

type sessionRequest struct {
	TTL            int64 `json:"ttl"`
	ByteBudget     int64 `json:"byte_budget"`
	MaxConcurrency int   `json:"max_concurrency"`
}

// linkBody is a link as the admin API shows it.
type linkBody struct {
	ID        string          `json:"id"`
	URL       string          `json:"url"`
	NamedURL  string          `json:"named_url"`
	Token     string          `json:"token"`
	Downloads int             `json:"downloads"`
	Remaining int             `json:"remaining"`
	ExpiresAt string          `json:"expires_at"`
	RevokedAt *string         `json:"revoked_at"`
	CreatedAt string          `json:"created_at"`
	Delivery  string          `json:"delivery"`
	Confirm   bool            `json:"confirm"`
	Retries   int             `json:"retries"`
	AccountID *string         `json:"account_id"`
	Filename  string          `json:"filename"`
	Object    httpx.Object    `json:"object"`
	Session   sessionRequest  `json:"session"`
	Grants    *map[string]int `json:"grants,omitempty"`
	// Deliveries counts the grants by delivery status (SPEC §1): none,
	// partial, complete.
	Deliveries     *map[ledger.DeliveryStatus]int `json:"deliveries,omitempty"`
	ActiveSessions *int                           `json:"active_sessions,omitempty"`
}

func (h *Handler) linkBody(l *ledger.Link) linkBody {
	// The stored hash names the secret the link was made under, so after a
	// rotation `links show` still answers the URL that works.
	tok, _ := h.Keys.Match(token.Link, l.ID, l.TokenHash)
	b := linkBody{
		ID: l.ID, URL: h.PublicURL + "/d/" + tok, NamedURL: h.PublicURL + "/d/" + tok + "/" + httpx.URLName(l.Filename, l.Object.Key), Token: tok, Downloads: l.Allowance, Remaining: l.Remaining,
		ExpiresAt: httpx.RFC3339(l.ExpiresAt), CreatedAt: httpx.RFC3339(l.CreatedAt), Delivery: l.Delivery, Confirm: l.Confirm,
		Retries: l.Retries, Filename: l.Filename,
		Object: httpx.ObjectOf(l.Object),
	}
	if l.AccountID != "" {
		b.AccountID = &l.AccountID
	}
	if l.RevokedAt != nil {
		t := httpx.RFC3339(*l.RevokedAt)
		b.RevokedAt = &t
	}
	// Show the effective session settings, defaults resolved.
	d := h.sessionDefaults(l)
	ttl, budget, slots := d.Resolve(l.Object.Size)
	b.Session = sessionRequest{TTL: int64(ttl / time.Second), ByteBudget: budget, MaxConcurrency: slots}
	return b
}

// maxDownloads bounds one link's allowance; far beyond any real use.
const maxDownloads = 1_000_000

// lastExpiry is the latest expires_at every database can store.
var lastExpiry = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)

// CreateLink serves POST /v1/links (SPEC §6) (LinkCreate): 201 with the
// new link, 200 with the one an Idempotency-Key already made.
func (h *Handler) CreateLink(w http.ResponseWriter, r *http.Request) {
	var req createLinkRequest
	if !decodeJSON(w, r, &req) {
		return
	}
	_, keyGiven := r.Header["Idempotency-Key"]
	l, created, err := h.LinkCreate(r.Context(), req, r.Header.Get("Idempotency-Key"), keyGiven)
	if err != nil {
		h.writeError(w, r, err, problem.NotFound)
		return
	}
	status := http.StatusCreated
	if !created {
		status = http.StatusOK
	}
	httpx.WriteJSON(w, status, l)
}

// validate returns the field and one-line reason that make the request
// unacceptable, or two empty strings.
// The key rules are checked before it (400 invalid-key).
//
// Lengths are counted as the data's limits count them: account_id in
// bytes, because a verified caller's account is at most 255 bytes
// (auth.validAccount), so a longer one could never be matched; filename
// in characters (Unicode code points, as JSON Schema's maxLength), since
// it is only an input bound (the column holds 1024 characters, and the
// name is stored cut to 255 bytes, a file system's limit); object.key in
// bytes, S3's limit (storage.MaxKeyLen).
func (req *createLinkRequest) validate(now time.Time) (field, detail string) {
	switch {
	case req.Object.Key == "":
		return "object.key", "object.key is required."
	case req.Downloads < 1 || req.Downloads > maxDownloads:
		return "downloads", fmt.Sprintf("downloads must be between 1 and %d.", maxDownloads)
	case (req.ExpiresIn == nil) == (req.ExpiresAt == nil):
		return "expires_in", "Give exactly one of expires_in (seconds) and expires_at (RFC 3339)."
	case req.ExpiresIn != nil && (*req.ExpiresIn < 1 || *req.ExpiresIn > 10*366*24*3600):
		return "expires_in", "expires_in must be between 1 second and 10 years."
	case req.ExpiresAt != nil && !req.ExpiresAt.After(now):
		return "expires_at", "expires_at must be in the future."
	case req.ExpiresAt != nil && req.ExpiresAt.After(lastExpiry):
		// What MySQL's DATETIME holds; the ledger refuses the same on
		// every backend. "9999-12-31T23:59:59-05:00" is already 10000.
		return "expires_at", "expires_at must be at most 9999-12-31T23:59:59Z."
	case req.Delivery != "" && req.Delivery != ledger.DeliveryStream && req.Delivery != ledger.DeliverySession:
		return "delivery", `delivery must be "stream" or "session".`
	case req.Retries < 0 || req.Retries > ledger.MaxRetries:
		return "retries", fmt.Sprintf("retries must be between 0 and %d.", ledger.MaxRetries)
	case req.Retries > 0 && req.Delivery == ledger.DeliverySession:
		// A session's client resumes within its budget; retries serve
		// an interrupted stream download again (SPEC §1).
		return "retries", `retries applies to delivery "stream"; a session link's client resumes within its session.`
	case len(req.AccountID) > 255 || strings.ContainsFunc(req.AccountID, func(r rune) bool { return r < 0x20 || r == 0x7f }):
		return "account_id", "account_id must be at most 255 bytes (of UTF-8, not characters) without control characters."
	case utf8.RuneCountInString(req.Filename) > 1024:
		return "filename", "filename must be at most 1024 characters."
	}
	if s := req.Session; s != nil {
		switch {
		case s.TTL < 0 || s.TTL > 30*24*3600:
			return "session.ttl", "session.ttl must be between 0 (default) and 30 days in seconds."
		case s.ByteBudget < 0:
			return "session.byte_budget", "session.byte_budget must not be negative (0 means the default)."
		case s.MaxConcurrency < 0 || s.MaxConcurrency > 64:
			return "session.max_concurrency", "session.max_concurrency must be between 0 (default) and 64."
		}
	}
	return "", ""
}
