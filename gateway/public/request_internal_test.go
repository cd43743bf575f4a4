package public

import (
	"net/netip"
	"testing"
)

// addressKey names a client without a cookie as it always has: its keys
// are stored with sessions and grants (SPEC §5, §1), so a new spelling
// would lose every client's session and retry across an upgrade.
func TestAddressKeyIsStable(t *testing.T) {
	for _, tc := range []struct {
		addr, ua, want string
	}{
		{"192.0.2.7", "curl/8.5.0", "u:fiOidzj-UiPp6Ux4QxQqBQ"},
		{"", "Wget/1.21", "u:jLeXCUaUG0FPFiLDPZMiiQ"},
	} {
		c := &call{userAgent: tc.ua}
		if tc.addr != "" {
			c.caller.Addr = netip.MustParseAddr(tc.addr)
		}
		if got := addressKey(c); got != tc.want {
			t.Errorf("addressKey(%q, %q) = %q, want %q", tc.addr, tc.ua, got, tc.want)
		}
		if got := addressKey(c); got != tc.want {
			t.Errorf("addressKey(%q, %q) asked again = %q, want %q", tc.addr, tc.ua, got, tc.want)
		}
	}
}
