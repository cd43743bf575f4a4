package refusal

import (
	"strconv"
	"testing"
)

func TestTokensLetThroughGenuineTokensRefusedTwice(t *testing.T) {
	for _, tc := range []struct {
		name    string
		genuine bool
		want    []int // Refused's answers, in order
		asked   int
	}{
		{"Genuine", true, []int{0, 2, 1, 1, 1}, 1},
		{"Forged", false, []int{0, 0, 0, 0, 0}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tokens := NewTokens(0)
			asked := 0
			check := func() bool { asked++; return tc.genuine }
			for i, want := range tc.want {
				if got := tokens.Refused("link", tokenA, check); got != want {
					t.Fatalf("refusal %d: Refused = %d, want %d", i+1, got, want)
				}
			}
			if asked != tc.asked {
				t.Errorf("genuine asked %d times, want %d", asked, tc.asked)
			}
		})
	}
}

func TestTokensOfAnotherKindAreOtherTokens(t *testing.T) {
	tokens := NewTokens(0)
	yes := func() bool { return true }
	tokens.Refused("link", tokenA, yes)
	if got := tokens.Refused("session", tokenA, yes); got != 0 {
		t.Errorf("first refusal of a session token = %d after one of the link token with its text, want 0", got)
	}
}

func TestTokensForgetWhatIsOverwritten(t *testing.T) {
	tokens := NewTokens(1)
	yes := func() bool { return true }
	for i, step := range []struct {
		tok  string
		want int
	}{{tokenA, 0}, {tokenA, 2}, {tokenB, 0}, {tokenA, 0}, {tokenA, 2}} {
		if got := tokens.Refused("link", step.tok, yes); got != step.want {
			t.Fatalf("step %d: Refused(%.4s…) = %d, want %d", i, step.tok, got, step.want)
		}
	}
}

func TestASprayOfTokensIsNeverChecked(t *testing.T) {
	tokens := NewTokens(0)
	check := func() bool { t.Fatal("genuine asked for a token refused once"); return false }
	for i := range 100000 {
		if got := tokens.Refused("link", strconv.Itoa(i), check); got != 0 {
			t.Fatalf("token %d: Refused = %d, want 0", i, got)
		}
	}
}

// BenchmarkTokensForged is the refusal of one forged token, again and
// again: what the limit adds to the cheapest 404.
func BenchmarkTokensForged(b *testing.B) {
	tokens := NewTokens(0)
	no := func() bool { return false }
	b.ReportAllocs()
	for b.Loop() {
		tokens.Refused("link", tokenA, no)
	}
}
