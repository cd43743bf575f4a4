package token

import (
	"bytes"
	"strings"
	"testing"
)

func TestDeriveHasTokenShapeAndIsStable(t *testing.T) {
	secret := []byte("s3cret")
	a := Derive(secret, Link, "0192f000-0000-7000-8000-000000000001")
	if !Valid(a) {
		t.Fatalf("Derive = %q, not a valid token", a)
	}
	if b := Derive(secret, Link, "0192f000-0000-7000-8000-000000000001"); a != b {
		t.Fatalf("Derive not deterministic: %q vs %q", a, b)
	}
	if s := Derive(secret, Session, "0192f000-0000-7000-8000-000000000001"); s == a {
		t.Fatalf("link and session tokens of one id are equal: %q", s)
	}
	if o := Derive([]byte("other"), Link, "0192f000-0000-7000-8000-000000000001"); o == a {
		t.Fatalf("tokens under two secrets are equal")
	}
}

func TestValid(t *testing.T) {
	good := strings.Repeat("aZ09-_", 7) + "x"
	cases := []struct {
		in   string
		want bool
	}{
		{good, true},
		{good[:42], false},
		{good + "a", false},
		{strings.Repeat("a", 42) + "=", false},
		{strings.Repeat("a", 42) + "/", false},
		{strings.Repeat("a", 42) + "+", false},
		{strings.Repeat("a", 42) + "é"[:1], false},
		{"", false},
	}
	for _, c := range cases {
		if got := Valid(c.in); got != c.want {
			t.Errorf("Valid(%q) = %v, want %v", c.in, got, c.want)
		}
	}
}

func TestHashIsSHA256OfText(t *testing.T) {
	h := Hash("abc")
	want := []byte{0xba, 0x78, 0x16, 0xbf}
	if len(h) != 32 || !bytes.Equal(h[:4], want) {
		t.Fatalf("Hash(abc) = %x", h)
	}
}
