package webhook_test

import (
	"testing"
	"time"

	"github.com/dlgate/dlgate/webhook"
)

func TestDefaultBackoffSchedule(t *testing.T) {
	const almostOne = 0.999999999
	tests := []struct {
		attempts int
		lo, hi   time.Duration // r = 0 and r → 1
	}{
		{1, 500 * time.Millisecond, time.Second}, // SPEC §6: first retry within 5 s
		{2, time.Second, 2 * time.Second},
		{3, 2 * time.Second, 4 * time.Second},
		{4, 4 * time.Second, 8 * time.Second},
		{10, 256 * time.Second, 512 * time.Second},
		{12, 1024 * time.Second, 2048 * time.Second},
		{13, 30 * time.Minute, time.Hour}, // 4096 s capped at 1 h
		{40, 30 * time.Minute, time.Hour},
		{1000, 30 * time.Minute, time.Hour},
	}
	b := webhook.DefaultBackoff
	for _, tt := range tests {
		if got := b.Delay(tt.attempts, 0); got != tt.lo {
			t.Errorf("Delay(%d, 0) = %v, want %v", tt.attempts, got, tt.lo)
		}
		if got := b.Delay(tt.attempts, almostOne); got > tt.hi || got < tt.hi-time.Millisecond {
			t.Errorf("Delay(%d, ~1) = %v, want just under %v", tt.attempts, got, tt.hi)
		}
	}
}

func TestBackoffJitterStaysInTheUpperHalf(t *testing.T) {
	b := webhook.Backoff{First: 2 * time.Second, Max: time.Minute}
	for _, r := range []float64{0, 0.25, 0.5, 0.75, 0.99} {
		for attempts := 1; attempts <= 8; attempts++ {
			full := min(2*time.Second<<(attempts-1), time.Minute)
			if got := b.Delay(attempts, r); got < full/2 || got >= full {
				t.Errorf("Delay(%d, %v) = %v, want in [%v, %v)", attempts, r, got, full/2, full)
			}
		}
	}
}
