// Package problem is every error answer of the gateway, in one place:
// the catalogue of problem types (RFC 9457) with their status, stable type
// URI and title, the table that maps the ledger's and the store's errors
// to them, and the one writer, which answers problem+json, or a small HTML
// page to a person's browser on the public listener (SPEC §3).
package problem

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/pages"
	"github.com/dlgate/dlgate/storage"
)

// Base prefixes every problem type URI (RFC 9457 §3.1.1). The last
// path segment is the stable part clients match on.
const Base = "https://dlgate.dev/problems/"

// Problem is one kind of error answer: status, type and title are fixed
// per kind so clients can rely on them; detail may vary. Help is the
// sentence a person in a browser reads under the title (SPEC §3).
type Problem struct {
	Status int
	Type   string
	Title  string
	Help   string
}

// The public and admin error answers, all in one place.
var (
	LinkUnavailable = Problem{http.StatusNotFound, "link-unavailable", "This link is no longer available",
		"It may have expired, been used up or been withdrawn. Ask the person who sent it for a new link."}
	SessionUnavailable = Problem{http.StatusNotFound, "session-unavailable", "This transfer session is no longer available",
		"It may have expired or been withdrawn. Open the original download link again, or ask for a new one."}
	NotFound         = Problem{http.StatusNotFound, "not-found", "Not found", "There is nothing at this address."}
	MethodNotAllowed = Problem{http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed",
		"This address does not accept that kind of request."}
	// A POST, PUT or DELETE whose path has an empty, "." or ".." segment
	// (cleanPaths): redirecting it would change its method or target.
	NonCanonicalPath = Problem{http.StatusBadRequest, "non-canonical-path", "The request path is not in canonical form",
		"This address is not written the usual way: it has a doubled slash or a \".\" or \"..\" part. Nothing was used up."}
	// 409, not 416: curl -C - and wget -c read a 416 on resume as "already
	// complete", exit 0 and keep a truncated file; a 409 makes both fail
	// loudly and leave the partial file alone (SPEC §3 step 2).
	RangeRequiresSession = Problem{http.StatusConflict, "range-requires-session", "Range requests need a transfer session",
		"Resuming or splitting a download needs a transfer session; a download link only serves the whole file."}
	// A retry of an interrupted download while another of the same grant
	// is in flight (SPEC §1): refused, nothing claimed.
	RetryInProgress = Problem{http.StatusConflict, "retry-in-progress", "This download is already in progress",
		"The file is being downloaded again for you right now, in another window or program. Nothing was used up: let that download finish, or try again in a moment."}
	RangeNotSatisfiable = Problem{http.StatusRequestedRangeNotSatisfiable, "range-not-satisfiable", "Range not satisfiable",
		"The requested part of the file is outside the file."}
	// A conditional request whose If-Match or If-Unmodified-Since is false
	// (RFC 9110 §13.1.1, §13.1.4): nothing was spent.
	PreconditionFailed = Problem{http.StatusPreconditionFailed, "precondition-failed", "A precondition of the request is false",
		"The file is not the version this request asked for. Nothing was used up."}
	AuthRequired = Problem{http.StatusUnauthorized, "authentication-required", "Authentication required",
		"This link is for a signed-in recipient. Sign in and open it again."}
	AuthUnavailable = Problem{http.StatusServiceUnavailable, "authentication-unavailable", "Credentials cannot be checked right now",
		"The keys to check your sign-in could not be loaded. Try again in a moment."}
	AdminUnauthorized = Problem{http.StatusUnauthorized, "unauthorized", "A valid admin bearer token is required", ""}
	// The admin key is valid but does not hold the scope its route
	// declares (SPEC §6); the detail names the scope.
	InsufficientScope = Problem{http.StatusForbidden, "insufficient-scope", "The key does not hold the scope this request needs", ""}
	// An address that failed to authenticate too often on the admin
	// listener (gateway/admin/auth.go): no key is checked until
	// Retry-After.
	TooManyAuthFailures = Problem{http.StatusTooManyRequests, "too-many-authentication-failures",
		"Too many failed authentications from this address", ""}
	BudgetExhausted = Problem{http.StatusForbidden, "byte-budget-exhausted", "The session's byte budget is spent",
		"This transfer session has sent all the data it may send. Open the original download link again if it allows another download."}
	TooManyRequests = Problem{http.StatusTooManyRequests, "too-many-concurrent-requests", "Too many concurrent requests for this session",
		"Too many downloads of this transfer are running at once. Wait a moment and try again."}
	// A client that keeps drawing refusals on one token (gateway/public/refusals.go).
	TooManyRefusals = Problem{http.StatusTooManyRequests, "too-many-refusals", "Too many refused requests for this address",
		"This address was refused too many times in a row. Wait a few minutes before you try again."}
	BadRequest         = Problem{http.StatusBadRequest, "bad-request", "Bad request", "The request could not be understood."}
	InvalidKey         = Problem{http.StatusBadRequest, "invalid-key", "Invalid object key", ""}
	ObjectNotFound     = Problem{http.StatusUnprocessableEntity, "object-not-found", "The object does not exist", ""}
	Conflict           = Problem{http.StatusConflict, "idempotency-conflict", "The idempotency key was used for a different request", ""}
	LinkRevoked        = Problem{http.StatusConflict, "link-revoked", "The link is revoked and cannot be changed", ""}
	StorageUnavailable = Problem{http.StatusBadGateway, "storage-unavailable", "The object store failed",
		"The file could not be read right now. Nothing was used up; try again in a moment."}
	// 504: the store is the gateway's upstream and it did not answer
	// within GATEWAY_STORE_OPEN_TIMEOUT (RFC 9110 §15.6.5).
	StorageTimeout = Problem{http.StatusGatewayTimeout, "storage-timeout", "The object store did not answer in time",
		"The file could not be read right now. Nothing was used up; try again in a moment."}
	// The store judged the request invalid (an S3 400): the caller's
	// input, so a 4xx, never a 502 that invites a retry.
	StorageRejected = Problem{http.StatusBadRequest, "storage-rejected", "The object store refused the request",
		"The file could not be read: the store refused the request."}
	DatabaseUnavailable = Problem{http.StatusServiceUnavailable, "database-unavailable", "The database is unavailable",
		"The service is having trouble. Try again in a moment."}
	Internal = Problem{http.StatusInternalServerError, "internal-error", "Internal server error",
		"Something went wrong on our side. Try again in a moment."}
	// Request bodies (gateway/limits.go): refused before anything is
	// looked up or claimed.
	BodyNotAllowed = Problem{http.StatusBadRequest, "body-not-allowed", "This request must not have a body",
		"The request could not be understood."}
	BodyTooLarge = Problem{http.StatusRequestEntityTooLarge, "body-too-large", "The request body is too large",
		"The request could not be understood."}
	RequestTimeout = Problem{http.StatusRequestTimeout, "request-timeout", "The request body did not arrive in time",
		"The request took too long to arrive. Nothing was used up; try again."}
)

