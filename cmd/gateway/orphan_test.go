package main

import (
	"net/http"
	"strings"
	"testing"
)

// A link the server refuses after the upload leaves no orphan object: the
// CLI deletes the version it just uploaded.
func TestARefusedLinkTakesItsUploadBack(t *testing.T) {
	dir := t.TempDir()
	hello := MustFile(t, dir, "hello.txt", "hello, world\n", 0o644)
	f := MustFakeAdmin(t)
	f.Respond = func(r *http.Request, body []byte) (int, string, string) {
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/v1/links":
			return http.StatusServiceUnavailable, "application/problem+json", `{"title":"The database is unavailable","status":503}`
		case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/v1/objects/"):
			return http.StatusNoContent, "", ""
		}
		return answerLikeTheGateway(r, body)
	}
	r := MustRun(t, adminEnv(f), "links", "create", hello, "--downloads", "1", "--expires-in", "1h")
	if r.code != 1 || !strings.Contains(r.line, "503 The database is unavailable") {
		t.Fatalf("links create = exit %d %q, want 1 and the server's refusal", r.code, r.line)
	}
	var methods []string
	for _, s := range f.requests() {
		methods = append(methods, s.Method+" "+strings.SplitN(s.URI, "?", 2)[0])
	}
	// The fake has no resumable uploads: their creation's 404 sends the
	// file with PUT.
	want := []string{"POST /v1/uploads/", "PUT /v1/objects/hello.txt", "POST /v1/links", "DELETE /v1/objects/hello.txt"}
	if strings.Join(methods, ", ") != strings.Join(want, ", ") {
		t.Fatalf("requests %v, want %v", methods, want)
	}
	if last := f.requests()[3].URI; !strings.Contains(last, "version_id=v-7") {
		t.Errorf("DELETE %s does not name the uploaded version v-7", last)
	}
}
