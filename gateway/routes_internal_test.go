package gateway

import (
	"strings"
	"testing"
)

// TestNewRefusesAnAdminRouteWithoutAScope: the check New runs over the
// admin route table (checkScope) refuses a route that declares no scope
// or an unknown one, naming the route, and lets the SPEC's scopes and the
// two markers through.
func TestNewRefusesAnAdminRouteWithoutAScope(t *testing.T) {
	for _, tc := range []struct {
		scope string
		ok    bool
	}{
		{"", false},
		{"links:admin", false},
		{"Links:Read", false},
		{"links:read links:write", false},
		{scopeOpen, true},
		{scopeBootstrap, true},
		{scopeLinksRead, true},
		{scopeKeysWrite, true},
		{"objects:read", true},
	} {
		err := checkScope(route{name: "admin_new_thing", pattern: "/v1/new", scope: tc.scope})
		if (err == nil) != tc.ok {
			t.Errorf("checkScope(scope %q) = %v, want ok %v", tc.scope, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "admin_new_thing") {
			t.Errorf("checkScope(scope %q) = %q, which does not name the route", tc.scope, err)
		}
	}
}
