package deliver

import (
	"net/http"

	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/sessions"
)

// bodyLayout is where the object's bytes lie in a response's body: its
// ranges in the order sent, each after its part header in a multipart
// body (RFC 9110 §14.6), which ends with its closing delimiter.
type bodyLayout struct {
	ranges []sessions.Range
	mp     *sessions.Multipart
}

// prefix maps the first n bytes of the body onto the object: how many of
// them are the object's (multipart framing excluded) and which byte
// ranges of the object they are.
func (b bodyLayout) prefix(n int64) (int64, sessions.Coverage) {
	var (
		off, got int64
		c        sessions.Coverage
	)
	for i, rg := range b.ranges {
		if b.mp != nil {
			off += int64(len(b.mp.PartHeader(i)))
		}
		if n <= off {
			break
		}
		k := min(rg.Length, n-off)
		c.Add(sessions.Range{Start: rg.Start, Length: k})
		got += k
		off += rg.Length
	}
	return got, c
}

// tlsSlack bounds the body bytes a cut response over TLS may have written
// that never reached the TLS connection: what net/http's buffers hold,
// the response's 2 KiB and the connection's 4 KiB.
const tlsSlack = 8 << 10

// settle completes res from what the connection carried of the written
// bytes of the body (c): the bytes that never left this host (Unsent:
// only once the connection was reset, since until then the kernel may
// still send them), and the body bytes the client's TCP acknowledged,
// mapped onto the object (Acked, Covered, Measured). Without counters
// (HTTP/2, another platform, a connection the gateway cannot see into)
// Acked is what was written, and Measured false.
//
// Over plain TCP the connection's bytes after the mark are the body's,
// so the acknowledged ones are exact. Over TLS they are records, each with
// its framing: a response all of whose bytes were acknowledged, sent
// whole, counts whole; otherwise the acknowledged records are counted
// less all the framing the response wrote (at most that much of them can
// be framing) and less tlsSlack, so the evidence errs low, never high.
func (b bodyLayout) settle(res *Result, written int64, c carried, overTLS, cut bool) {
	if !c.ok {
		res.Acked, res.Covered = b.prefix(written)
		return
	}
	if c.reset {
		left, _ := b.prefix(min(written, c.transmitted))
		res.Unsent = res.Sent - left
	}
	acked := min(c.acked, written)
	if overTLS {
		switch {
		case c.all && !cut && !c.reset:
			acked = written
		default:
			acked = c.acked - max(0, c.written-written) - tlsSlack
		}
	}
	res.Acked, res.Covered = b.prefix(max(0, acked))
	res.Measured = true
}

// note puts a response's delivery on its access line (SPEC §6: the
// access line of a download says its delivery): complete when the client
// acknowledged every object byte the response was to send (need),
// partial, or none.
func note(r *http.Request, res Result, need int64) {
	info := httpx.InfoOf(r)
	if info == nil {
		return
	}
	info.Delivery = string(Delivery(res.Acked, need))
	info.BytesAcked, info.AckMeasured = res.Acked, res.Measured
}

// Delivery is how much of need bytes acked is, in the ledger's terms.
func Delivery(acked, need int64) ledger.DeliveryStatus {
	switch {
	case acked >= need:
		return ledger.DeliveryComplete
	case acked > 0:
		return ledger.DeliveryPartial
	}
	return ledger.DeliveryNone
}
