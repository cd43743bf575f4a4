package auth_test

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/dlgate/dlgate/auth"
)

func TestClientAddr(t *testing.T) {
	trusted := mustPrefixes(t, "10.0.0.0/8, 127.0.0.1, 2001:db8:ffff::/48")
	cases := []struct {
		name   string
		remote string
		header []string
		want   string
	}{
		{"DirectClient", "198.51.100.7:4711", nil, "198.51.100.7"},
		{"SpoofedXFFFromAnUntrustedPeerIsIgnored", "198.51.100.7:4711", []string{"X-Forwarded-For", "203.0.113.9"}, "198.51.100.7"},
		{"SpoofedForwardedFromAnUntrustedPeerIsIgnored", "198.51.100.7:4711", []string{"Forwarded", "for=203.0.113.9"}, "198.51.100.7"},
		{"TrustedPeerWithoutHeaders", "10.0.0.5:4711", nil, "10.0.0.5"},
		{"TrustedProxy", "10.0.0.5:4711", []string{"X-Forwarded-For", "203.0.113.9"}, "203.0.113.9"},
		{"TwoTrustedProxies", "10.0.0.5:4711", []string{"X-Forwarded-For", "203.0.113.9, 10.1.1.1"}, "203.0.113.9"},
		{"ClientSpoofsLeftOfTheProxy", "10.0.0.5:4711", []string{"X-Forwarded-For", "1.2.3.4, 203.0.113.9, 10.1.1.1"}, "203.0.113.9"},
		{"SeveralXFFLines", "10.0.0.5:4711", []string{"X-Forwarded-For", "1.2.3.4", "X-Forwarded-For", "203.0.113.9, 10.1.1.1"}, "203.0.113.9"},
		{"SeveralXFFLinesRightmostInTheLastLine", "10.0.0.5:4711", []string{"X-Forwarded-For", "203.0.113.9", "X-Forwarded-For", "198.51.100.7"}, "198.51.100.7"},
		{"XFFEntryWithPort", "10.0.0.5:4711", []string{"X-Forwarded-For", "203.0.113.9:5555"}, "203.0.113.9"},
		{"XFFIPv6", "10.0.0.5:4711", []string{"X-Forwarded-For", "2001:db8::1"}, "2001:db8::1"},
		{"XFFBracketedIPv6WithPort", "10.0.0.5:4711", []string{"X-Forwarded-For", "[2001:db8::1]:5555"}, "2001:db8::1"},
		{"XFFIPv6WithZone", "10.0.0.5:4711", []string{"X-Forwarded-For", "fe80::1%eth0"}, "fe80::1"},
		{"XFFIPv4MappedIPv6", "10.0.0.5:4711", []string{"X-Forwarded-For", "::ffff:203.0.113.9"}, "203.0.113.9"},
		{"TrustedIPv6Proxy", "[2001:db8:ffff::2]:443", []string{"X-Forwarded-For", "2001:db8::1, 2001:db8:ffff::3"}, "2001:db8::1"},
		{"TrustedPeerAsIPv4MappedIPv6", "[::ffff:10.0.0.5]:4711", []string{"X-Forwarded-For", "203.0.113.9"}, "203.0.113.9"},
		{"GarbageRightmostFallsBackToThePeer", "10.0.0.5:4711", []string{"X-Forwarded-For", "203.0.113.9, bogus"}, "10.0.0.5"},
		{"GarbageLeftOfTheClientDoesNotMatter", "10.0.0.5:4711", []string{"X-Forwarded-For", "bogus, 203.0.113.9"}, "203.0.113.9"},
		{"UnspecifiedAddressIsGarbage", "10.0.0.5:4711", []string{"X-Forwarded-For", "0.0.0.0"}, "10.0.0.5"},
		{"EmptyXFF", "10.0.0.5:4711", []string{"X-Forwarded-For", ""}, "10.0.0.5"},
		{"AllEntriesTrusted", "10.0.0.5:4711", []string{"X-Forwarded-For", "10.2.2.2, 10.1.1.1"}, "10.0.0.5"},
		{"Forwarded", "10.0.0.5:4711", []string{"Forwarded", "for=192.0.2.60;proto=http;by=203.0.113.43"}, "192.0.2.60"},
		{"ForwardedCaseAndSpaces", "10.0.0.5:4711", []string{"Forwarded", "For=192.0.2.60 ; proto=https"}, "192.0.2.60"},
		{"ForwardedSeveralHops", "10.0.0.5:4711", []string{"Forwarded", "for=1.2.3.4, for=192.0.2.60, for=10.1.1.1"}, "192.0.2.60"},
		{"ForwardedQuotedIPv6WithPort", "10.0.0.5:4711", []string{"Forwarded", `for="[2001:db8:cafe::17]:4711"`}, "2001:db8:cafe::17"},
		{"ForwardedLoopbackIPv6WithPort", "10.0.0.5:4711", []string{"Forwarded", `for="[::1]:8080"`}, "::1"},
		{"ForwardedIPv6WithZone", "10.0.0.5:4711", []string{"Forwarded", `for="[fe80::1%25eth0]"`}, "fe80::1"},
		{"ForwardedUnknown", "10.0.0.5:4711", []string{"Forwarded", "for=unknown"}, "10.0.0.5"},
		{"ForwardedObfuscated", "10.0.0.5:4711", []string{"Forwarded", "for=_hidden, for=10.1.1.1"}, "10.0.0.5"},
		{"ForwardedWithoutFor", "10.0.0.5:4711", []string{"Forwarded", "proto=https;by=10.0.0.5"}, "10.0.0.5"},
		{"XFFWinsOverForwarded", "10.0.0.5:4711", []string{"X-Forwarded-For", "203.0.113.9", "Forwarded", "for=192.0.2.60"}, "203.0.113.9"},
		{"LoopbackPeerTrustedByAddress", "127.0.0.1:4711", []string{"X-Forwarded-For", "203.0.113.9"}, "203.0.113.9"},
		{"LoopbackPeerOutsideTheTrustedAddress", "127.0.0.2:4711", []string{"X-Forwarded-For", "203.0.113.9"}, "127.0.0.2"},
		{"IPv6PeerWithZone", "[fe80::1%eth0]:4711", nil, "fe80::1"},
		{"PeerWithoutPort", "198.51.100.7", nil, "198.51.100.7"},
		{"UnixSocketPeer", "@", []string{"X-Forwarded-For", "203.0.113.9"}, "invalid IP"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := newRequest(tc.remote, tc.header...)
			if got := auth.ClientAddr(r, trusted); got.String() != tc.want {
				t.Errorf("ClientAddr(%q, %q) = %v, want %s", tc.remote, tc.header, got, tc.want)
			}
		})
	}
	t.Run("NothingTrusted", func(t *testing.T) {
		r := newRequest("10.0.0.5:4711", "X-Forwarded-For", "203.0.113.9")
		if got := auth.ClientAddr(r, nil); got.String() != "10.0.0.5" {
			t.Errorf("ClientAddr = %v, want the peer", got)
		}
	})
}

