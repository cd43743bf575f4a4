package apikey

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseScope(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Scope
		ok   bool
	}{
		{"links:read", LinksRead, true},
		{"links:write", LinksWrite, true},
		{"objects:read", ObjectsRead, true},
		{"objects:write", ObjectsWrite, true},
		{"objects:delete", ObjectsDelete, true},
		{"sessions:write", SessionsWrite, true},
		{"audit:read", AuditRead, true},
		{"keys:write", KeysWrite, true},
		{"", "", false},
		{"links", "", false},
		{"Links:Read", "", false},
		{"links:read ", "", false},
		{"links:*", "", false},
		{"sessions:read", "", false},
		{"keys:read", "", false},
	} {
		got, err := ParseScope(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParseScope(%q) = %q, %v; want %q, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
		if !tc.ok && (!errors.Is(err, ErrUnknownScope) || !strings.Contains(err.Error(), `"`+tc.in+`"`)) {
			t.Errorf("ParseScope(%q) error %v does not wrap ErrUnknownScope naming the scope", tc.in, err)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in      []string
		want    []Scope
		unknown string // named by the error, "" when none
	}{
		{nil, nil, ""},
		{[]string{"keys:write", "links:read"}, []Scope{LinksRead, KeysWrite}, ""},
		{[]string{"links:read", "links:read"}, []Scope{LinksRead}, ""},
		{[]string{"audit:read", "audit:write", "nope"}, nil, "audit:write"},
		{[]string{"admin"}, nil, "admin"},
	} {
		got, err := Parse(tc.in)
		if tc.unknown != "" {
			if !errors.Is(err, ErrUnknownScope) || !strings.Contains(err.Error(), `"`+tc.unknown+`"`) || got != 0 {
				t.Errorf("Parse(%q) = %v, %v; want an error naming %q", tc.in, got, err, tc.unknown)
			}
			continue
		}
		if err != nil || !slices.Equal(got.List(), tc.want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", tc.in, got.List(), err, tc.want)
		}
	}
}

func TestScopesHasCoversAndMissing(t *testing.T) {
	reader := Of(LinksRead, AuditRead)
	writer := Of(LinksRead, LinksWrite, KeysWrite)
	for _, tc := range []struct {
		s, other Scopes
		covers   bool
		missing  []Scope
	}{
		{All(), All(), true, nil},
		{All(), reader, true, nil},
		{reader, reader, true, nil},
		{reader, 0, true, nil},
		{0, 0, true, nil},
		{0, reader, false, []Scope{LinksRead, AuditRead}},
		{reader, writer, false, []Scope{LinksWrite, KeysWrite}},
		{writer, reader, false, []Scope{AuditRead}},
		{writer, Of(LinksWrite), true, nil},
		{Of(KeysWrite), Of(KeysWrite, ObjectsDelete), false, []Scope{ObjectsDelete}},
	} {
		if got := tc.s.Covers(tc.other); got != tc.covers {
			t.Errorf("%q.Covers(%q) = %v, want %v", tc.s, tc.other, got, tc.covers)
		}
		if got := tc.s.Missing(tc.other); !slices.Equal(got, tc.missing) {
			t.Errorf("%q.Missing(%q) = %v, want %v", tc.s, tc.other, got, tc.missing)
		}
	}
	for _, sc := range known {
		if !All().Has(sc) || Scopes(0).Has(sc) {
			t.Errorf("Has(%q) wrong on the full or the empty set", sc)
		}
		if one := Of(sc); !one.Has(sc) || one.Len() != 1 {
			t.Errorf("Of(%q) = %q", sc, one)
		}
	}
	if reader.Has(LinksWrite) || reader.Has("links:*") || All().Has("") {
		t.Error("Has answers true for a scope not in the set, or an unknown one")
	}
	if n := All().Len(); n != 8 {
		t.Errorf("All().Len() = %d, want the 8 scopes of SPEC §6", n)
	}
}

func TestScopesTextRoundTrips(t *testing.T) {
	s := Of(KeysWrite, LinksRead, ObjectsDelete)
	if got, want := s.String(), "links:read objects:delete keys:write"; got != want {
		t.Errorf("String() = %q, want %q (canonical order)", got, want)
	}
	back, err := ParseText(s.String())
	if err != nil || back != s {
		t.Errorf("ParseText(%q) = %q, %v", s.String(), back, err)
	}
	b, err := json.Marshal(struct {
		Scopes []string `json:"scopes"`
		Set    Scopes   `json:"set"`
	}{Scopes(0).Strings(), s})
	if err != nil || string(b) != `{"scopes":[],"set":"links:read objects:delete keys:write"}` {
		t.Errorf("json = %s, %v", b, err)
	}
	var into Scopes
	if err := into.UnmarshalText([]byte("links:read bogus")); !errors.Is(err, ErrUnknownScope) {
		t.Errorf("UnmarshalText of an unknown scope = %v, want ErrUnknownScope", err)
	}
}

func TestNewKeyHasTheShapeAndItsHash(t *testing.T) {
	seen := map[string]bool{}
	for range 200 {
		key, hash := New()
		if Len != 47 || len(key) != Len || !strings.HasPrefix(key, "dlk_") || !Valid(key) {
			t.Fatalf("New() = %q: not dlk_ and 43 base64url characters", key)
		}
		raw, err := base64.RawURLEncoding.DecodeString(key[4:])
		if err != nil || len(raw) != 32 {
			t.Fatalf("New() = %q: body decodes to %d bytes, %v", key, len(raw), err)
		}
		sum := sha256.Sum256([]byte(key))
		if !bytes.Equal(hash, sum[:]) || !bytes.Equal(Hash(key), hash) || !Matches(key, hash) {
			t.Fatalf("New() hash is not the SHA-256 of the key's text")
		}
		if seen[key] {
			t.Fatalf("New() returned %q twice", key)
		}
		seen[key] = true
	}
}

func TestValid(t *testing.T) {
	good, _ := New()
	body := good[4:]
	// A body whose last character sets one of the two bits past the 256
	// of the secret: it decodes, but is not the one spelling of its bytes.
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	loose := body[:42] + string(alphabet[strings.IndexByte(alphabet, body[42])|1])
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{good, true},
		{"dlk_" + strings.Repeat("A", 43), true},
		{"", false},
		{"dlk_", false},
		{body, false},                     // no prefix
		{"DLK_" + body, false},            // prefix is case-sensitive
		{"dlk-" + body, false},            // wrong separator
		{"dlk_" + body[:42], false},       // short
		{"dlk_" + body + "A", false},      // long
		{"dlk_" + body[:42] + "=", false}, // padding
		{"dlk_" + body[:42] + "+", false}, // standard alphabet
		{"dlk_" + body[:42] + "/", false},
		{"dlk_" + body[:21] + "\n" + body[22:], false}, // the decoder would skip a newline
		{"dlk_" + loose, false},
		{" " + good, false},
	} {
		if got := Valid(tc.in); got != tc.ok {
			t.Errorf("Valid(%q) = %v, want %v", tc.in, got, tc.ok)
		}
	}
}

