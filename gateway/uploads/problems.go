package uploads

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tus/tusd/v2/pkg/handler"

	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/storage"
)

// ProblemBase prefixes every problem type: the gateway's (problem.Base),
// one namespace for every admin API error.
const ProblemBase = problem.Base

// The errors this package adds to tusd's, each with its tus error code,
// message and status. tusd answers them (and its own) through
// problemWriter, which turns every one into problem+json.
var (
	errExpired = handler.NewError("ERR_UPLOAD_EXPIRED",
		"the upload expired unfinished and its bytes are removed; start a new upload", http.StatusGone)
	errGone = handler.NewError("ERR_UPLOAD_GONE",
		"the upload's bytes are no longer in the store; start a new upload", http.StatusGone)
	errIncomplete = handler.NewError("ERR_UPLOAD_INCOMPLETE",
		"the upload has not received all its bytes yet", http.StatusConflict)
	errStorageUnavailable = handler.NewError("ERR_STORAGE_UNAVAILABLE",
		"the object store failed; resume the upload from its offset", http.StatusBadGateway)
	errStorageTimeout = handler.NewError("ERR_STORAGE_TIMEOUT",
		"the object store did not answer in time; resume the upload from its offset", http.StatusGatewayTimeout)
	errStorageRejected = handler.NewError("ERR_STORAGE_REJECTED",
		"the object store refused the request", http.StatusBadRequest)
	errDatabaseUnavailable = handler.NewError("ERR_DATABASE_UNAVAILABLE",
		"the database is unavailable; resume the upload from its offset", http.StatusServiceUnavailable)
	errInternal = handler.NewError("ERR_INTERNAL_SERVER_ERROR", "", http.StatusInternalServerError)
	errMethod   = handler.NewError("ERR_METHOD_NOT_ALLOWED", "", http.StatusMethodNotAllowed)
)

// invalidMetadata is a 400 for a creation whose Upload-Metadata the
// gateway cannot take; detail says what is wrong, in words of ours.
func invalidMetadata(detail string) handler.Error {
	return handler.NewError("ERR_INVALID_METADATA", detail, http.StatusBadRequest)
}

// invalidKey is invalidMetadata for the object key, with the problem
// type PUT /v1/objects answers for one.
func invalidKey(detail string) handler.Error {
	return handler.NewError("ERR_INVALID_KEY", detail, http.StatusBadRequest)
}

// problemOf names the problem of each tus error code: its type (after
// ProblemBase) and title. A code not listed gets a type made from it
// (ERR_INVALID_OFFSET: invalid-offset) and tusd's message as its title.
var problemOf = map[string]struct{ typ, title string }{
	"ERR_MISMATCHED_OFFSET":     {"upload-offset-mismatch", "The upload is at another offset"},
	"ERR_UPLOAD_LOCKED":         {"upload-locked", "Another request is reading or writing this upload"},
	"ERR_LOCK_TIMEOUT":          {"upload-locked", "Another request is reading or writing this upload"},
	"ERR_UPLOAD_NOT_FOUND":      {"upload-not-found", "No such upload"},
	"ERR_UPLOAD_EXPIRED":        {"upload-expired", "The upload expired"},
	"ERR_UPLOAD_GONE":           {"upload-gone", "The upload's bytes are gone"},
	"ERR_UPLOAD_INCOMPLETE":     {"upload-incomplete", "The upload is not complete"},
	"ERR_MAX_SIZE_EXCEEDED":     {"upload-too-large", "The upload is larger than the gateway accepts"},
	"ERR_UPLOAD_SIZE_EXCEEDED":  {"upload-too-large", "The body goes past the upload's length"},
	"ERR_INVALID_METADATA":      {"invalid-upload-metadata", "Invalid Upload-Metadata"},
	"ERR_INVALID_KEY":           {"invalid-key", "Invalid object key"},
	"ERR_UNSUPPORTED_VERSION":   {"tus-version-unsupported", "Only tus 1.0.0 is supported"},
	"ERR_NOT_IMPLEMENTED":       {"tus-extension-unsupported", "The gateway does not support this tus extension"},
	"ERR_STORAGE_UNAVAILABLE":   {"storage-unavailable", "The object store failed"},
	"ERR_STORAGE_TIMEOUT":       {"storage-timeout", "The object store did not answer in time"},
	"ERR_STORAGE_REJECTED":      {"storage-rejected", "The object store refused the request"},
	"ERR_DATABASE_UNAVAILABLE":  {"database-unavailable", "The database is unavailable"},
	"ERR_INTERNAL_SERVER_ERROR": {"internal-error", "Internal server error"},
	"ERR_METHOD_NOT_ALLOWED":    {"method-not-allowed", "Method not allowed"},
	"ERR_SERVER_SHUTDOWN":       {"shutting-down", "The gateway is shutting down; resume the upload from its offset"},
}

