package token

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
)

const rowID = "0192f000-0000-7000-8000-000000000001"

var (
	current  = []byte("current-secret-0123456789abcdef!")
	previous = []byte("previous-secret-0123456789abcdef")
	older    = []byte("older-secret-0123456789abcdef!!!")
	unknown  = []byte("unknown-secret-0123456789abcdef!")
)

func TestDeriveHasTokenShapeAndIsStable(t *testing.T) {
	ks := NewKeys(current)
	a := ks.Derive(Link, rowID)
	if !Base64URL(a, Len) {
		t.Fatalf("Derive = %q, not 43 base64url characters", a)
	}
	if b := NewKeys(current).Derive(Link, rowID); a != b {
		t.Fatalf("Derive not deterministic: %q vs %q", a, b)
	}
	if s := ks.Derive(Session, rowID); s == a {
		t.Fatalf("link and session tokens of one id are equal: %q", s)
	}
	if o := NewKeys(unknown).Derive(Link, rowID); o == a {
		t.Fatalf("tokens under two secrets are equal")
	}
	if o := ks.Derive(Link, rowID+"2"); o[:21] == a[:21] {
		t.Fatalf("id parts of two rows share a prefix: %q, %q", o, a)
	}
}

// TestDeriveFollowsTheFormat recomputes a token from the documented
// construction, so the format cannot drift without this test noticing.
func TestDeriveFollowsTheFormat(t *testing.T) {
	mac := func(msg string) []byte {
		m := hmac.New(sha256.New, current)
		m.Write([]byte(msg))
		return m.Sum(nil)[:16]
	}
	id := mac("dlgate/v2/session/id\x00" + rowID)
	tag := mac("dlgate/v2/session/tag\x00" + string(id))
	want := base64.RawURLEncoding.EncodeToString(append(id, tag...))
	if got := NewKeys(current).Derive(Session, rowID); got != want {
		t.Fatalf("Derive(Session, %q) = %q, want %q", rowID, got, want)
	}
}

// flip returns tok with bit of its decoded byte i inverted, re-encoded.
func flip(tok string, i int, bit byte) string {
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		panic(err)
	}
	raw[i] ^= bit
	return base64.RawURLEncoding.EncodeToString(raw)
}

func TestCheck(t *testing.T) {
	ks := NewKeys(current, previous, older)
	link := ks.Derive(Link, rowID)
	session := ks.Derive(Session, rowID)
	underPrevious := NewKeys(previous).Derive(Link, rowID)
	underOlder := NewKeys(older).Derive(Session, rowID)
	underUnknown := NewKeys(unknown).Derive(Link, rowID)

	raw, _ := base64.RawURLEncoding.DecodeString(link)
	forged := base64.RawURLEncoding.EncodeToString(append(raw[:16:16], bytes.Repeat([]byte{0xA5}, 16)...))
	// The last character carries 6 bits of which only the top 4 are data
	// (32 bytes = 256 bits = 42×6 + 4): setting a spare bit keeps the
	// decoded bytes but changes the text.
	last := strings.IndexByte(base64URL, link[Len-1])
	nonCanonical := link[:Len-1] + string(base64URL[last|1])

	cases := []struct {
		name string
		kind Kind
		tok  string
		want bool
	}{
		{"Link", Link, link, true},
		{"Session", Session, session, true},
		{"LinkCheckedAsSession", Session, link, false},
		{"SessionCheckedAsLink", Link, session, false},
		{"UnderPreviousSecret", Link, underPrevious, true},
		{"UnderSecondPreviousSecret", Session, underOlder, true},
		{"UnderUnknownSecret", Link, underUnknown, false},
		{"ForgedTag", Link, forged, false},
		{"FlippedBitInIDPart", Link, flip(link, 0, 0x01), false},
		{"FlippedLastBitOfIDPart", Link, flip(link, 15, 0x80), false},
		{"FlippedBitInTag", Link, flip(link, 16, 0x10), false},
		{"FlippedLastBitOfTag", Link, flip(link, 31, 0x01), false},
		{"NonCanonicalTrailingBits", Link, nonCanonical, false},
		{"StandardAlphabetPlus", Link, "+" + link[1:], false},
		{"StandardAlphabetSlash", Link, link[:Len-1] + "/", false},
		{"Padded", Link, link + "=", false},
		{"TooShort", Link, link[:Len-1], false},
		{"TooLong", Link, link + "A", false},
		{"LineFeedInside", Link, link[:20] + "\n" + link[21:], false},
		{"NonASCII", Link, link[:Len-1] + "é"[:1], false},
		{"Empty", Link, "", false},
		{"AllA", Link, strings.Repeat("A", Len), false},
	}
	for _, c := range cases {
		if got := ks.Check(c.kind, c.tok); got != c.want {
			t.Errorf("%s: Check(%s, %q) = %v, want %v", c.name, c.kind, c.tok, got, c.want)
		}
	}
	if NewKeys(current).Check(Link, underPrevious) {
		t.Errorf("Check accepts a previous secret's token once that secret is dropped")
	}
}

const base64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"

func TestDeriveAllAndMatch(t *testing.T) {
	ks := NewKeys(current, previous)
	all := ks.DeriveAll(Link, rowID)
	want := []string{NewKeys(current).Derive(Link, rowID), NewKeys(previous).Derive(Link, rowID)}
	if len(all) != 2 || all[0] != want[0] || all[1] != want[1] {
		t.Fatalf("DeriveAll = %q, want %q", all, want)
	}
	for _, w := range want {
		if got, ok := ks.Match(Link, rowID, Hash(w)); got != w || !ok {
			t.Errorf("Match(Hash(%q)) = %q, %v, want it, true", w, got, ok)
		}
	}
	stale := NewKeys(unknown).Derive(Link, rowID)
	if got, ok := ks.Match(Link, rowID, Hash(stale)); got != want[0] || ok {
		t.Errorf("Match(unknown secret's hash) = %q, %v, want %q, false", got, ok, want[0])
	}
}

func TestNewKeysCopiesSecrets(t *testing.T) {
	secret := append([]byte(nil), current...)
	ks := NewKeys(secret)
	tok := ks.Derive(Link, rowID)
	secret[0] ^= 0xff
	if !ks.Check(Link, tok) || ks.Derive(Link, rowID) != tok {
		t.Fatal("changing the caller's slice changed the Keys")
	}
}

func TestHashIsSHA256OfText(t *testing.T) {
	h := Hash("abc")
	want := []byte{0xba, 0x78, 0x16, 0xbf}
	if len(h) != 32 || !bytes.Equal(h[:4], want) {
		t.Fatalf("Hash(abc) = %x", h)
	}
}

func BenchmarkCheck(b *testing.B) {
	for _, bc := range []struct {
		name string
		ks   *Keys
		tok  string
	}{
		{"Current", NewKeys(current, previous), NewKeys(current).Derive(Link, rowID)},
		{"Previous", NewKeys(current, previous), NewKeys(previous).Derive(Link, rowID)},
		{"Forged", NewKeys(current, previous), NewKeys(unknown).Derive(Link, rowID)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			want := bc.name != "Forged"
			for b.Loop() {
				if bc.ks.Check(Link, bc.tok) != want {
					b.Fatal("wrong answer")
				}
			}
		})
	}
}

func BenchmarkCheckParallel(b *testing.B) {
	ks := NewKeys(current, previous)
	tok := ks.Derive(Link, rowID)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if !ks.Check(Link, tok) {
				b.Fatal("wrong answer")
			}
		}
	})
}
