package public

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"time"

	"github.com/dlgate/dlgate/auth"
	"github.com/dlgate/dlgate/ledger"
)

// Session affinity modes (GATEWAY_SESSION_AFFINITY, SPEC §5).
const (
	// AffinityClient sends the same client back to its session: the
	// verified account on an account-bound link, else the client's cookie,
	// else its address together with its exact User-Agent.
	AffinityClient = "client"
	// AffinityAccount only sends a verified account back to its session
	// of an account-bound link.
	AffinityAccount = "account"
	// AffinityOff never sends anyone back: every GET claims.
	AffinityOff = "off"
)

// DefaultAffinity is GATEWAY_SESSION_AFFINITY's default.
const DefaultAffinity = AffinityClient

// ValidAffinity reports whether mode is one of the affinity modes.
func ValidAffinity(mode string) bool {
	return mode == AffinityClient || mode == AffinityAccount || mode == AffinityOff
}

// affinityCookie names the cookie that carries a client's opaque id on one
// link's path. It is never a token: it opens nothing by itself, it only
// tells the gateway which of the link's sessions this client minted.
const affinityCookie = "dlgate_client"

// affinity is who a request on a link URL is to the ledger (SPEC §5): how
// a request on a session-delivery link URL finds its client's session,
// and whose interrupted stream download a retry serves again (SPEC §1).
type affinity struct {
	on bool
	// keys name the client to the ledger in order (cookie, then address
	// and User-Agent); nil with on for the verified account.
	keys []string
	// cookie is the client id to set on the 303 of a session this request
	// mints, or on the 200 of a stream download that may be retried: the
	// id its cookie already carried, or a fresh one.
	cookie string
	// lookup are the keys that may already have a session: keys without a
	// fresh cookie id, which cannot.
	lookup []string
}

// affinityOf says whether and as whom c's requests on l go to c's session
// of it, under the gateway's GATEWAY_SESSION_AFFINITY.
func (h *Handler) affinityOf(c *call, l *ledger.Link) affinity {
	if l.Delivery != ledger.DeliverySession {
		return affinity{}
	}
	return h.clientOf(c, l)
}

// clientOf says whether and as whom the ledger knows c on l, as SPEC §5
// has it, under GATEWAY_SESSION_AFFINITY: for session affinity on a
// session link, and, as retrier narrows it, for the retries of an
// interrupted stream download on a stream link (SPEC §1).
func (h *Handler) clientOf(c *call, l *ledger.Link) affinity {
	if h.Affinity == AffinityOff {
		return affinity{}
	}
	if l.AccountID != "" {
		// An account-bound link has one client per account, whatever
		// its cookies or address.
		return affinity{on: c.caller.Account == l.AccountID}
	}
	if h.Affinity != AffinityClient {
		return affinity{}
	}
	a := affinity{on: true}
	if c.cookie != "" {
		a.cookie = c.cookie
		a.keys = []string{"c:" + c.cookie, c.address}
		a.lookup = a.keys
		return a
	}
	a.cookie = newClientID()
	a.keys = []string{"c:" + a.cookie, c.address}
	a.lookup = a.keys[1:]
	return a
}

// affinitySession returns the client's usable session of l, nil when it
// has none (or affinity does not apply).
func (h *Handler) affinitySession(c *call, l *ledger.Link) (*ledger.Session, error) {
	a := h.affinityOf(c, l)
	if !a.on {
		return nil, nil
	}
	// need 1: a Range or a HEAD goes to a session with budget left, or
	// with a request of it still streaming (an unranged GET's mint asks
	// for the whole object instead, SessionMint).
	x, err := h.Claims.SessionGetByAffinity(c.ctx, l.ID, c.caller.Account, a.lookup, 1)
	if errors.Is(err, ledger.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, about(err, "link_id", l.ID)
	}
	h.noteAffinity(c, "reused", x)
	return x, nil
}

// cookieID returns the client id of r's affinity cookie when it has the
// shape the gateway gives one (22 base64url characters); anything else is
// no cookie at all.
func cookieID(r *http.Request) (string, bool) {
	ck, err := r.Cookie(affinityCookie)
	if err != nil || len(ck.Value) != clientIDLen {
		return "", false
	}
	if _, err := base64.RawURLEncoding.DecodeString(ck.Value); err != nil {
		return "", false
	}
	return ck.Value, true
}

// clientIDLen is the length of a client id: 16 random bytes in base64url.
const clientIDLen = 22

func newClientID() string {
	var b [16]byte
	rand.Read(b[:]) //nolint:errcheck // never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// addressKey names a client without a cookie by its address (trusted
// proxies applied, SPEC §8) and its exact User-Agent, hashed so that the
// key is short and holds neither.
func addressKey(r *http.Request, c auth.Caller) string {
	h := sha256.New()
	if c.Addr.IsValid() {
		h.Write([]byte(c.Addr.String()))
	}
	h.Write([]byte{0})
	h.Write([]byte(r.UserAgent()))
	return "u:" + base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:16])
}

// setClientCookie sets the client id of the request's client on the
// link's path until expires: the session's end for the session a request
// just minted (SPEC §5), the link's for the stream download of a link with
// retries (SPEC §1), so that the same browser's next click is known.
func (h *Handler) setClientCookie(w http.ResponseWriter, c *call, id string, expires time.Time) {
	maxAge := int(expires.Sub(h.Now()).Seconds())
	if maxAge < 1 {
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     affinityCookie,
		Value:    id,
		Path:     "/d/" + c.token,
		Expires:  expires.UTC(),
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   c.secure,
		SameSite: http.SameSiteLaxMode,
	})
}

// noteAffinity records on the access line how affinity answered and, for
// a request sent to an existing session, counts it on the session's grant
// (SPEC §5). That count is a record, not a decision: when the database
// cannot take it the request is still answered.
func (h *Handler) noteAffinity(c *call, how string, x *ledger.Session) {
	if c.info != nil {
		c.info.Affinity = how
	}
	if how != "reused" {
		return
	}
	h.Metrics.Sessions.WithLabelValues("affinity").Inc()
	if err := h.Claims.SessionNoteAffinityReuse(c.ctx, x.ID); err != nil {
		h.Log.WarnContext(c.ctx, "affinity reuse not recorded", "session_id", x.ID, "err", err)
	}
}

// retrier is who c is for the retries of a stream download of l (SPEC
// §1): as clientOf says on a link with retries, but a client with the
// gateway's cookie is that cookie alone, both for the grant it records
// and for the grant it retries (SPEC §5: the cookie, else address and
// User-Agent). So another browser behind the same address with the same
// User-Agent and a cookie of its own never takes this one's retry, and a
// grant a cookie holder downloaded is not another cookie holder's by its
// address. A client without the cookie is its address and User-Agent,
// and its grant records the cookie its 200 sets beside them, so that its
// browser's next click is known even from another address. Nobody on a
// link without retries, whose grants need no client keys.
func (h *Handler) retrier(c *call, l *ledger.Link) affinity {
	if l.Retries == 0 {
		return affinity{}
	}
	a := h.clientOf(c, l)
	if c.cookie != "" && len(a.keys) > 1 {
		a.keys = a.keys[:1]
		a.lookup = a.keys
	}
	return a
}