// statusProblem names the problem of a bodiless error answer (HEAD), of
// which only the status is known.
var statusProblem = map[int]string{
	http.StatusNotFound: "ERR_UPLOAD_NOT_FOUND", http.StatusGone: "ERR_UPLOAD_EXPIRED",
	http.StatusLocked: "ERR_UPLOAD_LOCKED", http.StatusInternalServerError: "ERR_INTERNAL_SERVER_ERROR",
}

type problemBody struct {
	Type      string `json:"type"`
	Title     string `json:"title"`
	Status    int    `json:"status"`
	Detail    string `json:"detail,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// problemFor is the problem+json body for tus error code with message. The
// message of an internal error is never sent: tusd puts err.Error() there,
// which can carry paths, hosts or SQL.
func problemFor(code, message string, status int, requestID string) problemBody {
	p, ok := problemOf[code]
	if !ok {
		p.typ = strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(code, "ERR_")), "_", "-")
		p.title = strings.ToUpper(message[:min(1, len(message))]) + message[min(1, len(message)):]
		message = ""
	}
	if status >= 500 && code == "ERR_INTERNAL_SERVER_ERROR" {
		message = ""
	}
	return problemBody{Type: ProblemBase + p.typ, Title: p.title, Status: status, Detail: message, RequestID: requestID}
}

// ledgerError is the tus error of a failed ledger call.
func ledgerError(err error) error {
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return handler.ErrNotFound
	case errors.Is(err, ledger.ErrLocked):
		return handler.ErrFileLocked
	case errors.Is(err, ledger.ErrConflict):
		return handler.ErrMismatchOffset
	case errors.Is(err, ledger.ErrUnavailable), errors.Is(err, ledger.ErrAmbiguous):
		return errDatabaseUnavailable
	}
	return errInternal
}

// storeError is the tus error of a failed store call.
func storeError(err error) error {
	switch {
	case errors.Is(err, storage.ErrNotFound), errors.Is(err, storage.ErrChanged):
		// What the upload kept in the store is gone or is not what was
		// written: no resumption can make the object the client sent.
		return errGone
	case errors.Is(err, storage.ErrInvalidKey):
		return invalidKey("The store refused the object key.")
	case errors.Is(err, storage.ErrInvalid):
		return errStorageRejected
	case errors.Is(err, storage.ErrTimeout):
		return errStorageTimeout
	case errors.Is(err, storage.ErrUnavailable):
		return errStorageUnavailable
	}
	return errInternal
}

// problemWriter is the ResponseWriter tusd writes to. It turns tusd's
// text/plain error answers ("ERR_CODE: message") into problem+json,
// names the expiration extension beside tusd's (which has none), and
// adds Upload-Expires to the answers of an unfinished upload (tus 1.0
// "Expiration": every PATCH answer, and the creation's). Unwrap lets
// http.ResponseController reach the connection's deadlines, which tusd
// moves while a body arrives.
type problemWriter struct {
	http.ResponseWriter
	r       *http.Request
	st      *requestState
	wrote   bool
	pending int // the status of an error answer being gathered
	body    bytes.Buffer
}

func (w *problemWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *problemWriter) WriteHeader(status int) {
	if w.wrote {
		return
	}
	w.wrote = true
	h := w.Header()
	if status >= 400 && strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
		w.pending = status
		return
	}
	if ext := h.Get("Tus-Extension"); ext != "" {
		h.Set("Tus-Extension", ext+",expiration")
	}
	if u := w.st.upload; status < 300 && u != nil && u.FinishedAt == nil && !u.ExpiresAt.IsZero() {
		h.Set("Upload-Expires", httpDate(u.ExpiresAt))
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *problemWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.pending != 0 {
		return w.body.Write(b)
	}
	return w.ResponseWriter.Write(b)
}

// finish sends the error answer gathered, as problem+json.
func (w *problemWriter) finish() {
	if w.pending == 0 {
		return
	}
	code, message, ok := strings.Cut(strings.TrimSpace(w.body.String()), ": ")
	if !ok {
		code, message = statusProblem[w.pending], ""
	}
	w.writeProblem(problemFor(code, message, w.pending, w.Header().Get("X-Request-Id")))
}

func (w *problemWriter) writeProblem(p problemBody) {
	body, _ := json.Marshal(p)
	body = append(body, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	w.wrote, w.pending = true, 0
	w.ResponseWriter.WriteHeader(p.Status)
	if w.r.Method != http.MethodHead {
		w.ResponseWriter.Write(body) //nolint:errcheck // the client is gone
	}
}

// sendError answers err, a handler.Error, as problem+json.
func (w *problemWriter) sendError(err error) {
	var he handler.Error
	if !errors.As(err, &he) {
		he = errInternal
	}
	w.writeProblem(problemFor(he.ErrorCode, he.Message, he.HTTPResponse.StatusCode, w.Header().Get("X-Request-Id")))
}

// httpDate is t as an HTTP date (RFC 9110 §5.6.7).
func httpDate(t time.Time) string { return t.UTC().Format(http.TimeFormat) }