// The answers of object deletion (SPEC §6, gateway/admin/objects.go).
var (
	VersionNotStored = Problem{http.StatusNotFound, "object-version-not-found",
		"No version the gateway stored has that key and version id", ""}
	ObjectPinned  = Problem{http.StatusConflict, "object-pinned", "A live link or session pins the object version", ""}
	ObjectDeleted = Problem{http.StatusConflict, "object-deleted",
		"The object version is deleted or being deleted; no link can pin it", ""}
	DeleteUnsupported = Problem{http.StatusNotImplemented, "delete-unsupported", "The object store cannot delete", ""}
	// The store or the ledger cannot keep resumable uploads (SPEC §11).
	UploadsUnsupported = Problem{http.StatusNotImplemented, "uploads-unsupported", "The object store cannot take resumable uploads", ""}
)

// errorTable maps domain errors to answers, first match wins. Refusals
// are not here: each route answers them with its own generic 404.
var errorTable = []struct {
	err error
	p   Problem
}{
	{httpx.ErrBodyStalled, RequestTimeout}, // before the store's errors an abandoned upload may carry
	{ledger.ErrBudgetExhausted, BudgetExhausted},
	{ledger.ErrNoSlot, TooManyRequests},
	{ledger.ErrConflict, Conflict},
	{ledger.ErrRevoked, LinkRevoked},
	{ledger.ErrPinned, ObjectPinned},
	{ledger.ErrObjectDeleted, ObjectDeleted},
	{ledger.ErrForbidden, InsufficientScope},
	{ledger.ErrInvalid, BadRequest},
	{ledger.ErrAmbiguous, DatabaseUnavailable},
	{ledger.ErrUnavailable, DatabaseUnavailable},
	{storage.ErrInvalidKey, InvalidKey},
	{storage.ErrInvalid, StorageRejected},
	{storage.ErrTimeout, StorageTimeout},
	{storage.ErrNotFound, StorageUnavailable}, // a pinned version vanished: the store broke its promise
	{storage.ErrChanged, StorageUnavailable},
	{storage.ErrUnavailable, StorageUnavailable},
}

