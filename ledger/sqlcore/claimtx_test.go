package sqlcore

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlgate/dlgate/ledger"
	"github.com/dlgate/dlgate/ledger/sqlcore/engine"
)

// lockedLink is a locked row of a stream link with remaining downloads,
// bound to account ("" for none), read at now.
func lockedLink(id string, remaining int, account string, now time.Time) *lockedRow {
	l := ledger.Link{ID: id, TokenHash: []byte(id), Allowance: 10, Remaining: remaining, AccountID: account,
		ExpiresAt: now.Add(time.Hour), Delivery: ledger.DeliveryStream, ReadAt: now}
	return &lockedRow{link: l, remaining: remaining}
}

// claimsOf are claims of link id by the accounts given, in that order of
// arrival, each with a client naming its place.
func claimsOf(id string, accounts ...string) []*claim {
	var out []*claim
	for i, a := range accounts {
		req := ledger.ClaimRequest{AccountID: a, Kind: ledger.KindStream, Client: "c" + string(rune('0'+i))}
		out = append(out, &claim{hash: []byte(id), linkID: id, req: req, grant: newGrant(req, time.Now(), "")})
	}
	return out
}

func TestKClaimsOfOneLinkInOneBatchDecrementItOnce(t *testing.T) {
	db := mustScripted(t, &scriptedDB{})
	now := time.Now().UTC()
	rows := map[string]*lockedRow{"L": lockedLink("L", 3, "", now)}
	batch := claimsOf("L", "", "", "", "", "")
	w, err := db.judge(batch, rows, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	var updates []engine.Stmt
	for _, st := range w.Stmts {
		if strings.HasPrefix(st.SQL, "UPDATE links") {
			updates = append(updates, st)
		}
	}
	if len(updates) != 1 || updates[0].Args[0] != "L" || updates[0].Args[1] != 3 || updates[0].Rows != 1 {
		t.Fatalf("writes %+v; want one UPDATE of links taking 3 from one row", w.Stmts)
	}
	if !w.Commit || len(w.Stmts) != 2 || w.Stmts[1].Rows != 3 || !strings.HasPrefix(w.Stmts[1].SQL, "INSERT INTO grants") {
		t.Fatalf("writes %+v; want the decrement and one INSERT of 3 grants, committed", w.Stmts)
	}
	for i, c := range batch {
		if granted := i < 3; c.granted != granted || !granted && c.refusal != ledger.ReasonExhausted {
			t.Errorf("claim %d of 5 on 3 remaining: granted %v, refusal %q; the first 3 to arrive are granted", i, c.granted, c.refusal)
		}
		if c.granted && (c.link.Remaining != 2-i || c.grant.LinkID != "L") {
			t.Errorf("claim %d: row remaining %d, grant of %q; want %d (as its own claim left it) and L", i, c.link.Remaining, c.grant.LinkID, 2-i)
		}
	}
}

func TestClaimsAreJudgedInArrivalOrderEachByItsAccount(t *testing.T) {
	db := mustScripted(t, &scriptedDB{})
	now := time.Now().UTC()
	rows := map[string]*lockedRow{"A": lockedLink("A", 1, "alice", now)}
	batch := claimsOf("A", "mallory", "alice", "alice", "")
	w, err := db.judge(batch, rows, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []ledger.Reason{ledger.ReasonWrongAccount, "", ledger.ReasonExhausted, ledger.ReasonWrongAccount}
	for i, c := range batch {
		if c.refusal != want[i] || c.granted != (want[i] == "") {
			t.Errorf("claim %d (%q): granted %v, refusal %q; want refusal %q", i, c.req.AccountID, c.granted, c.refusal, want[i])
		}
	}
	// The decrement's condition names the account the grant was judged for.
	if up := w.Stmts[0]; !slices.Contains(up.Args, any("alice")) {
		t.Fatalf("decrement %q %v; want alice's account in its condition", up.SQL, up.Args)
	}
}

func TestABatchLocksItsRowsInIDOrder(t *testing.T) {
	db := mustScripted(t, &scriptedDB{})
	db.D.LockRows = " FOR UPDATE"
	var batch []*claim
	for _, id := range []string{"c", "a", "b", "a"} {
		batch = append(batch, claimsOf(id, "")...)
	}
	st := db.lockRows(batch)
	if !strings.HasSuffix(st.SQL, "WHERE id IN (?, ?, ?) ORDER BY id FOR UPDATE") {
		t.Fatalf("lock read %q; want the rows by id, in id order, locked", st.SQL)
	}
	if got := st.Args[1:]; !slices.Equal(got, []any{"a", "b", "c"}) {
		t.Fatalf("lock read's ids %v; want a, b, c", got)
	}
	// A batch of one token hash locks its one row by the hash.
	one := claimsOf("x", "", "")
	for _, c := range one {
		c.linkID = ""
	}
	if st := db.lockRows(one); !strings.HasSuffix(st.SQL, "WHERE token_hash = ? FOR UPDATE") {
		t.Fatalf("lock read of one hash %q; want it by the hash", st.SQL)
	}
}

func TestAGrantInABatchOfManyLinksDecrementsEachByItsOwn(t *testing.T) {
	db := mustScripted(t, &scriptedDB{})
	now := time.Now().UTC()
	rows := map[string]*lockedRow{"a": lockedLink("a", 5, "", now), "b": lockedLink("b", 1, "", now)}
	batch := append(claimsOf("b", "", ""), claimsOf("a", "", "")...)
	w, err := db.judge(batch, rows, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	up := w.Stmts[0]
	if !strings.Contains(up.SQL, "CASE id WHEN ? THEN ? WHEN ? THEN ? END") || up.Rows != 2 {
		t.Fatalf("decrement %q (rows %d); want one UPDATE of both rows by CASE", up.SQL, up.Rows)
	}
	if got := up.Args[:4]; !slices.Equal(got, []any{"a", 2, "b", 1}) {
		t.Fatalf("decrement takes %v; want a: 2, b: 1 (its one remaining)", got)
	}
	if w.Stmts[1].Rows != 3 {
		t.Fatalf("grants %+v; want 3", w.Stmts[1])
	}
}
