package sqlcore

import (
	"sync"
	"time"

	"github.com/dlgate/dlgate/ledger"
)

// Refusals may be cached, grants never (SPEC §1). A link LinkClaim saw
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

// DefaultRefusalCache is DB.RefusalCache when none is set
// (GATEWAY_REFUSAL_CACHE).
const DefaultRefusalCache = time.Second

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

// cachedRefusal answers the claim of hash by account from the cache, when
// the row kept there refuses it. A link a GET does not claim at once (a
// link with retries before the retry was asked, retriesChecked false) is
// never answered from it: its answer is not the claim's.
func (s *DB) cachedRefusal(hash []byte, account string, confirmed, retriesChecked bool) (ledger.ClaimOutcome, bool) {
	if s.RefusalCache <= 0 {
		return ledger.ClaimOutcome{}, false
	}
	c := &s.refusals
	c.mu.RLock()
	e, ok := c.byHash[string(hash)]
	c.mu.RUnlock()
	if !ok {
		return ledger.ClaimOutcome{}, false
	}
	since := time.Since(e.seen)
	l := e.link
	l.ReadAt = ledger.Micro(l.ReadAt.Add(since))
	if s.DBClock != nil {
		l.ReadAt = ledger.Micro(s.DBClock())
	}
	if !l.ClaimsAtOnce(confirmed, retriesChecked) {
		return ledger.ClaimOutcome{}, false
	}
	switch r := l.Refusal(account, l.ReadAt); {
	case r == ledger.ReasonRevoked, r == ledger.ReasonExpired, r == ledger.ReasonWrongAccount,
		r == ledger.ReasonExhausted && since < s.RefusalCache:
		return ledger.ClaimOutcome{Link: &l, Refusal: r}, true
	}
	return ledger.ClaimOutcome{}, false
}

// refusalEpoch is the cache's epoch, to be handed to noteRefusal by a
// claim that starts now.
func (s *DB) refusalEpoch() uint64 {
	c := &s.refusals
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.epoch
}

// noteRefusal keeps the row of a refused claim of hash, read by a
// transaction that began at began, in epoch.
func (s *DB) noteRefusal(hash []byte, o ledger.ClaimOutcome, began time.Time, epoch uint64) {
	if s.RefusalCache <= 0 || o.Link == nil || o.Refusal == "" || o.Grant != nil {
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
	if _, ok := c.byHash[string(hash)]; !ok && len(c.byHash) >= maxRefusals {
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
	c.byHash[string(hash)] = refused{link: *o.Link, seen: began}
	c.byID[o.Link.ID] = string(hash)
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
