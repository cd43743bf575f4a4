package auth

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/realclientip/realclientip-go"
)

// ClientAddr returns the client address of r per SPEC §8 "Client address".
//
// When the direct peer (r.RemoteAddr) is inside trusted, it is the
// right-most X-Forwarded-For entry, over all header lines, that is not
// itself trusted; when there is no X-Forwarded-For, the same taken from the
// for= parameters of Forwarded (RFC 7239 §5.2). When that entry is not an
// address (garbage, "unknown", an obfuscated identifier) or every entry is
// trusted, it is the direct peer: the nearest hop known for sure. From an
// untrusted peer the forwarding headers are ignored, because anyone can
// write them.
//
// Ports and IPv6 zones are dropped and IPv4-mapped IPv6 addresses unmapped,
// so the result compares equal to what ParsePrefixes produced. It is the
// zero Addr only when r.RemoteAddr does not parse (a Unix socket).
func ClientAddr(r *http.Request, trusted []netip.Prefix) netip.Addr {
	peer, ok := parseRemoteAddr(r.RemoteAddr)
	if !ok || !isTrusted(peer, trusted) {
		return peer
	}
	header := "X-Forwarded-For"
	if len(r.Header.Values(header)) == 0 {
		header = "Forwarded"
		if len(r.Header.Values(header)) == 0 {
			return peer
		}
	}
	// The right-most-trusted-range strategy reads every line of the header,
	// parses ports, brackets, zones and quoted Forwarded values, and returns
	// "" when the first untrusted entry from the right is not an address.
	strategy, err := realclientip.NewRightmostTrustedRangeStrategy(header, ipNets(trusted))
	if err != nil { // only for a header name other than the two above
		return peer
	}
	if a, ok := normalAddr(strategy.ClientIP(r.Header, "")); ok {
		return a
	}
	return peer
}

// ParsePrefixes parses GATEWAY_TRUSTED_PROXIES: comma-separated CIDR
// prefixes ("10.0.0.0/8", "fd00::/8") or bare addresses ("192.0.2.7",
// "::1", each a one-address prefix). Blank items are skipped, host bits are
// masked off and IPv4-mapped IPv6 is unmapped. An item that is neither an
// address nor a prefix, or that has an IPv6 zone, is an error naming it.
func ParsePrefixes(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		p, err := parsePrefix(item)
		if err != nil {
			return nil, fmt.Errorf("GATEWAY_TRUSTED_PROXIES: %q is neither an IP address nor a CIDR prefix", item)
		}
		out = append(out, p)
	}
	return out, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("zone")
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// isTrusted reports whether a (already normalized) is inside trusted.
func isTrusted(a netip.Addr, trusted []netip.Prefix) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseRemoteAddr reads http.Request.RemoteAddr: "ip:port" as set by
// net/http, or a bare address as some test harnesses set it.
func parseRemoteAddr(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return normalize(ap.Addr()), true
	}
	return normalAddr(strings.TrimSuffix(strings.TrimPrefix(s, "["), "]"))
}

func normalAddr(s string) (netip.Addr, bool) {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return normalize(a), true
}

// normalize drops the zone (meaningless beyond one link, and a zoned address
// is inside no prefix) and unmaps IPv4-mapped IPv6, so one client has one
// spelling in grants, logs and prefix checks.
func normalize(a netip.Addr) netip.Addr {
	return a.WithZone("").Unmap()
}

func ipNets(ps []netip.Prefix) []net.IPNet {
	out := make([]net.IPNet, 0, len(ps))
	for _, p := range ps {
		p = p.Masked()
		out = append(out, net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())})
	}
	return out
}
