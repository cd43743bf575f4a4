package client

import "testing"

func TestChallengeScope(t *testing.T) {
	for _, c := range []struct{ challenge, want string }{
		{`Bearer realm="admin", error="insufficient_scope", scope="links:write"`, "links:write"},
		{`bearer scope="audit:read"`, "audit:read"},
		{`Bearer realm="admin", error="insufficient_scope"`, ""},
		{`Bearer realm="admin"`, ""},
		{`Basic realm="admin", scope="links:write"`, ""},
		{`Bearer scope=links:write`, ""},
		{`Bearer scope="links:write\u001b[31m"`, ""},
		{`Bearer scope=""`, ""},
		{``, ""},
	} {
		if got := challengeScope(c.challenge); got != c.want {
			t.Errorf("challengeScope(%q) = %q, want %q", c.challenge, got, c.want)
		}
	}
}

func TestErrorOfAMissingScopeIsOneShortLine(t *testing.T) {
	e := &Error{Status: 403, Type: "https://dlgate.dev/problems/insufficient-scope", Title: "The key does not hold the scope this request needs",
		Detail: "This key does not hold the scope keys:write, which this request needs.", Scope: "keys:write"}
	if got, want := e.Error(), "admin API: 403: the key does not hold the scope keys:write"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	e.Scope = ""
	if got, want := e.Error(), "admin API: 403 The key does not hold the scope this request needs: This key does not hold the scope keys:write, which this request needs."; got != want {
		t.Errorf("without a scope, Error() = %q, want %q", got, want)
	}
}