func TestParsePrefixes(t *testing.T) {
	cases := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"", nil, false},
		{" , ", nil, false},
		{"10.0.0.0/8", []string{"10.0.0.0/8"}, false},
		{"10.0.0.0/8, 192.0.2.7 ,fd00::/8", []string{"10.0.0.0/8", "192.0.2.7/32", "fd00::/8"}, false},
		{"::1", []string{"::1/128"}, false},
		{"10.1.2.3/8", []string{"10.0.0.0/8"}, false},
		{"::ffff:10.0.0.0/104", []string{"10.0.0.0/8"}, false},
		{"::ffff:192.0.2.7", []string{"192.0.2.7/32"}, false},
		{"10.0.0.0/33", nil, true},
		{"garbage", nil, true},
		{"10.0.0.0/8, garbage", nil, true},
		{"fe80::1%eth0", nil, true},
		{"192.0.2.7:80", nil, true},
	}
	for _, tc := range cases {
		got, err := auth.ParsePrefixes(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("ParsePrefixes(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if err != nil {
			if !contains(err.Error(), "GATEWAY_TRUSTED_PROXIES") {
				t.Errorf("ParsePrefixes(%q) error %q does not name the variable", tc.in, err)
			}
			continue
		}
		var s []string
		for _, p := range got {
			s = append(s, p.String())
		}
		if !slices.Equal(s, tc.want) {
			t.Errorf("ParsePrefixes(%q) = %v, want %v", tc.in, s, tc.want)
		}
	}
}

// TestClientAddrIsComparable checks that what ClientAddr returns can be
// matched against prefixes from ParsePrefixes, as rate rules will.
func TestClientAddrIsComparable(t *testing.T) {
	p := mustPrefixes(t, "203.0.113.0/24")
	r := newRequest("[::ffff:127.0.0.1]:80", "X-Forwarded-For", "::ffff:203.0.113.9")
	got := auth.ClientAddr(r, mustPrefixes(t, "127.0.0.1"))
	if !p[0].Contains(got) || got != netip.MustParseAddr("203.0.113.9") {
		t.Fatalf("ClientAddr = %v, want 203.0.113.9 inside %v", got, p[0])
	}
}
