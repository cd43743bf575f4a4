package httpx

import "testing"

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