func TestMatchesAndEqual(t *testing.T) {
	key, hash := New()
	other, otherHash := New()
	if !Matches(key, hash) || Matches(other, hash) || Matches(key, otherHash) {
		t.Error("Matches confuses two keys")
	}
	if Matches(key, hash[:31]) || Matches(key, nil) || Matches(key, append(append([]byte(nil), hash...), 0)) {
		t.Error("Matches accepts a hash of the wrong length")
	}
	if !Equal("s3cret-admin-token", "s3cret-admin-token") || Equal("s3cret-admin-token", "s3cret-admin-tokem") ||
		Equal("s3cret", "s3cret-admin-token") || Equal("", "x") {
		t.Error("Equal is wrong")
	}
}

func TestNewSession(t *testing.T) {
	a, ha := NewSession()
	b, hb := NewSession()
	if a == b || bytes.Equal(ha, hb) {
		t.Fatal("two console sessions share a secret")
	}
	if len(a) != SessionLen || !ValidSession(a) || Valid(a) || !Matches(a, ha) {
		t.Fatalf("NewSession() = %q: not 43 base64url characters with its hash", a)
	}
	key, _ := New()
	for _, bad := range []string{"", key, a[:42], a + "A", strings.Repeat("*", 43)} {
		if ValidSession(bad) {
			t.Errorf("ValidSession(%q) = true", bad)
		}
	}
}

func BenchmarkValid(b *testing.B) {
	key, _ := New()
	for b.Loop() {
		if !Valid(key) {
			b.Fatal("invalid")
		}
	}
}
