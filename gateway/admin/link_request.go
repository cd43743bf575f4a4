package admin

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/dlgate/dlgate/ledger"
)

// What a request about links says, and its rules: the body of POST
// /v1/links and the query of GET /v1/links.

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

// maxDownloads bounds one link's allowance; far beyond any real use.
const maxDownloads = 1_000_000

// lastExpiry is the latest expires_at every database can store.
var lastExpiry = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)

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

// listParams are the query parameters of GET /v1/links (SPEC §6). Any
// other is refused: a misspelt filter would otherwise list every link.
var listParams = []string{"cursor", "limit", "account", "object_key", "state", "created_after", "created_before"}

// parseListQuery reads GET /v1/links's query into a ledger query, or
// returns the 400 naming the parameter. The cursor is checked by the
// ledger, which alone knows its format.
func parseListQuery(v url.Values) (ledger.ListQuery, *Refusal) {
	var q ledger.ListQuery
	if d := checkParams(v, listParams); d != "" {
		return q, badRequest("", d)
	}
	q.Cursor = v.Get("cursor")
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > ledger.MaxListLimit {
			return q, badRequest("limit", fmt.Sprintf("limit must be a whole number between 1 and %d.", ledger.MaxListLimit))
		}
		q.Limit = n
	}
	q.AccountID = v.Get("account")
	if len(q.AccountID) > 255 || strings.ContainsFunc(q.AccountID, isControl) {
		return q, badRequest("account", "account must be at most 255 bytes (of UTF-8, not characters) without control characters.")
	}
	q.ObjectKey = v.Get("object_key")
	if len(q.ObjectKey) > 1024 {
		return q, badRequest("object_key", "object_key must be at most 1024 bytes.")
	}
	if s := v.Get("state"); s != "" {
		st, err := ledger.ParseLinkState(s)
		if err != nil {
			return q, badRequest("state", "state must be one of active, exhausted, expired, revoked.")
		}
		q.State = st
	}
	if name, detail := parseTimes(v, timeParam{"created_after", &q.CreatedAfter}, timeParam{"created_before", &q.CreatedBefore}); detail != "" {
		return q, badRequest(name, detail)
	}
	return q, nil
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }
