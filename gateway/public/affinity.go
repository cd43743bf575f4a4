package public

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/dlgate/dlgate/gateway/metrics"
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

// ValidAffinity reports whether mode is one of the affinity modes.
func ValidAffinity(mode string) bool {
	return mode == AffinityClient || mode == AffinityAccount || mode == AffinityOff
}

// affinityCookie names the cookie that carries a client's opaque id on one
// link's path. It is never a token: it opens nothing by itself, it only
// tells the gateway which of the link's sessions this client minted.
const affinityCookie = "dlgate_client"

// clientIDLen is the length of a client id: 16 random bytes in base64url.
const clientIDLen = 22

// clients knows who a request on a link URL is to the ledger (SPEC §5):
// how a request on a session-delivery link URL finds its client's
// session, and whose interrupted stream download a retry serves again
// (SPEC §1), under GATEWAY_SESSION_AFFINITY (mode).
type clients struct {
	mode       string
	claims     ledger.Claims
	deliveries ledger.Deliveries
	// retryLease is how long a retry's attempt stays in flight without a
	// renewal (stream.go renews it).
	retryLease time.Duration
	log        *slog.Logger
	metrics    *metrics.Metrics
	now        func() time.Time
}

// affinity is who a request is to the ledger on one link.
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

// session returns c's usable session of l, nil when it has none (or
// affinity does not apply).
func (k *clients) session(c *call, l *ledger.Link) (*ledger.Session, error) {
	a := k.of(c, l)
	if !a.on {
		return nil, nil
	}
	// need 1: a Range or a HEAD goes to a session with budget left, or
	// with a request of it still streaming (an unranged GET's mint asks
	// for the whole object instead, SessionMint).
	x, err := k.claims.SessionGetByAffinity(c.ctx, l.ID, c.caller.Account, a.lookup, 1)
	switch {
	case errors.Is(err, ledger.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	}
	k.note(c, "reused", x)
	return x, nil
}

// interrupted answers a GET or POST of a stream link with retries (SPEC
// §1, "Retries of an interrupted download"): it returns c's interrupted
// download of l to serve again under its grant, without a claim, while
// the link lives and retries are left, its attempt begun; nil when c has
// none, and then c claims as usual, the retry asked. GrantRetryBegin
// decides, by one conditional UPDATE, so of two concurrent retries of one
// grant one is served and the other is refused (409 retry-in-progress,
// errRetryInFlight), as is a retry while the grant's retry streams: a
// claim would spend a download of a link whose download this client has
// under way.
func (k *clients) interrupted(c *call, l *ledger.Link) (*ledger.Grant, error) {
	who := k.retrier(c, l)
	if !who.on {
		return nil, nil
	}
	g, err := k.deliveries.GrantRetryBegin(c.ctx, ledger.RetryRequest{LinkID: l.ID, AccountID: c.caller.Account, ClientKeys: who.lookup,
		Lease: k.retryLease})
	var busy *ledger.RetryInFlightError
	switch {
	case err == nil:
		k.log.InfoContext(c.ctx, "interrupted download served again", "link_id", l.ID, "grant_id", g.ID, "attempt", g.Delivery.Attempts)
		return g, nil
	case errors.As(err, &busy):
		c.grantID = busy.GrantID
		k.log.InfoContext(c.ctx, "retry refused: another retry of the grant is in flight", "link_id", l.ID, "grant_id", busy.GrantID)
		return nil, errRetryInFlight(busy)
	case errors.Is(err, ledger.ErrNotFound):
		return nil, nil
	}
	return nil, err
}

// of says whether and as whom c's requests on l go to c's session of it.
func (k *clients) of(c *call, l *ledger.Link) affinity {
	if l.Delivery != ledger.DeliverySession {
		return affinity{}
	}
	return k.clientOf(c, l)
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
func (k *clients) retrier(c *call, l *ledger.Link) affinity {
	if l.Retries == 0 {
		return affinity{}
	}
	a := k.clientOf(c, l)
	if c.cookie != "" && len(a.keys) > 1 {
		a.keys = a.keys[:1]
		a.lookup = a.keys
	}
	return a
}

// clientOf says whether and as whom the ledger knows c on l, as SPEC §5
// has it: for session affinity on a session link (of), and, as retrier
// narrows it, for the retries of an interrupted stream download on a
// stream link (SPEC §1).
func (k *clients) clientOf(c *call, l *ledger.Link) affinity {
	if k.mode == AffinityOff {
		return affinity{}
	}
	if l.AccountID != "" {
		// An account-bound link has one client per account, whatever
		// its cookies or address.
		return affinity{on: c.caller.Account == l.AccountID}
	}
	if k.mode != AffinityClient {
		return affinity{}
	}
	a := affinity{on: true, cookie: c.cookie}
	if a.cookie != "" {
		a.keys = []string{"c:" + a.cookie, addressKey(c)}
		a.lookup = a.keys
		return a
	}
	a.cookie = newClientID()
	a.keys = []string{"c:" + a.cookie, addressKey(c)}
	a.lookup = a.keys[1:]
	return a
}

// addressKey names c's client without a cookie by its address (trusted
// proxies applied, SPEC §8) and its exact User-Agent, hashed so that the
// key is short and holds neither. It is worked out once, when first asked
// for: most requests never need it.
func addressKey(c *call) string {
	if c.address == "" {
		addr := ""
		if c.caller.Addr.IsValid() {
			addr = c.caller.Addr.String()
		}
		sum := sha256.Sum256([]byte(addr + "\x00" + c.userAgent))
		c.address = "u:" + base64.RawURLEncoding.EncodeToString(sum[:16])
	}
	return c.address
}

func newClientID() string {
	var b [16]byte
	rand.Read(b[:]) //nolint:errcheck // never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// note records on the access line how affinity answered and, for a
// request sent to an existing session, counts it on the session's grant
// (SPEC §5). That count is a record, not a decision: when the database
// cannot take it the request is still answered.
func (k *clients) note(c *call, how string, x *ledger.Session) {
	if c.info != nil {
		c.info.Affinity = how
	}
	if how != "reused" {
		return
	}
	k.metrics.Sessions.WithLabelValues("affinity").Inc()
	if err := k.claims.SessionNoteAffinityReuse(c.ctx, x.ID); err != nil {
		k.log.WarnContext(c.ctx, "affinity reuse not recorded", "session_id", x.ID, "err", err)
	}
}

// setCookie sets the client id of c's client on the link's path until
// expires: the session's end for the session a request just minted (SPEC
// §5), the link's for the stream download of a link with retries (SPEC
// §1), so that the same browser's next click is known.
func (k *clients) setCookie(w http.ResponseWriter, c *call, id string, expires time.Time) {
	maxAge := int(expires.Sub(k.now()).Seconds())
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
