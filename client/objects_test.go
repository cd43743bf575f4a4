package client

import (
	"context"
	"errors"
	"net/http"
	"testing"
)

func TestDeleteObject(t *testing.T) {
	tests := []struct {
		name, bucket, key, version string
		force                      bool
		wantURI                    string
	}{
		{"Plain", "", "reports/q1 final.pdf", "v-1", false, "/v1/objects/reports/q1%20final.pdf?version_id=v-1"},
		{"ForcedInABucket", "archive", "k", "0192e7a4-0000-7000-8000-000000000000", true,
			"/v1/objects/k?bucket=archive&force=true&version_id=0192e7a4-0000-7000-8000-000000000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, c := MustFakeAPI(t, http.StatusNoContent, "")
			if err := c.DeleteObject(context.Background(), tt.bucket, tt.key, tt.version, tt.force); err != nil {
				t.Fatalf("DeleteObject = %v", err)
			}
			got := f.onlyRequest(t)
			if got.Method != http.MethodDelete || got.URI != tt.wantURI || got.Auth != "Bearer tok" {
				t.Errorf("request = %+v, want DELETE %s with the token", got, tt.wantURI)
			}
		})
	}
}

func TestDeleteObjectErrors(t *testing.T) {
	f, c := MustFakeAPI(t, http.StatusConflict, `{"type":"https://dlgate.dev/problems/object-pinned",`+
		`"title":"A live link or session pins the object version","status":409,"detail":"1 live link and 0 live sessions pin this version."}`)
	f.contentType = "application/problem+json"
	err := c.DeleteObject(context.Background(), "", "k", "v", false)
	var apiErr *Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict ||
		err.Error() != "admin API: 409 A live link or session pins the object version: 1 live link and 0 live sessions pin this version." {
		t.Errorf("DeleteObject on a pinned version = %v", err)
	}
	for _, bad := range []struct{ key, version string }{{"a//b", "v"}, {"k", ""}} {
		if err := c.DeleteObject(context.Background(), "", bad.key, bad.version, false); err == nil {
			t.Errorf("DeleteObject(%q, %q) = nil error", bad.key, bad.version)
		}
	}
	if len(f.got) != 1 {
		t.Errorf("sent %d requests, want only the first", len(f.got))
	}
}