// For returns the answer for err; unknown errors are a 500 (known false).
func For(err error) (Problem, bool) {
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			return e.p, true
		}
	}
	return Internal, false
}

type problemBody struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// Write sends p as application/problem+json, or as an HTML page to a
// person's browser on the public listener (SPEC §3). detail is written by
// us, never err.Error(): error strings can carry paths, hosts or SQL.
func Write(w http.ResponseWriter, r *http.Request, p Problem, detail string) {
	h := w.Header()
	for _, k := range []string{"Content-Disposition", "Content-Range", "ETag", "Last-Modified", "Content-Encoding", "Repr-Digest", "Digest"} {
		// RFC 9110 §15.5.17: a 416 carries "Content-Range: bytes */SIZE",
		// set by the caller; it describes the representation, not this body.
		if k == "Content-Range" && p.Status == http.StatusRequestedRangeNotSatisfiable {
			continue
		}
		h.Del(k)
	}
	var id string
	if info := httpx.InfoOf(r); info != nil {
		id = info.ID
		if info.Public && info.HTML {
			pages.WriteError(w, r, pages.Error{Status: p.Status, Title: p.Title, Message: p.Help, Type: Base + p.Type, RequestID: id})
			return
		}
	}
	h.Set("Content-Type", "application/problem+json")
	body := problemJSON(problemBody{Type: Base + p.Type, Title: p.Title, Status: p.Status, Detail: detail, RequestID: id})
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(p.Status)
	if r.Method != http.MethodHead {
		w.Write(body) //nolint:errcheck // the client is gone
	}
}

// problemJSON is json.Marshal of b and a newline. Problems are written on
// the cheapest answers (a 404 for an unknown token), so when every string
// is plain ASCII that JSON writes as is, the body is appended directly.
func problemJSON(b problemBody) []byte {
	if !jsonPlain(b.Type) || !jsonPlain(b.Title) || !jsonPlain(b.Detail) || !jsonPlain(b.RequestID) {
		out, _ := json.Marshal(b)
		return append(out, '\n')
	}
	out := make([]byte, 0, 64+len(b.Type)+len(b.Title)+len(b.Detail)+len(b.RequestID))
	out = append(out, `{"type":"`...)
	out = append(out, b.Type...)
	out = append(out, `","title":"`...)
	out = append(out, b.Title...)
	out = append(out, `","status":`...)
	out = strconv.AppendInt(out, int64(b.Status), 10)
	if b.Detail != "" {
		out = append(out, `,"detail":"`...)
		out = append(out, b.Detail...)
		out = append(out, '"')
	}
	if b.RequestID != "" {
		out = append(out, `,"request_id":"`...)
		out = append(out, b.RequestID...)
		out = append(out, '"')
	}
	return append(out, "}\n"...)
}

// jsonPlain reports whether encoding/json writes s unchanged between its
// quotes: printable ASCII but the quote, the backslash and the three
// characters it escapes for HTML (< > &).
func jsonPlain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// Fail answers err, logging it on log: refusals and not-found become
// notFound (the route's generic 404), known errors their table entry,
// anything else a logged 500 with the request id.
func Fail(log *slog.Logger, w http.ResponseWriter, r *http.Request, err error, notFound Problem, attrs ...any) {
	if errors.Is(err, ledger.ErrRefused) || errors.Is(err, ledger.ErrNotFound) {
		log.DebugContext(r.Context(), "refused", append(attrs, "reason", ReasonOf(err))...)
		Write(w, r, notFound, "")
		return
	}
	p, known := For(err)
	level := slog.LevelWarn
	switch {
	case !known:
		level = slog.LevelError
	case p.Status == http.StatusTooManyRequests || p.Status == http.StatusForbidden:
		// Expected refusals: a download manager over the cap retries
		// many times a second; warning about each would flood the log.
		level = slog.LevelDebug
	}
	log.Log(r.Context(), level, "request failed", append(attrs, "status", p.Status, "err", err)...)
	Write(w, r, p, "")
}

// ReasonOf is the label of a refusal for logs and metrics: the ledger's
// reason, "unknown" for something not found, "error" otherwise.
func ReasonOf(err error) string {
	if r := ledger.ReasonOf(err); r != "" {
		return string(r)
	}
	if errors.Is(err, ledger.ErrNotFound) {
		return string(ledger.ReasonUnknown)
	}
	return "error"
}
