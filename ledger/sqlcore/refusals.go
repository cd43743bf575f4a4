package sqlcore

import (
	"sync"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

// Refusals may be cached, grants never (SPEC §1). A link a claim saw
// unclaimable is kept with its row, and a later claim of it is answered
// from the row without a statement when the row still refuses that
// caller: revoked or expired, which last for good (a revocation is never
// undone, and the database's clock only moves on), or bound to another
// account, which is the caller's own refusal and lasts too; exhausted
// only for RefusalCache after the read, since a top-up may come from any
// process. A top-up, a refund or a revocation through this process
// forgets the link at once. The answer is the ClaimOutcome the database
// gave, its ReadAt moved on by the time since, as the database's clock
// would read now. Nothing is ever granted from here: a claim the row
// would not refuse goes to the database.
//
// The cache keeps rows, not answers: LinkClaim (by token hash) and
// SessionMint (by link id) both keep the row their transaction locked
// when it refuses their caller, and both judge a kept row for their own
// caller. What each may answer from it is its own (cachedRefusal,
// SessionMint's mintRefused).

// maxRefusals bounds the links the cache keeps.
const maxRefusals = 1 << 14

type refusals struct {
	mu     sync.RWMutex
	byHash map[string]refused // token hash → the refusing row
	byID   map[string]string  // link id → token hash
	// epoch counts the forgets: a refusal read before one is not kept,
	// since the row it read may be the one the top-up changed.
	epoch uint64
}

type refused struct {
	link ledger.Link // as the claim's transaction read it
	seen time.Time   // this process's clock when that transaction began
}

// keptByHash is what the cache keeps of the link of token hash hash.
func (s *DB) keptByHash(hash []byte) (refused, bool) {
	if s.RefusalCache <= 0 {
		return refused{}, false
	}
	c := &s.refusals
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.byHash[string(hash)]
	return e, ok
}

// keptByID is what the cache keeps of link id.
func (s *DB) keptByID(id string) (refused, bool) {
	if s.RefusalCache <= 0 {
		return refused{}, false
	}
	c := &s.refusals
	c.mu.RLock()
	defer c.mu.RUnlock()
	h, ok := c.byID[id]
	if !ok {
		return refused{}, false
	}
	e, ok := c.byHash[h]
	return e, ok
}

// refuses judges the kept row e for a claim by account now: the refusal
// the database would give, when it is one the cache may answer (revoked,
// expired, another account's; exhausted within RefusalCache of the read).
func (s *DB) refuses(e refused, account string) (ledger.ClaimOutcome, bool) {
	since := time.Since(e.seen)
	l := e.link
	l.ReadAt = ledger.Micro(l.ReadAt.Add(since))
	if s.DBClock != nil {
		l.ReadAt = ledger.Micro(s.DBClock())
	}
	switch r := l.Refusal(account, l.ReadAt); {
	case r == ledger.ReasonRevoked, r == ledger.ReasonExpired, r == ledger.ReasonWrongAccount,
		r == ledger.ReasonExhausted && since < s.RefusalCache:
		return ledger.ClaimOutcome{Link: &l, Refusal: r}, true
	}
	return ledger.ClaimOutcome{}, false
}

// cachedRefusal answers LinkClaim's claim of hash by account from the
// cache, when the row kept there refuses it and the GET would claim:
// a session link mints, and a confirm link's GET shows its landing page
// (neither answer is the claim's). A link with retries before the retry
// was asked (retriesChecked false) is answered only when no retry can be
// served either: revoked, expired or another account's, which
// GrantRetryBegin's condition refuses as well; an exhausted one may still
// serve its client's interrupted download again, which is not the
// cache's to know.
func (s *DB) cachedRefusal(hash []byte, account string, confirmed, retriesChecked bool) (ledger.ClaimOutcome, bool) {
	e, ok := s.keptByHash(hash)
	if !ok {
		return ledger.ClaimOutcome{}, false
	}
	o, ok := s.refuses(e, account)
	switch {
	case !ok, !o.Link.ClaimsAtOnce(confirmed, true):
		return ledger.ClaimOutcome{}, false
	case !retriesChecked && o.Link.Retries > 0 && o.Refusal == ledger.ReasonExhausted:
		return ledger.ClaimOutcome{}, false
	}
	return o, true
}

// refusalEpoch is the cache's epoch, to be handed to noteRefusal by a
// claim that starts now.
func (s *DB) refusalEpoch() uint64 {
	c := &s.refusals
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.epoch
}

// noteRefusal keeps l, the row a claim's transaction that began at
// began, in epoch, locked and found refusing its caller (by its reason,
// or, for a link the claim did not claim at once, by Link.Refusal).
func (s *DB) noteRefusal(l *ledger.Link, began time.Time, epoch uint64) {
	if s.RefusalCache <= 0 || l == nil {
		return
	}
	c := &s.refusals
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.epoch != epoch {
		return
	}
	if c.byHash == nil {
		c.byHash, c.byID = map[string]refused{}, map[string]string{}
	}
	hash := string(l.TokenHash)
	if _, ok := c.byHash[hash]; !ok && len(c.byHash) >= maxRefusals {
		// Full: let an eighth go, whichever the map hands out first.
		n := maxRefusals / 8
		for h, e := range c.byHash {
			delete(c.byHash, h)
			delete(c.byID, e.link.ID)
			if n--; n == 0 {
				break
			}
		}
	}
	c.byHash[hash] = refused{link: *l, seen: began}
	c.byID[l.ID] = hash
}

// forgetRefusal drops what the cache keeps of the link id: its allowance
// or its revocation changed through this process.
func (s *DB) forgetRefusal(id string) {
	c := &s.refusals
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	if h, ok := c.byID[id]; ok {
		delete(c.byHash, h)
		delete(c.byID, id)
	}
}
