package gateway

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/pages"
	"github.com/dlgate/dlgate/storage"
)

// ProblemBase prefixes every problem type URI (RFC 9457 §3.1.1). The last
// path segment is the stable part clients match on.
const ProblemBase = "https://dlgate.dev/problems/"

// problem is one kind of error answer: status, type and title are fixed
// per kind so clients can rely on them; detail may vary. help is the
// sentence a person in a browser reads under the title (SPEC §3).
type problem struct {
	Status int
	Type   string
	Title  string
	help   string
}

// The public and admin error answers, all in one place.
var (
	probLinkUnavailable = problem{http.StatusNotFound, "link-unavailable", "This link is no longer available",
		"It may have expired, been used up or been withdrawn. Ask the person who sent it for a new link."}
	probSessionUnavailable = problem{http.StatusNotFound, "session-unavailable", "This transfer session is no longer available",
		"It may have expired or been withdrawn. Open the original download link again, or ask for a new one."}
	probNotFound         = problem{http.StatusNotFound, "not-found", "Not found", "There is nothing at this address."}
	probMethodNotAllowed = problem{http.StatusMethodNotAllowed, "method-not-allowed", "Method not allowed",
		"This address does not accept that kind of request."}
	// A POST, PUT or DELETE whose path has an empty, "." or ".." segment
	// (cleanPaths): redirecting it would change its method or target.
	probNonCanonicalPath = problem{http.StatusBadRequest, "non-canonical-path", "The request path is not in canonical form",
		"This address is not written the usual way: it has a doubled slash or a \".\" or \"..\" part. Nothing was used up."}
	// 409, not 416: curl -C - and wget -c read a 416 on resume as "already
	// complete", exit 0 and keep a truncated file; a 409 makes both fail
	// loudly and leave the partial file alone (SPEC §3 step 2).
	probRangeRequiresSession = problem{http.StatusConflict, "range-requires-session", "Range requests need a transfer session",
		"Resuming or splitting a download needs a transfer session; a download link only serves the whole file."}
	probRangeNotSatisfiable = problem{http.StatusRequestedRangeNotSatisfiable, "range-not-satisfiable", "Range not satisfiable",
		"The requested part of the file is outside the file."}
	probAuthRequired = problem{http.StatusUnauthorized, "authentication-required", "Authentication required",
		"This link is for a signed-in recipient. Sign in and open it again."}
	probAuthUnavailable = problem{http.StatusServiceUnavailable, "authentication-unavailable", "Credentials cannot be checked right now",
		"The keys to check your sign-in could not be loaded. Try again in a moment."}
	probAdminUnauthorized = problem{http.StatusUnauthorized, "unauthorized", "A valid admin bearer token is required", ""}
	probBudgetExhausted   = problem{http.StatusForbidden, "byte-budget-exhausted", "The session's byte budget is spent",
		"This transfer session has sent all the data it may send. Open the original download link again if it allows another download."}
	probTooManyRequests = problem{http.StatusTooManyRequests, "too-many-concurrent-requests", "Too many concurrent requests for this session",
		"Too many downloads of this transfer are running at once. Wait a moment and try again."}
	// A client that keeps drawing refusals on one token (gateway/refusals.go).
	probTooManyRefusals = problem{http.StatusTooManyRequests, "too-many-refusals", "Too many refused requests for this address",
		"This address was refused too many times in a row. Wait a few minutes before you try again."}
	probBadRequest         = problem{http.StatusBadRequest, "bad-request", "Bad request", "The request could not be understood."}
	probInvalidKey         = problem{http.StatusBadRequest, "invalid-key", "Invalid object key", ""}
	probObjectNotFound     = problem{http.StatusUnprocessableEntity, "object-not-found", "The object does not exist", ""}
	probConflict           = problem{http.StatusConflict, "idempotency-conflict", "The idempotency key was used for a different request", ""}
	probLinkRevoked        = problem{http.StatusConflict, "link-revoked", "The link is revoked and cannot be changed", ""}
	probStorageUnavailable = problem{http.StatusBadGateway, "storage-unavailable", "The object store failed",
		"The file could not be read right now. Nothing was used up; try again in a moment."}
	// 504: the store is the gateway's upstream and it did not answer
	// within GATEWAY_STORE_OPEN_TIMEOUT (RFC 9110 §15.6.5).
	probStorageTimeout = problem{http.StatusGatewayTimeout, "storage-timeout", "The object store did not answer in time",
		"The file could not be read right now. Nothing was used up; try again in a moment."}
	// The store judged the request invalid (an S3 400): the caller's
	// input, so a 4xx, never a 502 that invites a retry.
	probStorageRejected = problem{http.StatusBadRequest, "storage-rejected", "The object store refused the request",
		"The file could not be read: the store refused the request."}
	probDatabaseUnavailable = problem{http.StatusServiceUnavailable, "database-unavailable", "The database is unavailable",
		"The service is having trouble. Try again in a moment."}
	probInternal = problem{http.StatusInternalServerError, "internal-error", "Internal server error",
		"Something went wrong on our side. Try again in a moment."}
	// Request bodies (gateway/limits.go): refused before anything is
	// looked up or claimed.
	probBodyNotAllowed = problem{http.StatusBadRequest, "body-not-allowed", "This request must not have a body",
		"The request could not be understood."}
	probBodyTooLarge = problem{http.StatusRequestEntityTooLarge, "body-too-large", "The request body is too large",
		"The request could not be understood."}
	probRequestTimeout = problem{http.StatusRequestTimeout, "request-timeout", "The request body did not arrive in time",
		"The request took too long to arrive. Nothing was used up; try again."}
)

