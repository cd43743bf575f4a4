package ledgertest

import "testing"

// The entries of the suite: each runs the sentences of every area (a
// file of this folder each) against the ledgers newLedger makes.

// ExerciseClaims runs the parts of the suite that claim (by token,
// minting sessions, affinity, group claims, the refusal cache), for a
// backend to run them again in another mode of its own: with webhooks on
// (the claim writes its outbox rows in the same transaction), or with
// grouping off (ClaimBatch 1).
func ExerciseClaims(t *testing.T, newLedger NewLedger) {
	t.Run("Claims", func(t *testing.T) { exerciseClaims(t, newLedger) })
	t.Run("ClaimsByToken", func(t *testing.T) { exerciseClaimsByToken(t, newLedger) })
	t.Run("Sessions", func(t *testing.T) { exerciseSessions(t, newLedger) })
	t.Run("Affinity", func(t *testing.T) { exerciseAffinity(t, newLedger) })
	t.Run("ClientAffinity", func(t *testing.T) { exerciseClientAffinity(t, newLedger) })
	t.Run("GroupClaims", func(t *testing.T) { exerciseGroupClaims(t, newLedger) })
	t.Run("Refusals", func(t *testing.T) { exerciseRefusals(t, newLedger) })
}

// Exercise runs the whole suite.
func Exercise(t *testing.T, newLedger NewLedger) {
	t.Run("Links", func(t *testing.T) { exerciseLinks(t, newLedger) })
	t.Run("Claims", func(t *testing.T) { exerciseClaims(t, newLedger) })
	t.Run("ClaimsByToken", func(t *testing.T) { exerciseClaimsByToken(t, newLedger) })
	t.Run("Sessions", func(t *testing.T) { exerciseSessions(t, newLedger) })
	t.Run("GroupClaims", func(t *testing.T) { exerciseGroupClaims(t, newLedger) })
	t.Run("Refusals", func(t *testing.T) { exerciseRefusals(t, newLedger) })
	t.Run("Caps", func(t *testing.T) { exerciseCaps(t, newLedger) })
	t.Run("Listing", func(t *testing.T) { exerciseListing(t, newLedger) })
	t.Run("Affinity", func(t *testing.T) { exerciseAffinity(t, newLedger) })
	t.Run("ClientAffinity", func(t *testing.T) { exerciseClientAffinity(t, newLedger) })
	t.Run("Objects", func(t *testing.T) { exerciseObjects(t, newLedger) })
	t.Run("Digests", func(t *testing.T) { exerciseDigests(t, newLedger) })
	t.Run("Uploads", func(t *testing.T) { exerciseUploads(t, newLedger) })
	t.Run("Inputs", func(t *testing.T) { exerciseInputs(t, newLedger) })
	t.Run("Keys", func(t *testing.T) { exerciseKeys(t, newLedger) })
	t.Run("Console", func(t *testing.T) { exerciseConsole(t, newLedger) })
	t.Run("Views", func(t *testing.T) { exerciseViews(t, newLedger) })
}
