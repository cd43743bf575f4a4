package refusal

import (
	"hash/maphash"
	"sync/atomic"
)

// Tokens remembers, per token and without any client, whether it was
// refused before and whether it is genuine (a token the gateway minted,
// judged by a check the caller supplies). It keeps the cheapest refusal
// cheap: a token nobody has been refused twice (a spray of random ones)
// and a token that is not genuine (a forged one, however often it comes
// back) cost one hash and one atomic load, and are never counted against
// a client; only a genuine token, whose refusal looked a row up, goes on
// to the Limiter.
//
// It is a direct-mapped table of words, without locks: a token takes the
// slot its hash names and overwrites whatever was there. A lost race or
// an overwritten slot costs at worst one more check, or one refusal not
// counted.
type Tokens struct {
	seed  maphash.Seed
	slots []atomic.Uint64
}

// The state of a slot is in the two low bits of its word; the other bits
// are the token's hash, so a slot of another token never matches.
const (
	stateMask    = 3
	seenOnce     = 1
	knownGenuine = 2
	knownForged  = 3
)

// NewTokens returns a table of n slots (DefaultEntries when n <= 0).
func NewTokens(n int) *Tokens {
	if n <= 0 {
		n = DefaultEntries
	}
	return &Tokens{seed: maphash.MakeSeed(), slots: make([]atomic.Uint64, n)}
}

// Refused records a refusal of tok (of kind) and returns how many
// refusals the Limiter should count for the client that drew it:
//
//   - 0 for the first refusal of a token the table does not remember,
//     and for a token that is not genuine;
//   - 1 for a token known genuine;
//   - 2 for the second refusal of a token, when genuine says it is
//     genuine: the first refusal is taken to be the same client's, which
//     is exact for one client retrying in a loop, the case this is for.
//
// genuine is asked at most once per token while the table remembers it.
func (t *Tokens) Refused(kind, tok string, genuine func() bool) int {
	var h maphash.Hash
	h.SetSeed(t.seed)
	h.WriteString(kind)
	h.WriteByte(0)
	h.WriteString(tok)
	sum := h.Sum64()
	slot := &t.slots[sum%uint64(len(t.slots))]
	tag := sum &^ stateMask
	w := slot.Load()
	if w&^stateMask != tag || w&stateMask == 0 {
		slot.Store(tag | seenOnce)
		return 0
	}
	switch w & stateMask {
	case knownGenuine:
		return 1
	case knownForged:
		return 0
	}
	if !genuine() {
		slot.Store(tag | knownForged)
		return 0
	}
	slot.Store(tag | knownGenuine)
	return 2
}
