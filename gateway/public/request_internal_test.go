package public

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/gorilla/mux"

	"github.com/dlgate/dlgate/auth"
	"github.com/dlgate/dlgate/gateway/httpx"
	"github.com/dlgate/dlgate/gateway/metrics"
	"github.com/dlgate/dlgate/token"
)

// noCaller verifies nobody: every request is anonymous.
type noCaller struct{}

func (noCaller) Authenticate(*http.Request) (auth.Caller, error) { return auth.Caller{}, nil }

type noPreviews struct{}

func (noPreviews) Check(http.Header) string { return "" }

// The router checks a public URL's token before routing and marks the
// request (WithMinted); read trusts that mark instead of checking the MAC
// again, and checks the token itself when the mark is missing or is for
// another token or kind.
func TestReadTrustsTheRoutersCheckOfTheToken(t *testing.T) {
	ours := token.NewKeys([]byte("0123456789abcdef0123456789abcdef"))
	theirs := token.NewKeys([]byte("fedcba9876543210fedcba9876543210"))
	h := New(Config{Keys: ours, Auth: noCaller{}, Previews: noPreviews{}, Log: slog.New(slog.DiscardHandler), Metrics: metrics.New("test")})
	minted, other := ours.Derive(token.Link, "l1"), theirs.Derive(token.Link, "l1")
	for _, tc := range []struct {
		name string
		tok  string
		mark func(*http.Request) *http.Request
		ok   bool
	}{
		{"a token of ours, unmarked", minted, nil, true},
		{"another gateway's token, unmarked", other, nil, false},
		// The mark alone decides: it stands for the router's check.
		{"a marked token", other, func(r *http.Request) *http.Request { return WithMinted(r, token.Link, other) }, true},
		{"a mark for another token", other, func(r *http.Request) *http.Request { return WithMinted(r, token.Link, minted) }, false},
		{"a mark for another kind", other, func(r *http.Request) *http.Request { return WithMinted(r, token.Session, other) }, false},
	} {
		// The mark goes in the request's Info behind the listener's
		// wrapper, in its context without one.
		for _, withInfo := range []bool{false, true} {
			r := mux.SetURLVars(httptest.NewRequest(http.MethodGet, "/d/"+tc.tok, nil), map[string]string{"token": tc.tok})
			if withInfo {
				r = r.WithContext(httpx.WithInfo(r.Context(), &httpx.Info{ID: "r1"}))
			}
			if tc.mark != nil {
				r = tc.mark(r)
			}
			c, err := h.read(r, token.Link)
			if ok := err == nil; ok != tc.ok {
				t.Errorf("%s (Info %v): read = %v, want ok %v", tc.name, withInfo, err, tc.ok)
			}
			if err == nil && c.token != tc.tok {
				t.Errorf("%s (Info %v): read the token %q, want %q", tc.name, withInfo, c.token, tc.tok)
			}
		}
	}
}

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
