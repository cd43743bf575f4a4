package deliver

import (
	"fmt"
	"testing"

	"github.com/dlgate/dlgate/sessions"
)

// spans writes a coverage as "start+length" pairs, for failure messages.
func spans(c sessions.Coverage) string {
	s := ""
	for _, r := range c.Spans() {
		s += fmt.Sprintf("[%d+%d]", r.Start, r.Length)
	}
	return s
}

func TestBodyPrefixMapsOntoTheObjectsRanges(t *testing.T) {
	const size = 10_000
	two := []sessions.Range{{Start: 100, Length: 50}, {Start: 5000, Length: 200}}
	mp := sessions.NewMultipart(two, size, "application/octet-stream", "b")
	h0, h1 := int64(len(mp.PartHeader(0))), int64(len(mp.PartHeader(1)))
	whole := bodyLayout{ranges: []sessions.Range{{Start: 0, Length: size}}}
	one := bodyLayout{ranges: []sessions.Range{{Start: 700, Length: 300}}}
	multi := bodyLayout{ranges: two, mp: mp}
	for _, tc := range []struct {
		name   string
		b      bodyLayout
		n      int64
		bytes  int64
		covers string
	}{
		{"WholeNothing", whole, 0, 0, ""},
		{"WholeHalf", whole, 5000, 5000, "[0+5000]"},
		{"WholeAll", whole, size, size, "[0+10000]"},
		{"WholePastTheEnd", whole, size + 99, size, "[0+10000]"},
		{"OneRangePart", one, 120, 120, "[700+120]"},
		{"MultipartInTheFirstHeader", multi, h0 - 1, 0, ""},
		{"MultipartFirstHeaderExactly", multi, h0, 0, ""},
		{"MultipartIntoTheFirstPart", multi, h0 + 10, 10, "[100+10]"},
		{"MultipartFirstPartAndSecondHeader", multi, h0 + 50 + h1, 50, "[100+50]"},
		{"MultipartIntoTheSecondPart", multi, h0 + 50 + h1 + 7, 57, "[100+50][5000+7]"},
		{"MultipartWholeWithClosing", multi, mp.ContentLength(), 250, "[100+50][5000+200]"},
	} {
		got, c := tc.b.prefix(tc.n)
		if got != tc.bytes || spans(c) != tc.covers {
			t.Errorf("%s: prefix(%d) = %d, %s; want %d, %s", tc.name, tc.n, got, spans(c), tc.bytes, tc.covers)
		}
	}
}

func TestSettleCountsWhatWasAcknowledgedAndErrsLowOverTLS(t *testing.T) {
	whole := bodyLayout{ranges: []sessions.Range{{Start: 0, Length: 1 << 20}}}
	const n = 1 << 20
	for _, tc := range []struct {
		name          string
		c             carried
		tls, cut      bool
		acked, unsent int64
		measured      bool
	}{
		{name: "NoCountersCountWhatWasWritten", c: carried{}, acked: n, measured: false},
		{name: "PlainAllAcknowledged", c: carried{ok: true, written: n, transmitted: n, acked: n, all: true}, acked: n, measured: true},
		{name: "PlainCutAndReset", c: carried{ok: true, written: n, transmitted: 600_000, acked: 500_000, reset: true}, cut: true,
			acked: 500_000, unsent: n - 600_000, measured: true},
		{name: "PlainCutAliveGivesNothingBack", c: carried{ok: true, written: n, transmitted: 700_000, acked: 650_000}, cut: true,
			acked: 650_000, measured: true},
		// TLS: the socket's bytes are records; 1 MiB of body took 1 MiB +
		// 2,000 bytes of framing.
		{name: "TLSAllAcknowledgedIsWhole", c: carried{ok: true, written: n + 2000, transmitted: n + 2000, acked: n + 2000, all: true},
			tls: true, acked: n, measured: true},
		{name: "TLSCutIsCountedLessTheFramingAndTheBuffers", c: carried{ok: true, written: n + 2000, transmitted: n + 2000, acked: 500_000, reset: true},
			tls: true, cut: true, acked: 500_000 - 2000 - tlsSlack, measured: true},
		{name: "TLSBarelyStartedCountsNothing", c: carried{ok: true, written: n + 2000, transmitted: 9000, acked: 9000, reset: true},
			tls: true, cut: true, acked: 0, unsent: n - 9000, measured: true},
	} {
		res := Result{Sent: n}
		whole.settle(&res, n, tc.c, tc.tls, tc.cut)
		if res.Acked != tc.acked || res.Unsent != tc.unsent || res.Measured != tc.measured {
			t.Errorf("%s: settle → acked %d, unsent %d, measured %v; want %d, %d, %v", tc.name, res.Acked, res.Unsent, res.Measured, tc.acked, tc.unsent, tc.measured)
		}
		if b := res.Covered.Bytes(n); b != res.Acked {
			t.Errorf("%s: covered %s (%d bytes) for %d acknowledged", tc.name, spans(res.Covered), b, res.Acked)
		}
	}
}
