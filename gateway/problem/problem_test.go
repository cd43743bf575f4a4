package problem

import (
	"encoding/json"

	"github.com/dlgate/dlgate/gateway/httpx"
	"testing"
)

// problemJSON writes what encoding/json writes, plain strings or not.
func TestProblemJSONIsJSONMarshal(t *testing.T) {
	var bodies []problemBody
	for _, p := range []Problem{LinkUnavailable, SessionUnavailable, NotFound, MethodNotAllowed,
		RangeRequiresSession, RangeNotSatisfiable, AuthRequired, AuthUnavailable, AdminUnauthorized, PreconditionFailed} {
		bodies = append(bodies,
			problemBody{Type: Base + p.Type, Title: p.Title, Status: p.Status, RequestID: httpx.NewRequestID()},
			problemBody{Type: Base + p.Type, Title: p.Title, Status: p.Status})
	}
	for _, detail := range []string{"", "expires_at must be in the future", `a "quoted" word`, `back\slash`, "<script>",
		"a & b", "tab\there", "line\nbreak", "é", "\u2028", "\x7f", "bytes=0-1, 5-"} {
		bodies = append(bodies, problemBody{Type: Base + "invalid-request", Title: "Invalid request", Status: 400, Detail: detail, RequestID: "0123456789abcdef01234567"})
	}
	for _, b := range bodies {
		want, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		if got := string(problemJSON(b)); got != string(want)+"\n" {
			t.Errorf("problemJSON(%+v) =\n%s\nwant\n%s", b, got, want)
		}
	}
}

func BenchmarkProblemJSON(b *testing.B) {
	body := problemBody{Type: Base + LinkUnavailable.Type, Title: LinkUnavailable.Title, Status: 404, RequestID: httpx.NewRequestID()}
	b.ReportAllocs()
	for b.Loop() {
		problemJSON(body)
	}
}
