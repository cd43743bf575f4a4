package public

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/dlgate/dlgate/gateway/problem"
	"github.com/dlgate/dlgate/ledger"
)

// A public route's handler returns what stopped it as an error, and the
// route answers it in one place (fail): a refusal says which problem it
// is and the header it needs; anything else is the ledger's or the
// store's, mapped by the problem table.

// refused is an error whose answer is fixed: a problem, its detail, and a
// header the answer needs (a challenge, Accept-Ranges, Retry-After).
type refused struct {
	p             problem.Problem
	detail        string
	header, value string
	why           string // for the debug log
}

func (e *refused) Error() string { return "gateway: " + e.why }

var (
	// errForged is a token this gateway did not mint: the route's
	// generic 404 (SPEC §2).
	errForged = &refused{why: "invalid_token"}
	// errRangeOnLink is a Range on a link URL without a session to send
	// it to: 409, not 416, because curl -C - and wget -c take a 416 on
	// resume for "already complete" and keep a truncated file (SPEC §3
	// step 2). The detail names the route, not this link's token: raw
	// tokens never appear in error bodies (SPEC §2).
	errRangeOnLink = &refused{p: problem.RangeRequiresSession, header: "Accept-Ranges", value: "none", why: "range_on_link",
		detail: "Range requests are served by transfer sessions: POST /d/{token}/sessions with this link's token, then send ranges to the session_url."}
	// errAccountRequired is an anonymous caller of an account-bound link
	// or session: 401 with a bare Bearer challenge (RFC 6750 §3: no error
	// code when the request had no credential at all; SPEC §3 step 3).
	errAccountRequired = &refused{p: problem.AuthRequired, header: "WWW-Authenticate", value: "Bearer", why: "account_required"}
	// errInvalidCredential is a credential the authenticator refused: 401
	// with the RFC 6750 §3.1 invalid_token challenge.
	errInvalidCredential = &refused{p: problem.AuthRequired, header: "WWW-Authenticate", value: `Bearer error="invalid_token"`, why: "invalid_credential"}
	// errAuthUnavailable is a credential that cannot be checked while the
	// keys to check it cannot be had: 503.
	errAuthUnavailable = &refused{p: problem.AuthUnavailable, header: "Retry-After", value: "5", why: "auth_unavailable"}
	// errBadIdempotencyKey is an Idempotency-Key that is not 1–255
	// visible ASCII characters (SPEC §3).
	errBadIdempotencyKey = &refused{p: problem.BadRequest, detail: "Idempotency-Key must be 1 to 255 visible ASCII characters.", why: "bad_idempotency_key"}
)

// errRetryInFlight is a retry of an interrupted download while another
// of the same grant is in flight (SPEC §1): 409, nothing claimed, with
// Retry-After the time the attempt in flight keeps its lease without a
// renewal, after which a process that died serving it has let go.
func errRetryInFlight(busy *ledger.RetryInFlightError) error {
	return &refused{p: problem.RetryInProgress, header: "Retry-After", value: strconv.Itoa(retryAfter(busy.Left)), why: "retry_in_progress",
		detail: "Another download of this file by this client is in progress under the same grant; it was not counted again."}
}

// fail answers err on a route whose generic 404 is notFound, and logs it
// with what c (nil when the request could not be read) was about.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, c *call, err error, notFound problem.Problem) {
	var attrs []any
	if c != nil {
		for _, a := range [...][2]string{{"session_id", c.sessionID}, {"link_id", c.linkID}, {"grant_id", c.grantID}} {
			if a[1] != "" {
				attrs = append(attrs, a[0], a[1])
			}
		}
	}
	var re *refused
	if errors.As(err, &re) {
		p := re.p
		if re == errForged {
			p = notFound
		}
		h.Log.DebugContext(r.Context(), "refused", append(attrs, "reason", re.why)...)
		if re.header != "" {
			w.Header().Set(re.header, re.value)
		}
		problem.Write(w, r, p, re.detail)
		return
	}
	problem.Fail(h.Log, w, r, err, notFound, attrs...)
}