// The answers of object deletion (SPEC §6, gateway/admin_objects.go).
var (
	probVersionNotStored = problem{http.StatusNotFound, "object-version-not-found",
		"No version the gateway stored has that key and version id", ""}
	probObjectPinned  = problem{http.StatusConflict, "object-pinned", "A live link or session pins the object version", ""}
	probObjectDeleted = problem{http.StatusConflict, "object-deleted",
		"The object version is deleted or being deleted; no link can pin it", ""}
	probDeleteUnsupported = problem{http.StatusNotImplemented, "delete-unsupported", "The object store cannot delete", ""}
)

// errorTable maps domain errors to answers, first match wins. Refusals
// are not here: each route answers them with its own generic 404.
var errorTable = []struct {
	err error
	p   problem
}{
	{errBodyStalled, probRequestTimeout}, // before the store's errors an abandoned upload may carry
	{ledger.ErrBudgetExhausted, probBudgetExhausted},
	{ledger.ErrNoSlot, probTooManyRequests},
	{ledger.ErrConflict, probConflict},
	{ledger.ErrRevoked, probLinkRevoked},
	{ledger.ErrPinned, probObjectPinned},
	{ledger.ErrObjectDeleted, probObjectDeleted},
	{ledger.ErrInvalid, probBadRequest},
	{ledger.ErrAmbiguous, probDatabaseUnavailable},
	{ledger.ErrUnavailable, probDatabaseUnavailable},
	{storage.ErrInvalidKey, probInvalidKey},
	{storage.ErrInvalid, probStorageRejected},
	{storage.ErrTimeout, probStorageTimeout},
	{storage.ErrNotFound, probStorageUnavailable}, // a pinned version vanished: the store broke its promise
	{storage.ErrChanged, probStorageUnavailable},
	{storage.ErrUnavailable, probStorageUnavailable},
}

// problemFor returns the answer for err; unknown errors are a 500.
func problemFor(err error) (problem, bool) {
	for _, e := range errorTable {
		if errors.Is(err, e.err) {
			return e.p, true
		}
	}
	return probInternal, false
}

type problemBody struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// writeProblem sends p as application/problem+json, or as an HTML page
// to a person's browser on the public listener (SPEC §3). detail is written by
// us, never err.Error(): error strings can carry paths, hosts or SQL.
func writeProblem(w http.ResponseWriter, r *http.Request, p problem, detail string) {
	h := w.Header()
	for _, k := range []string{"Content-Disposition", "Content-Range", "ETag", "Last-Modified", "Content-Encoding", "Repr-Digest", "Digest"} {
		// RFC 9110 §15.5.17: a 416 carries "Content-Range: bytes */SIZE",
		// set by the caller; it describes the representation, not this body.
		if k == "Content-Range" && p.Status == http.StatusRequestedRangeNotSatisfiable {
			continue
		}
		h.Del(k)
	}
	if info := infoOf(r); info != nil && info.public && wantsHTML(r) {
		pages.WriteError(w, r, pages.Error{Status: p.Status, Title: p.Title, Message: p.help,
			Type: ProblemBase + p.Type, RequestID: requestID(r)})
		return
	}
	h.Set("Content-Type", "application/problem+json")
	body := problemJSON(problemBody{Type: ProblemBase + p.Type, Title: p.Title, Status: p.Status, Detail: detail, RequestID: requestID(r)})
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

// fail answers err: refusals and not-found become notFound (the route's
// generic 404), known errors their table entry, anything else a logged
// 500 with the request id.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, err error, notFound problem, attrs ...any) {
	if errors.Is(err, ledger.ErrRefused) || errors.Is(err, ledger.ErrNotFound) {
		s.log.DebugContext(r.Context(), "refused", append(attrs, "reason", reasonOf(err))...)
		writeProblem(w, r, notFound, "")
		return
	}
	p, known := problemFor(err)
	level := slog.LevelWarn
	switch {
	case !known:
		level = slog.LevelError
	case p.Status == http.StatusTooManyRequests || p.Status == http.StatusForbidden:
		// Expected refusals: a download manager over the cap retries
		// many times a second; warning about each would flood the log.
		level = slog.LevelDebug
	}
	s.log.Log(r.Context(), level, "request failed", append(attrs, "status", p.Status, "err", err)...)
	writeProblem(w, r, p, "")
}

func reasonOf(err error) string {
	if r := ledger.ReasonOf(err); r != "" {
		return string(r)
	}
	if errors.Is(err, ledger.ErrNotFound) {
		return string(ledger.ReasonUnknown)
	}
	return "error"
}
