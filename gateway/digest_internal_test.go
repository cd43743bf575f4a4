package gateway

import (
	"testing"

	"github.com/dunglas/httpsfv"
)

func TestStructuredDictionariesParseAsRFC8941Says(t *testing.T) {
	for _, tt := range []struct {
		in    string
		valid bool
	}{
		{"sha-256=10", true},
		{"sha-512=3, sha-256=10, unixsum=0", true},
		{"sha-256=0;q=1", true},
		{"sha-256", true}, // a bare key is true
		{"  sha-256=1  ", true},
		{"sha-256=1,\tsha-512=2", true},
		{`a, b=?0, c=:aGk=:, d="x\"y", e=tok/en:x, f=1.5, *g=-3, h=(1 "two" three);p, i=()`, true},
		{"a=1;b;c=?1;d=tok", true},
		{"a=123456789012345", true},
		{"a=123456789012.123", true},
		{"", true},
		{"sha-256=", false},
		{"SHA-256=1", false},
		{"sha-256=1,", false},
		{"sha-256=1 x", false},
		{"=1", false},
		{"1a=1", false},
		{`a="unterminated`, false},
		{`a="bad \q escape"`, false},
		{"a=1.", false},
		{"a=1.2345", false},
		{"a=1234567890123456", false},
		{"a=1234567890123.1", false},
		{"a=:not base64!:", false},
		{"a=:unterminated", false},
		{"a=?2", false},
		{"a=(1 2", false},
		{"a=(1,2)", false},
		{"a=-", false},
		{"a=1;", false},
		{"a=1;B=2", false},
		{"a=1,,b=2", false},
		{"a=é", false},
	} {
		_, err := sfDictionary([]string{tt.in})
		if (err == nil) != tt.valid {
			t.Errorf("sfDictionary(%q) = %v, want valid %v", tt.in, err, tt.valid)
		}
		// A second, independent RFC 8941 parser agrees.
		if _, err := httpsfv.UnmarshalDictionary([]string{tt.in}); (err == nil) != tt.valid {
			t.Errorf("httpsfv.UnmarshalDictionary(%q) = %v, want valid %v (the table is wrong)", tt.in, err, tt.valid)
		}
	}
}

func TestDigestPreferencesOnlyEverLeaveOutWhatIsRefused(t *testing.T) {
	for _, tt := range []struct {
		field  []string
		accept bool
	}{
		{nil, true},
		{[]string{"sha-256=1"}, true},
		{[]string{"sha-512=3, sha-256=10, unixsum=0"}, true},
		{[]string{"sha-512=10"}, true},     // a hint: we send what we have
		{[]string{"sha-256=0"}, false},     // "not acceptable" (RFC 9530 §4)
		{[]string{"sha-256=0;x=1"}, false}, // parameters change nothing
		{[]string{"sha-512=3", "sha-256=0"}, false},
		{[]string{"sha-256=0, sha-256=4"}, true}, // the last member wins
		{[]string{"sha-256=0,"}, true},           // not a dictionary: as if absent
		{[]string{"sha-256=?0"}, true},           // not an integer preference
		{[]string{"garbage!!"}, true},
	} {
		if got := acceptsReprDigest(tt.field); got != tt.accept {
			t.Errorf("acceptsReprDigest(%q) = %v, want %v", tt.field, got, tt.accept)
		}
	}
	for _, tt := range []struct {
		field  []string
		accept bool
	}{
		{nil, true},
		{[]string{"SHA-512;q=1, SHA-256;q=1, SHA;q=0.1"}, true}, // aria2c 1.36
		{[]string{"sha-256"}, true},
		{[]string{"MD5;q=0.3, sha;q=1"}, true},
		{[]string{"SHA-256;q=0"}, false},
		{[]string{"sha-256 ; Q = 0.000"}, false},
		{[]string{"md5", "SHA-256;q=0"}, false},
		{[]string{"SHA-256;q=zero"}, true},
		{[]string{";;;,,,"}, true},
	} {
		if got := acceptsDigest(tt.field); got != tt.accept {
			t.Errorf("acceptsDigest(%q) = %v, want %v", tt.field, got, tt.accept)
		}
	}
}
