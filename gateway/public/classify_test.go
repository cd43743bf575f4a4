package public

import (
	"net/http"
	"testing"
)

func TestClassifyLink(t *testing.T) {
	for _, c := range []struct {
		method  string
		ranged  bool
		preview string
		want    linkRequest
	}{
		{http.MethodGet, false, "", linkClaim},
		{http.MethodPost, false, "", linkClaim},
		{http.MethodPost, true, "", linkClaim},          // Range plays no part in a POST
		{http.MethodPost, false, "Slackbot", linkClaim}, // nor does the agent: the form was posted
		{http.MethodGet, true, "", linkRange},
		{http.MethodHead, true, "", linkRange},
		{http.MethodGet, true, "prefetch", linkRange}, // a Range never claims, previewer or not
		{http.MethodGet, false, "prefetch", linkPreview},
		{http.MethodHead, false, "Slackbot", linkPreview},
		{http.MethodHead, false, "", linkHead},
	} {
		if got := classifyLink(c.method, c.ranged, c.preview); got != c.want {
			t.Errorf("classifyLink(%s, range %v, preview %q) = %d, want %d", c.method, c.ranged, c.preview, got, c.want)
		}
	}
}
